//! Key-value access as a Python mapping: `Keyspace` (and `Database`,
//! which is its default keyspace) behaves like a `dict` of `bytes` to
//! `bytes` whose iteration is in key order, and `KeyIterator` walks a key
//! range a chunk at a time.

use std::collections::VecDeque;
use std::ops::Bound as Edge;

use basalt::{Bytes, DbIterator, Direction, ReadOptions, WriteOptions};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::convert::binary;
use crate::errors::{self, IntoPy};
use crate::snapshot::Snapshot;
use crate::state::Shared;

/// A named key-value space of a database: its own keys, sharing the
/// database's log, caches and write budget (RocksDB's column families).
/// Writes to several keyspaces commit atomically in one `WriteBatch`.
#[pyclass(module = "basalt", subclass, frozen)]
pub struct Keyspace {
    pub(crate) state: Shared,
    pub(crate) keyspace: basalt::Keyspace,
}

/// A key range in bytes, as the engine's iterators take it.
type ByteRange = (Edge<Vec<u8>>, Edge<Vec<u8>>);

/// The smallest key above every key starting with `prefix` (`None`: the
/// prefix is all `0xff`, nothing is above it).
fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// `[start, end)` intersected with the keys starting with `prefix`.
/// A merge operand from Python: bytes, or an `int` as 8 little-endian
/// bytes (signed when it fits an `i64`, else unsigned).
pub(crate) fn merge_operand(operand: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(n) = operand.extract::<i64>() {
        return Ok(n.to_le_bytes().to_vec());
    }
    if let Ok(n) = operand.extract::<u64>() {
        return Ok(n.to_le_bytes().to_vec());
    }
    Ok(binary(operand, "operand")?.into_owned())
}

pub(crate) fn byte_range(
    start: Option<&Bound<'_, PyAny>>,
    end: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
) -> PyResult<ByteRange> {
    let mut lower = match start {
        Some(s) => Edge::Included(binary(s, "start")?.into_owned()),
        None => Edge::Unbounded,
    };
    let mut upper = match end {
        Some(e) => Edge::Excluded(binary(e, "end")?.into_owned()),
        None => Edge::Unbounded,
    };
    if let Some(p) = prefix {
        let p = binary(p, "prefix")?.into_owned();
        if !matches!(&lower, Edge::Included(s) if *s >= p) {
            lower = Edge::Included(p.clone());
        }
        if let Some(after) = after_prefix(&p)
            && !matches!(&upper, Edge::Excluded(e) if *e <= after)
        {
            upper = Edge::Excluded(after);
        }
    }
    Ok((lower, upper))
}

/// What an iterator yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Yield {
    Keys,
    Values,
    Items,
}

impl Keyspace {
    pub(crate) fn new(state: Shared, keyspace: basalt::Keyspace) -> Keyspace {
        Keyspace { state, keyspace }
    }

    /// The handle, or `ClosedError` once the database closed.
    fn open(&self, py: Python<'_>) -> PyResult<&basalt::Keyspace> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        Ok(&self.keyspace)
    }

    fn writable(&self, py: Python<'_>, what: &str) -> PyResult<&basalt::Keyspace> {
        self.state.db_for_write(py, what)?;
        Ok(&self.keyspace)
    }

    /// The value of `key` as `bytes`, read with the GIL released.
    pub(crate) fn read<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        snapshot: Option<&basalt::Snapshot>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let keyspace = self.open(py)?;
        let key = binary(key, "key")?;
        let opts = ReadOptions::default().snapshot(snapshot);
        let value: Option<Bytes> = py.detach(|| keyspace.get_opt(&key, &opts)).py_err(py)?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// An iterator over a range of this keyspace.
    #[expect(clippy::too_many_arguments, reason = "the keywords of the Python methods that call it")]
    pub(crate) fn iterate(
        &self,
        py: Python<'_>,
        what: Yield,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&basalt::Snapshot>,
    ) -> PyResult<KeyIterator> {
        let keyspace = self.open(py)?;
        let range = byte_range(start, end, prefix)?;
        let direction = if reverse { Direction::Reverse } else { Direction::Forward };
        let opts = ReadOptions::default().snapshot(snapshot);
        let iter = py.detach(|| keyspace.iter_opt(range, direction, &opts));
        Ok(KeyIterator::new(self.state.clone(), iter, what))
    }
}

#[pymethods]
impl Keyspace {
    /// The keyspace's name (`"default"` for the database's own).
    #[getter]
    fn name(&self) -> &str {
        self.keyspace.name()
    }

    fn __repr__(&self) -> String {
        format!("<basalt.Keyspace {:?}>", self.keyspace.name())
    }

    /// `self[key]`: the value, or `KeyError`.
    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, key, None)?.ok_or_else(|| errors::missing_key(key.clone().unbind()))
    }

    /// `self[key] = value`: an unsynced put.
    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    /// `del self[key]`: an unsynced delete. Like `rocksdict` (and unlike a
    /// `dict`), deleting an absent key is not an error: the delete is a
    /// tombstone written without reading.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    /// `key in self`, without copying the value.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let keyspace = self.open(py)?;
        let key = binary(key, "key")?;
        let found = py.detach(|| keyspace.get_with(&key, |_| ())).py_err(py)?;
        Ok(found.is_some())
    }

    /// The value of `key`, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(match self.read(py, key, None)? {
            Some(v) => Some(v.into_any()),
            None => default,
        })
    }

    /// Sets `key` to `value`; with `sync=True` the write is on disk (the
    /// log fsynced) before this returns.
    #[pyo3(signature = (key, value, sync=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let keyspace = self.writable(py, "put")?;
        let key = binary(key, "key")?;
        let value = binary(value, "value")?;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| keyspace.put_opt(&key, &value, &opts)).py_err(py)
    }

    /// Deletes `key` (absent or not).
    #[pyo3(signature = (key, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let keyspace = self.writable(py, "delete")?;
        let key = binary(key, "key")?;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| keyspace.delete_opt(&key, &opts)).py_err(py)
    }

    /// Binds the keyspace to the merge operator `name` (a builtin:
    /// `add_i64`, `add_u64`, `min_i64`, `max_i64`, `min_u64`, `max_u64`,
    /// `append`), kept in the database: then `merge` adds operands.
    fn set_merge_operator(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let keyspace = self.writable(py, "set_merge_operator")?;
        py.detach(|| keyspace.set_merge_operator(name)).py_err(py)
    }

    /// Sets how long each version lives after its commit (a `timedelta`
    /// or seconds; `None`: for ever), kept in the database: an expired
    /// version is gone from every read at once and compaction drops it.
    fn set_ttl(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let ttl = crate::history::ttl(py, ttl)?;
        let keyspace = self.open(py)?;
        self.state.db_for_write(py, "set_ttl")?;
        py.detach(|| keyspace.set_ttl(ttl)).py_err(py)
    }

    /// The time to live as a `timedelta`, or `None`.
    #[getter]
    fn ttl<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.open(py)?.ttl().map(|d| crate::history::timedelta(py, d)).transpose()
    }

    /// The merge operator the keyspace is bound to, or `None`.
    #[getter]
    fn merge_operator(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.open(py)?.merge_operator())
    }

    /// Adds `operand` to `key` without reading it: the keyspace's merge
    /// operator folds it onto the key's value when read. An `int` operand
    /// is an 8-byte little-endian integer (what the integer operators take).
    #[pyo3(signature = (key, operand, *, sync=false))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let keyspace = self.writable(py, "merge")?;
        let key = binary(key, "key")?;
        let operand = merge_operand(operand)?;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| keyspace.merge_opt(&key, &operand, &opts)).py_err(py)
    }

    /// Deletes every key in `[start, end)` (from the first key, to the last,
    /// by default): one write however many keys the range holds.
    #[pyo3(signature = (start=None, end=None, *, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        sync: bool,
    ) -> PyResult<()> {
        let keyspace = self.writable(py, "delete_range")?;
        let range = byte_range(start, end, None)?;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| keyspace.delete_range_opt(range, &opts)).py_err(py)
    }

    /// The values of `keys`, in order, `None` for an absent key: one call,
    /// the GIL released once, every key read at the same moment.
    fn multi_get<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let keyspace = self.open(py)?;
        let db = self.state.db(py)?;
        let keys: Vec<Vec<u8>> = keys
            .try_iter()?
            .map(|k| binary(&k?, "key").map(std::borrow::Cow::into_owned))
            .collect::<PyResult<_>>()?;
        let values: Vec<Option<Bytes>> = py
            .detach(|| {
                // One snapshot for all: a write between two reads cannot
                // show half of itself.
                let snapshot = db.snapshot();
                let opts = ReadOptions::default().snapshot(Some(&snapshot));
                keys.iter().map(|k| keyspace.get_opt(k, &opts)).collect::<basalt::Result<_>>()
            })
            .py_err(py)?;
        PyList::new(py, values.iter().map(|v| v.as_ref().map(|v| PyBytes::new(py, v))))
    }

    /// The keys in `[start, end)` (and starting with `prefix`), ascending
    /// or, with `reverse`, descending.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<KeyIterator> {
        self.iterate(py, Yield::Keys, start, end, prefix, reverse, None)
    }

    /// The values of the keys `keys` would yield, in the same order.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<KeyIterator> {
        self.iterate(py, Yield::Values, start, end, prefix, reverse, None)
    }

    /// `(key, value)` pairs, as `keys` orders them.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<KeyIterator> {
        self.iterate(py, Yield::Items, start, end, prefix, reverse, None)
    }

    /// Iterates over the keys, ascending.
    fn __iter__(&self, py: Python<'_>) -> PyResult<KeyIterator> {
        self.iterate(py, Yield::Keys, None, None, None, false, None)
    }

    /// The number of keys: exact, so it reads every key (with the GIL
    /// released, values not copied): O(keys), not O(1) as for a `dict`.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let keyspace = self.open(py)?;
        py.detach(|| {
            let mut n = 0usize;
            for entry in keyspace.iter::<&[u8]>(..) {
                entry?;
                n += 1;
            }
            Ok(n)
        })
        .py_err(py)
    }

    /// A consistent view of the database (every keyspace and table) as of
    /// now, or `as_of` a past point: a seqno (`int`) or an aware
    /// `datetime`, read by every keyspace and table whose history window
    /// holds it (others raise `HistoryUnavailableError`); a context
    /// manager that releases it on exit.
    #[pyo3(signature = (as_of=None))]
    fn snapshot(&self, py: Python<'_>, as_of: Option<&Bound<'_, PyAny>>) -> PyResult<Snapshot> {
        let point = as_of.map(|p| crate::history::as_of(py, p)).transpose()?;
        Snapshot::take(py, &self.state, point)
    }

    /// Keeps history from now on: every version committed within `keep`
    /// (a `timedelta` or seconds) and/or each key's newest `versions`.
    /// `set_history(None)` turns it off.
    #[pyo3(signature = (keep=None, *, versions=None))]
    fn set_history(
        &self,
        py: Python<'_>,
        keep: Option<&Bound<'_, PyAny>>,
        versions: Option<u32>,
    ) -> PyResult<()> {
        let window = crate::history::window(py, keep, versions)?;
        let keyspace = self.open(py)?;
        self.state.db_for_write(py, "set_history")?;
        py.detach(|| keyspace.set_history(window)).py_err(py)
    }

    /// The history window as a `dict` (`keep`, `versions`, `since`,
    /// `oldest_seqno`, `oldest_time`), or `None` when off.
    #[getter]
    fn history_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let keyspace = self.open(py)?;
        crate::history::info(py, keyspace.history_info())
    }

    /// The versions of `key` the window keeps, newest first, as
    /// `(seqno, commit_time, value)` tuples (`value` is `None` for a
    /// delete); at most `limit`, within `since`/`until` (seqnos or aware
    /// `datetime`s).
    #[pyo3(signature = (key, *, limit=None, since=None, until=None))]
    fn history<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        limit: Option<usize>,
        since: Option<&Bound<'py, PyAny>>,
        until: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let keyspace = self.open(py)?;
        let key = binary(key, "key")?;
        let opts = crate::history::options(py, limit, since, until)?;
        let versions = py.detach(|| keyspace.history(&key, opts)).py_err(py)?;
        versions
            .into_iter()
            .map(|v| {
                let value = v.value.map(|b| PyBytes::new(py, &b));
                PyTuple::new(
                    py,
                    [
                        v.seqno.into_pyobject(py)?.into_any(),
                        crate::history::datetime(py, v.commit_time)?.into_pyobject(py)?,
                        value.into_pyobject(py)?,
                    ],
                )
            })
            .collect()
    }

    /// The committed changes after seqno `since`, in commit order, as
    /// `(seqno, commit_time, key, value)` tuples (`value` is `None` for a
    /// delete; a range delete's `key` is a `(start, end)` tuple, `end`
    /// `None` for no end), at most `limit`; resume from the last seqno read.
    #[pyo3(signature = (since=0, *, limit=None))]
    fn changes<'py>(
        &self,
        py: Python<'py>,
        since: u64,
        limit: Option<usize>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let keyspace = self.open(py)?;
        let changes = py.detach(|| keyspace.changes(since, limit.unwrap_or(usize::MAX))).py_err(py)?;
        changes
            .into_iter()
            .map(|c| {
                PyTuple::new(
                    py,
                    [
                        c.seqno.into_pyobject(py)?.into_any(),
                        crate::history::datetime(py, c.commit_time)?.into_pyobject(py)?,
                        match &c.range_end {
                            None => PyBytes::new(py, &c.key).into_any(),
                            Some(end) => {
                                let end = match end {
                                    std::ops::Bound::Excluded(e) | std::ops::Bound::Included(e) => {
                                        Some(PyBytes::new(py, e))
                                    }
                                    std::ops::Bound::Unbounded => None,
                                };
                                PyTuple::new(
                                    py,
                                    [PyBytes::new(py, &c.key).into_any(), end.into_pyobject(py)?.into_any()],
                                )?
                                .into_any()
                            }
                        },
                        c.value.map(|v| PyBytes::new(py, &v)).into_pyobject(py)?,
                    ],
                )
            })
            .collect()
    }

    /// Compacts the keys in `[start, end)` down the levels (all keys by
    /// default), with the GIL released.
    #[pyo3(signature = (start=None, end=None))]
    fn compact(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let keyspace = self.writable(py, "compact")?;
        let range = byte_range(start, end, None)?;
        py.detach(|| keyspace.compact_range(range)).py_err(py)
    }
}

/// Keys, values or pairs of a key range, fetched from the engine a chunk
/// at a time with the GIL released (a chunk grows from 16 to 1024
/// entries, so a short walk stays cheap and a long one amortizes the
/// release). Raises `ClosedError` once its database closed.
#[pyclass(module = "basalt", frozen)]
pub struct KeyIterator {
    state: Shared,
    what: Yield,
    inner: Mutex<IterState>,
}

struct IterState {
    iter: DbIterator,
    /// The current chunk's bytes: each entry's key, then its value unless
    /// only keys are wanted. Filled through `next_borrowed`, so a chunk
    /// costs one growing buffer, not two reference-counted `Bytes` and a
    /// queue slot per entry.
    bytes: Vec<u8>,
    /// Where each buffered entry's key and value end in `bytes`, oldest
    /// first; the entry before it (or 0) is where its key starts.
    ends: VecDeque<(usize, usize)>,
    /// Where the entry at the front of `ends` starts in `bytes`.
    front: usize,
    chunk: usize,
    done: bool,
}

impl IterState {
    /// The next chunk of entries (the GIL released by the caller), taken
    /// when the last one is used up.
    fn refill(&mut self, what: Yield) -> basalt::Result<()> {
        let chunk = self.chunk;
        self.chunk = (chunk * 2).min(1024);
        self.bytes.clear();
        self.front = 0;
        for _ in 0..chunk {
            match self.iter.next_borrowed() {
                Some(Ok((key, value))) => {
                    if what != Yield::Values {
                        self.bytes.extend_from_slice(key);
                    }
                    let key_end = self.bytes.len();
                    if what != Yield::Keys {
                        self.bytes.extend_from_slice(value);
                    }
                    self.ends.push_back((key_end, self.bytes.len()));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        Ok(())
    }

    /// The next buffered entry's bytes as Python `bytes`, if one is
    /// buffered: the key (or the value, for `Values`), and for `Items`
    /// the value too. Only `bytes` are made here, under the caller's
    /// lock: their allocation runs no Python code (a tuple's may start a
    /// garbage collection, whose finalizers could call this iterator).
    fn pop<'py>(
        &mut self,
        py: Python<'py>,
        what: Yield,
    ) -> Option<(Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)> {
        let (key_end, value_end) = self.ends.pop_front()?;
        let key = &self.bytes[self.front..key_end];
        let value = &self.bytes[key_end..value_end];
        self.front = value_end;
        Some(match what {
            Yield::Keys => (PyBytes::new(py, key), None),
            Yield::Values => (PyBytes::new(py, value), None),
            Yield::Items => (PyBytes::new(py, key), Some(PyBytes::new(py, value))),
        })
    }
}

impl KeyIterator {
    pub(crate) fn new(state: Shared, iter: DbIterator, what: Yield) -> KeyIterator {
        KeyIterator {
            state,
            what,
            inner: Mutex::new(IterState {
                iter,
                bytes: Vec::new(),
                ends: VecDeque::new(),
                front: 0,
                chunk: 16,
                done: false,
            }),
        }
    }
}

#[pymethods]
impl KeyIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        // The lock is never held across a release of the GIL (another
        // thread holding the GIL and waiting for it would deadlock): the
        // buffered entry is taken with the GIL held, a refill takes the
        // lock with the GIL released.
        // Another thread may take a refilled chunk between the refill and
        // this thread's pop: refill again until an entry comes or the
        // iterator is done (seen under one hold of the lock).
        let entry = loop {
            {
                let mut state = self.inner.lock();
                if let Some(entry) = state.pop(py, self.what) {
                    break Some(entry);
                }
                if state.done {
                    break None;
                }
            }
            py.detach(|| {
                let mut state = self.inner.lock();
                if state.ends.is_empty() && !state.done {
                    state.refill(self.what)?;
                }
                Ok(())
            })
            .py_err(py)?;
        };
        Ok(match entry {
            None => None,
            Some((one, None)) => Some(one.into_any()),
            Some((key, Some(value))) => Some(PyTuple::new(py, [key, value])?.into_any()),
        })
    }
}
