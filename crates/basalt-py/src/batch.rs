//! `WriteBatch`: puts, deletes and table rows across keyspaces and tables,
//! committed atomically — as a context manager, on a clean exit, and
//! discarded when the block raises.

use basalt::WriteOptions;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::binary;
use crate::errors::{self, IntoPy};
use crate::keyspace::Keyspace;
use crate::state::Shared;
use crate::table::Table;

/// Writes gathered in memory and applied all together or not at all.
/// `with db.write_batch() as b: ...` commits when the block ends without
/// an exception and discards the writes when it raises; `commit()` does it
/// by hand. A batch commits once.
#[pyclass(module = "basalt", frozen)]
pub struct WriteBatch {
    state: Shared,
    /// `None` once committed or discarded.
    batch: Mutex<Option<basalt::WriteBatch>>,
}

impl WriteBatch {
    pub(crate) fn new(state: Shared) -> WriteBatch {
        WriteBatch { state, batch: Mutex::new(Some(basalt::WriteBatch::new())) }
    }

    /// Runs `f` on the pending batch; `InvalidArgumentError` once it was
    /// committed or discarded.
    fn pending<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut basalt::WriteBatch) -> PyResult<T>,
    ) -> PyResult<T> {
        let mut guard = self.batch.lock();
        match guard.as_mut() {
            Some(batch) => f(batch),
            None => {
                Err(errors::invalid(py, "this WriteBatch was already committed or discarded".to_string()))
            }
        }
    }

    /// The keyspace handle to write to, checked to be of this database.
    fn target<'a>(
        &self,
        py: Python<'_>,
        keyspace: Option<&'a Bound<'_, Keyspace>>,
    ) -> PyResult<Option<&'a basalt::Keyspace>> {
        let Some(ks) = keyspace else { return Ok(None) };
        let ks = ks.get();
        if !std::sync::Arc::ptr_eq(&ks.state, &self.state) {
            return Err(errors::invalid(py, "the keyspace belongs to another database".to_string()));
        }
        Ok(Some(&ks.keyspace))
    }
}

#[pymethods]
impl WriteBatch {
    /// Adds a put of `key` → `value` (to `keyspace`, the default one if
    /// omitted).
    #[pyo3(signature = (key, value, *, keyspace=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let key = binary(key, "key")?;
        let value = binary(value, "value")?;
        self.pending(py, |batch| {
            if let Some(ks) = target {
                batch.put_keyspace(ks, &key, &value).py_err(py)
            } else {
                batch.put(&key, &value);
                Ok(())
            }
        })
    }

    /// Adds a merge operand for `key` (in `keyspace`, the default one if
    /// omitted); an `int` operand is 8 little-endian bytes.
    #[pyo3(signature = (key, operand, *, keyspace=None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let key = binary(key, "key")?;
        let operand = crate::keyspace::merge_operand(operand)?;
        self.pending(py, |batch| {
            if let Some(ks) = target {
                batch.merge_keyspace(ks, &key, &operand).py_err(py)
            } else {
                batch.merge(&key, &operand);
                Ok(())
            }
        })
    }

    /// Adds a delete of every key in `[start, end)` (in `keyspace`, the
    /// default one if omitted; every key by default): one entry.
    #[pyo3(signature = (start=None, end=None, *, keyspace=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let range = crate::keyspace::byte_range(start, end, None)?;
        self.pending(py, |batch| {
            if let Some(ks) = target {
                batch.delete_range_keyspace(ks, range).py_err(py)
            } else {
                batch.delete_range(range);
                Ok(())
            }
        })
    }

    /// Adds a delete of `key` (in `keyspace`, the default one if omitted).
    #[pyo3(signature = (key, *, keyspace=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let target = self.target(py, keyspace)?;
        let key = binary(key, "key")?;
        self.pending(py, |batch| {
            if let Some(ks) = target {
                batch.delete_keyspace(ks, &key).py_err(py)
            } else {
                batch.delete(&key);
                Ok(())
            }
        })
    }

    /// Adds the rows of `data` (anything `Table.write` takes) to `table`,
    /// upserting by primary key (its indexes kept in the same commit).
    fn write(&self, py: Python<'_>, table: &Bound<'_, Table>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let table = table.get();
        let handle = table.handle(py)?;
        let batches = table.conformed_batches(py, data)?;
        self.pending(py, |batch| {
            for b in &batches {
                batch.put_table(handle, b).py_err(py)?;
            }
            Ok(())
        })
    }

    /// Adds deletes of the rows of `table` whose keys are `keys` (as
    /// `Table.delete` takes them).
    fn delete_rows(&self, py: Python<'_>, table: &Bound<'_, Table>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        let table = table.get();
        let handle = table.handle(py)?;
        let keys = table.key_batch(py, keys)?;
        self.pending(py, |batch| batch.delete_table(handle, &keys).py_err(py))
    }

    /// Operations added so far (0 once committed).
    fn __len__(&self) -> usize {
        self.batch.lock().as_ref().map_or(0, basalt::WriteBatch::len)
    }

    /// Applies every operation atomically; with `sync=True` they are on
    /// disk before this returns. The batch is spent afterwards.
    #[pyo3(signature = (sync=false))]
    fn commit(&self, py: Python<'_>, sync: bool) -> PyResult<()> {
        let db = self.state.db_for_write(py, "commit")?;
        let Some(batch) = self.batch.lock().take() else {
            return Err(errors::invalid(
                py,
                "this WriteBatch was already committed or discarded".to_string(),
            ));
        };
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| db.write_opt(batch, &opts)).py_err(py)
    }

    /// Drops every operation; the batch is spent.
    fn discard(&self) {
        self.batch.lock().take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Commits on a clean exit (unless already committed or discarded);
    /// discards when the block raised. Never swallows the exception.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.get_item(0).is_ok_and(|t| !t.is_none());
        if raised {
            self.discard();
        } else if self.batch.lock().is_some() {
            self.commit(py, false)?;
        }
        Ok(false)
    }
}
