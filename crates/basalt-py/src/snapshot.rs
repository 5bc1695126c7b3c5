//! `Snapshot`: a consistent read view of a whole database (every keyspace
//! and table) as of one moment, a context manager that releases it.

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;
use crate::keyspace::{KeyIterator, Keyspace, Yield};
use crate::state::Shared;

/// A read view of the database as of the moment it was taken. Reads of
/// the default keyspace go through its own methods; other keyspaces and
/// tables take it as `snapshot=`. Holding one keeps the versions it sees
/// from being compacted away, so release it (`with`, or `close()`).
#[pyclass(module = "basalt", frozen)]
pub struct Snapshot {
    state: Shared,
    /// `None` once released.
    view: RwLock<Option<basalt::Snapshot>>,
    /// The default keyspace, for the mapping methods.
    default: Py<Keyspace>,
}

impl Snapshot {
    /// A snapshot of now, or as of a past point.
    pub(crate) fn take(py: Python<'_>, state: &Shared, as_of: Option<basalt::AsOf>) -> PyResult<Snapshot> {
        let db = state.db(py)?;
        let keyspace = db.keyspace("default").map_err(|e| errors::to_py(py, e))?;
        let default = Py::new(py, Keyspace::new(state.clone(), keyspace))?;
        let view = match as_of {
            None => db.snapshot(),
            Some(point) => db.snapshot_at(point).map_err(|e| errors::to_py(py, e))?,
        };
        Ok(Snapshot { state: state.clone(), view: RwLock::new(Some(view)), default })
    }

    /// [`Snapshot::with`] for a read of a handle of `state`'s database:
    /// `InvalidArgumentError` when the snapshot is of another database.
    pub(crate) fn with_for<T>(
        &self,
        py: Python<'_>,
        state: &Shared,
        f: impl FnOnce(&basalt::Snapshot) -> PyResult<T>,
    ) -> PyResult<T> {
        if !std::sync::Arc::ptr_eq(&self.state, state) {
            return Err(errors::invalid(py, "the snapshot belongs to another database".to_string()));
        }
        self.with(py, f)
    }

    /// Runs `f` with the engine's snapshot, or raises `ClosedError` when it
    /// (or its database) was closed.
    pub(crate) fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&basalt::Snapshot) -> PyResult<T>,
    ) -> PyResult<T> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        // A clone (another handle on the same moment), so that no lock is
        // held while `f` releases the GIL.
        let view = self.view.read().clone();
        match view {
            Some(s) => f(&s),
            None => Err(errors::closed_handle(py, "the snapshot was released (closed)")),
        }
    }

    fn keyspace<'py>(&self, py: Python<'py>, keyspace: Option<Bound<'py, Keyspace>>) -> Bound<'py, Keyspace> {
        keyspace.unwrap_or_else(|| self.default.bind(py).clone())
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number the snapshot reads at.
    #[getter]
    fn seqno(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| Ok(s.seqno()))
    }

    /// When the commit the snapshot reads after was made (an aware UTC
    /// `datetime`), if on record.
    #[getter]
    fn commit_time<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let t = self.with(py, |s| Ok(s.commit_time()))?;
        crate::history::datetime(py, t)
    }

    /// The value of `key` in `keyspace` (the default one if omitted) as of
    /// the snapshot, or `default`.
    #[pyo3(signature = (key, default=None, *, keyspace=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        keyspace: Option<Bound<'py, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let ks = self.keyspace(py, keyspace);
        let found = self.with_for(py, &ks.get().state.clone(), |s| ks.get().read(py, key, Some(s)))?;
        Ok(found.map(Bound::into_any).or(default))
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ks = self.default.bind(py);
        self.with_for(py, &ks.get().state.clone(), |s| ks.get().read(py, key, Some(s)))?
            .ok_or_else(|| errors::missing_key(key.clone().unbind()))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ks = self.default.bind(py);
        Ok(self.with_for(py, &ks.get().state.clone(), |s| ks.get().read(py, key, Some(s)))?.is_some())
    }

    /// The values of `keys` as of the snapshot, `None` for absent ones.
    #[pyo3(signature = (keys, *, keyspace=None))]
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        keyspace: Option<Bound<'py, Keyspace>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let ks = self.keyspace(py, keyspace);
        self.with(py, |s| keys.try_iter()?.map(|k| ks.get().read(py, &k?, Some(s))).collect())
    }

    /// Keys of a range as of the snapshot (see `Keyspace.keys`).
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, keyspace=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        keyspace: Option<Bound<'_, Keyspace>>,
    ) -> PyResult<KeyIterator> {
        let ks = self.keyspace(py, keyspace);
        self.with_for(py, &ks.get().state.clone(), |s| {
            ks.get().iterate(py, Yield::Keys, start, end, prefix, reverse, Some(s))
        })
    }

    /// Values of a range as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, keyspace=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        keyspace: Option<Bound<'_, Keyspace>>,
    ) -> PyResult<KeyIterator> {
        let ks = self.keyspace(py, keyspace);
        self.with_for(py, &ks.get().state.clone(), |s| {
            ks.get().iterate(py, Yield::Values, start, end, prefix, reverse, Some(s))
        })
    }

    /// `(key, value)` pairs of a range as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, keyspace=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        keyspace: Option<Bound<'_, Keyspace>>,
    ) -> PyResult<KeyIterator> {
        let ks = self.keyspace(py, keyspace);
        self.with_for(py, &ks.get().state.clone(), |s| {
            ks.get().iterate(py, Yield::Items, start, end, prefix, reverse, Some(s))
        })
    }

    /// Releases the snapshot (iterators made from it keep reading at it).
    fn close(&self) {
        self.view.write().take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}
