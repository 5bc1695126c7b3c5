//! `Transaction`: an optimistic transaction (snapshot isolation, first
//! committer wins) — reads at its snapshot with its own writes on top,
//! writes to keyspaces and tables committed together, a context manager
//! that commits on a clean exit and rolls back when the block raises.

use basalt::{KeyValue, OwnedKeyValue, WriteOptions};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::convert::{self, binary};
use crate::errors::{self, IntoPy};
use crate::keyspace::Keyspace;
use crate::state::Shared;
use crate::table::Table;

/// A transaction of this database (`db.transaction()`). Reads see the
/// database as of its start plus its own writes; `commit()` applies every
/// write at once, or raises `ConflictError` (nothing written) when another
/// commit wrote a key it wrote or read with `get_for_update` since it
/// began. `with db.transaction() as tx:` commits on a clean exit and rolls
/// back when the block raises. A transaction ends once.
#[pyclass(module = "basalt", frozen)]
pub struct Transaction {
    state: Shared,
    /// `None` once committed or rolled back.
    tx: Mutex<Option<basalt::Transaction>>,
}

impl Transaction {
    pub(crate) fn begin(py: Python<'_>, state: Shared) -> PyResult<Transaction> {
        let db = state.db(py)?;
        let tx = db.transaction();
        Ok(Transaction { state, tx: Mutex::new(Some(tx)) })
    }

    /// Runs `f` on the open transaction with the GIL released (the lock is
    /// taken without it: a thread waiting for it must not hold the GIL the
    /// holder needs); `InvalidArgumentError` once it ended.
    fn open<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut basalt::Transaction) -> basalt::Result<T> + Send,
    ) -> PyResult<T> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        let result = py.detach(|| {
            let mut guard = self.tx.lock();
            guard.as_mut().map(f)
        });
        match result {
            Some(r) => r.py_err(py),
            None => {
                Err(errors::invalid(py, "this transaction was already committed or rolled back".to_string()))
            }
        }
    }

    /// The keyspace handle named by `keyspace=`, checked to be of this
    /// database.
    fn target(
        &self,
        py: Python<'_>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Option<basalt::Keyspace>> {
        let Some(ks) = keyspace else { return Ok(None) };
        let ks = ks.get();
        if !std::sync::Arc::ptr_eq(&ks.state, &self.state) {
            return Err(errors::invalid(py, "the keyspace belongs to another database".to_string()));
        }
        Ok(Some(ks.keyspace.clone()))
    }

    fn table<'t>(&self, py: Python<'_>, table: &'t Bound<'_, Table>) -> PyResult<&'t Table> {
        let table = table.get();
        if !std::sync::Arc::ptr_eq(table.state(), &self.state) {
            return Err(errors::invalid(py, "the table belongs to another database".to_string()));
        }
        Ok(table)
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        keyspace: Option<&Bound<'py, Keyspace>>,
        for_update: bool,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let target = self.target(py, keyspace)?;
        let key = binary(key, "key")?;
        let value = self.open(py, |tx| match (&target, for_update) {
            (Some(ks), false) => tx.get_keyspace(ks, &key),
            (Some(ks), true) => tx.get_keyspace_for_update(ks, &key),
            (None, false) => tx.get(&key),
            (None, true) => tx.get_for_update(&key),
        })?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    fn read_row<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, Table>,
        key: &Bound<'py, PyAny>,
        for_update: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let table = self.table(py, table)?;
        let handle = table.handle(py)?;
        let key = convert::key_values(py, key, &table.key_fields(), false)?;
        let row = self.open(py, |tx| {
            let borrowed: Vec<KeyValue<'_>> = key.iter().map(OwnedKeyValue::as_value).collect();
            if for_update {
                tx.get_table_for_update(handle, &borrowed)
            } else {
                tx.get_table(handle, &borrowed)
            }
        })?;
        row.map(|r| crate::rows::row_as_dict(py, &r).map(Bound::into_any)).transpose()
    }
}

#[pymethods]
impl Transaction {
    /// `tx[key]`: the value in the default keyspace as the transaction
    /// sees it; `KeyError` when absent.
    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, key, None, false)?.ok_or_else(|| errors::missing_key(key.clone().unbind()))
    }

    /// `tx[key] = value`: a put in the default keyspace.
    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    /// `del tx[key]`: a delete in the default keyspace (of an absent key
    /// too, as `del db[key]`).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    /// The value of `key` (in `keyspace`, the default one if omitted) as
    /// the transaction sees it, or `default`.
    #[pyo3(signature = (key, default=None, *, keyspace=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        keyspace: Option<&Bound<'py, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.read(py, key, keyspace, false)?.map(Bound::into_any).or(default))
    }

    /// `get`, and the commit raises `ConflictError` if another commit
    /// writes `key` after this transaction began (`None` when absent).
    #[pyo3(signature = (key, *, keyspace=None))]
    fn get_for_update<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        keyspace: Option<&Bound<'py, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.read(py, key, keyspace, true)
    }

    /// Sets `key` to `value` (in `keyspace`, the default one if omitted).
    #[pyo3(signature = (key, value, *, keyspace=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let (key, value) = (binary(key, "key")?, binary(value, "value")?);
        self.open(py, |tx| match &target {
            Some(ks) => tx.put_keyspace(ks, &key, &value),
            None => tx.put(&key, &value),
        })
    }

    /// Deletes `key` (in `keyspace`, the default one if omitted).
    #[pyo3(signature = (key, *, keyspace=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let key = binary(key, "key")?;
        self.open(py, |tx| match &target {
            Some(ks) => tx.delete_keyspace(ks, &key),
            None => tx.delete(&key),
        })
    }

    /// The row of `table` with primary key `key` (as `Table.get` takes it)
    /// as the transaction sees it, a `dict`, or `None`.
    fn get_row<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, Table>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.read_row(py, table, key, false)
    }

    /// The rows of `table` as this transaction sees them — its snapshot
    /// with its own writes on top — as one `pyarrow.Table`, with the
    /// arguments of `Table.to_arrow`.
    #[pyo3(signature = (table, *, columns=None, r#where=None, start=None, end=None, reverse=false))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    fn to_arrow<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, Table>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'py, PyAny>>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        reverse: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.table(py, table)?;
        let handle = table.handle(py)?.clone();
        let (snapshot, overlay) = self.open(py, |tx| Ok((tx.snapshot().clone(), tx.overlay(&handle))))?;
        let scan =
            table.scan_in_transaction(py, columns, r#where, start, end, reverse, &snapshot, &overlay)?;
        Bound::new(py, scan)?.call_method0("read_all")
    }

    /// `get_row`, and the commit raises `ConflictError` if another commit
    /// writes that row after this transaction began.
    fn get_row_for_update<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, Table>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.read_row(py, table, key, true)
    }

    /// Upserts the rows of `data` (anything `Table.write` takes) into
    /// `table`; its indexes are kept, and unique ones checked, at commit.
    fn write(&self, py: Python<'_>, table: &Bound<'_, Table>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let table = self.table(py, table)?;
        let handle = table.handle(py)?;
        let batches = table.conformed_batches(py, data)?;
        // All of `data` or none of it: the chunks go into one batch first.
        self.open(py, |tx| {
            let mut part = basalt::WriteBatch::new();
            for b in &batches {
                part.put_table(handle, b)?;
            }
            tx.write(part)
        })
    }

    /// Deletes the rows of `table` whose keys are `keys` (as `Table.delete`
    /// takes them).
    fn delete_rows(&self, py: Python<'_>, table: &Bound<'_, Table>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        let table = self.table(py, table)?;
        let handle = table.handle(py)?;
        let keys = table.key_batch(py, keys)?;
        self.open(py, |tx| tx.delete_table(handle, &keys))
    }

    /// Writes so far (key-value entries and table rows; 0 once ended).
    fn __len__(&self) -> usize {
        self.tx.lock().as_ref().map_or(0, basalt::Transaction::len)
    }

    /// Whether the transaction is still open (not committed or rolled back).
    #[getter]
    fn active(&self) -> bool {
        self.tx.lock().is_some()
    }

    /// Applies every write at once (durable before this returns with
    /// `sync=True`), or raises `ConflictError` and writes nothing. The
    /// transaction has ended either way.
    #[pyo3(signature = (sync=false))]
    fn commit(&self, py: Python<'_>, sync: bool) -> PyResult<()> {
        self.state.db_for_write(py, "commit")?;
        let Some(tx) = py.detach(|| self.tx.lock().take()) else {
            return Err(errors::invalid(
                py,
                "this transaction was already committed or rolled back".to_string(),
            ));
        };
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| tx.commit_opt(&opts)).py_err(py)
    }

    /// Ends the transaction without writing anything.
    fn rollback(&self, py: Python<'_>) {
        py.detach(|| self.tx.lock().take());
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Commits on a clean exit (unless it already ended), rolls back when
    /// the block raised. Never swallows the exception; a commit's
    /// `ConflictError` is raised from here.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.get_item(0).is_ok_and(|t| !t.is_none());
        if raised {
            self.rollback(py);
        } else if self.active() {
            self.commit(py, false)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.tx.lock().as_ref() {
            Some(tx) => format!("Transaction(writes={})", tx.len()),
            None => "Transaction(ended)".to_string(),
        }
    }
}
