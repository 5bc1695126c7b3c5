//! The map of a sharded store, for `basalt.sharded` and `basalt.ray_data`: a
//! thin binding of `basalt::ShardMap`, which owns the file format and
//! routes keys by their encoded bytes (the engine's order).

use std::path::PathBuf;

use arrow_schema::Field;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3_arrow::PySchema;

use crate::convert::key_values;
use crate::errors::IntoPy;
use crate::rows::key_value_to_py;

/// A sharded store's map: which directory holds which primary-key range.
#[pyclass(name = "ShardMap", module = "basalt._basalt", frozen)]
pub struct ShardMap {
    pub(crate) map: basalt::ShardMap,
}

impl ShardMap {
    /// The key columns, with the table's types.
    fn key_fields(&self) -> Vec<Field> {
        self.map.key_schema().fields().iter().map(|f| f.as_ref().clone()).collect()
    }
}

#[pymethods]
impl ShardMap {
    /// The first version of the map of a store of `table`, keyed by the
    /// fields of `key_schema` (the primary key's columns, in key order),
    /// cut at `split_points` (keys or key prefixes: a value, or a tuple for
    /// a key of several columns), strictly ascending.
    #[staticmethod]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn create(
        py: Python<'_>,
        table: &str,
        key_schema: PySchema,
        split_points: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<ShardMap> {
        let fields: Vec<Field> = key_schema.as_ref().fields().iter().map(|f| f.as_ref().clone()).collect();
        let points =
            split_points.iter().map(|p| key_values(py, p, &fields, true)).collect::<PyResult<Vec<_>>>()?;
        let map = basalt::ShardMap::new(table, &fields, points).py_err(py)?;
        Ok(ShardMap { map })
    }

    /// The map of the store in `path`.
    #[staticmethod]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn read(py: Python<'_>, path: PathBuf) -> PyResult<ShardMap> {
        let map = py.detach(|| basalt::ShardMap::read(&basalt::fs::RealFs, &path)).py_err(py)?;
        Ok(ShardMap { map })
    }

    /// Replaces the map of the store in `path` by this one, atomically
    /// and durably.
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.map.write(&basalt::fs::RealFs, &path)).py_err(py)
    }

    /// This map at `version` with each shard in the directory `paths`
    /// names (the same table, key and split points).
    fn with_paths(&self, py: Python<'_>, version: u64, paths: Vec<String>) -> PyResult<ShardMap> {
        Ok(ShardMap { map: self.map.with_paths(version, paths).py_err(py)? })
    }

    /// The index of the shard holding `key` (a value, or a tuple for a key
    /// of several columns).
    fn shard_of(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<usize> {
        let values = key_values(py, key, &self.key_fields(), false)?;
        let values: Vec<basalt::KeyValue<'_>> = values.iter().map(basalt::OwnedKeyValue::as_value).collect();
        self.map.shard_of(&values).py_err(py)
    }

    #[getter]
    fn version(&self) -> u64 {
        self.map.version()
    }

    #[getter]
    fn table(&self) -> String {
        self.map.table().to_string()
    }

    #[getter]
    fn primary_key(&self) -> Vec<String> {
        self.map.key_columns()
    }

    /// Each shard's directory, in key order.
    #[getter]
    fn paths(&self) -> Vec<String> {
        self.map.shards().iter().map(|s| s.path.clone()).collect()
    }

    /// Each shard's node (`None`: any), in key order.
    #[getter]
    fn nodes(&self) -> Vec<Option<String>> {
        self.map.shards().iter().map(|s| s.node.clone()).collect()
    }

    /// This map with shard `i` placed on node `nodes[i]` (`None`: any).
    fn with_nodes(&self, py: Python<'_>, nodes: Vec<Option<String>>) -> PyResult<ShardMap> {
        Ok(ShardMap { map: self.map.with_nodes(nodes).py_err(py)? })
    }

    /// Each shard's lower bound (`None` for the first): a value, or a
    /// tuple for a bound of several key columns.
    #[getter]
    fn bounds<'py>(&self, py: Python<'py>) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
        self.map
            .shards()
            .iter()
            .map(|s| {
                let Some(lower) = &s.lower else { return Ok(None) };
                let mut values =
                    lower.iter().map(|v| key_value_to_py(py, v)).collect::<PyResult<Vec<_>>>()?;
                if values.len() == 1 && self.map.key_columns().len() == 1 {
                    return Ok(Some(values.remove(0)));
                }
                Ok(Some(PyTuple::new(py, values)?.into_any()))
            })
            .collect()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<ShardMap>().is_ok_and(|o| o.get().map == self.map)
    }

    fn __repr__(&self) -> String {
        format!(
            "<basalt.ShardMap version {} of table {:?}, {} shards>",
            self.map.version(),
            self.map.table(),
            self.map.shards().len()
        )
    }
}

/// A sharded store's life cycle (`basalt::ShardedStore`): create it,
/// begin a write against the current version, commit the next one with
/// one atomic replacement of the map, abort, collect what no map names.
#[pyclass(name = "ShardedStore", module = "basalt._basalt", frozen)]
pub struct ShardedStore {
    store: basalt::ShardedStore,
}

/// A write of a sharded store under way: holds its staging directory's
/// lock until `ShardedStore.commit` or `ShardedStore.abort` takes it.
#[pyclass(name = "StoreWrite", module = "basalt._basalt", frozen)]
pub struct StoreWrite {
    write: parking_lot::Mutex<Option<basalt::StoreWrite>>,
    base_version: u64,
    seqno: u64,
    tag: String,
    staging_dir: String,
    base: Option<basalt::ShardMap>,
}

impl StoreWrite {
    fn take(&self, py: Python<'_>) -> PyResult<basalt::StoreWrite> {
        self.write.lock().take().ok_or_else(|| {
            crate::errors::invalid(py, "this write was committed or aborted already".to_string())
        })
    }
}

#[pymethods]
impl StoreWrite {
    /// The version of the map the write began against (0: a new store).
    #[getter]
    fn base_version(&self) -> u64 {
        self.base_version
    }

    /// Files written for the write take seqnos from this one on (0 for a
    /// new store: above a new database's once its table is created).
    #[getter]
    fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The write's tag (its staging directory's name, its shard
    /// directories' suffix).
    #[getter]
    fn tag(&self) -> String {
        self.tag.clone()
    }

    /// The write's own directory, for the files it writes.
    #[getter]
    fn staging_dir(&self) -> String {
        self.staging_dir.clone()
    }

    /// The map the write began against, or `None` for a new store.
    #[getter]
    fn base(&self) -> Option<ShardMap> {
        self.base.clone().map(|map| ShardMap { map })
    }

    /// The map of the version this write makes: the base's split points,
    /// or for a new store `table`, the fields of `key_schema` and
    /// `split_points`; each shard in a directory of its own.
    #[pyo3(signature = (table=None, key_schema=None, split_points=None))]
    fn next_map(
        &self,
        py: Python<'_>,
        table: Option<&str>,
        key_schema: Option<PySchema>,
        split_points: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<ShardMap> {
        let guard = self.write.lock();
        let write = guard.as_ref().ok_or_else(|| {
            crate::errors::invalid(py, "this write was committed or aborted already".to_string())
        })?;
        let map = match (table, key_schema) {
            (Some(table), Some(schema)) => {
                let fields: Vec<Field> =
                    schema.as_ref().fields().iter().map(|f| f.as_ref().clone()).collect();
                let points = split_points
                    .unwrap_or_default()
                    .iter()
                    .map(|p| key_values(py, p, &fields, true))
                    .collect::<PyResult<Vec<_>>>()?;
                write.next_map(Some(basalt::NewStore { table, key: &fields, split_points: points }))
            }
            _ => write.next_map(None),
        };
        Ok(ShardMap { map: map.py_err(py)? })
    }
}

/// A read of one version of a sharded store: while it is held, no commit
/// or collection removes that version's shard directories.
#[pyclass(name = "StorePin", module = "basalt._basalt", frozen)]
pub struct StorePin {
    pin: parking_lot::Mutex<Option<basalt::StorePin>>,
    map: basalt::ShardMap,
}

#[pymethods]
impl StorePin {
    /// The map of the pinned version.
    #[getter]
    fn map(&self) -> ShardMap {
        ShardMap { map: self.map.clone() }
    }

    /// Ends the read: the version's directories go at the next collection
    /// once no map names them. (Dropping the pin does it too.)
    fn release(&self) {
        self.pin.lock().take();
    }
}

#[pymethods]
impl ShardedStore {
    /// Places shard `i` on node `nodes[i]` (a Ray node id; `None`: any):
    /// the map replaced atomically at the same version.
    fn place(&self, py: Python<'_>, nodes: Vec<Option<String>>) -> PyResult<ShardMap> {
        Ok(ShardMap { map: py.detach(|| self.store.place(nodes)).py_err(py)? })
    }

    /// Runs `query` (SQL) over the store's table, read only, at the
    /// version current now: one partition per shard, the shards a key
    /// filter cannot meet left out. Returns a `pyarrow.Table`.
    fn sql<'py>(&self, py: Python<'py>, query: &str) -> PyResult<Bound<'py, PyAny>> {
        let ctx = py
            .detach(|| basalt_datafusion::sharded_session(self.store.dir(), self.store.options()))
            .py_err(py)?;
        let rt = crate::state::runtime(py)?;
        let output = py
            .detach(|| rt.block_on(basalt_datafusion::query(&ctx, query, &[])))
            .map_err(|e| crate::errors::invalid(py, format!("SQL: {e}")))?;
        pyo3_arrow::PyTable::try_new(output.batches, output.schema)?.into_pyarrow(py)
    }

    /// Pins the current version for a read.
    fn pin(&self, py: Python<'_>) -> PyResult<StorePin> {
        let pin = py.detach(|| self.store.pin()).py_err(py)?;
        Ok(StorePin { map: pin.map().clone(), pin: parking_lot::Mutex::new(Some(pin)) })
    }

    /// The store in directory `path`; `options` are `basalt.open`'s, used
    /// for its shards.
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<ShardedStore> {
        let opts = crate::database::options(py, true, options)?;
        Ok(ShardedStore { store: basalt::ShardedStore::new(path, opts) })
    }

    /// The current map, or `None` when the directory holds no store.
    fn map(&self, py: Python<'_>) -> PyResult<Option<ShardMap>> {
        Ok(py.detach(|| self.store.map()).py_err(py)?.map(|map| ShardMap { map }))
    }

    /// Creates the store: a shard per range the split points make, each a
    /// database holding an empty table `table` of `schema`, then the map.
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn create(
        &self,
        py: Python<'_>,
        table: &str,
        schema: PySchema,
        primary_key: Vec<String>,
        split_points: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<ShardMap> {
        let schema = schema.into_inner();
        let fields = primary_key
            .iter()
            .map(|c| {
                schema.field_with_name(c).cloned().map_err(|_| {
                    crate::errors::invalid(py, format!("primary key columns ['{c}'] are not in the schema"))
                })
            })
            .collect::<PyResult<Vec<Field>>>()?;
        let points =
            split_points.iter().map(|p| key_values(py, p, &fields, true)).collect::<PyResult<Vec<_>>>()?;
        let keys: Vec<&str> = primary_key.iter().map(String::as_str).collect();
        let map = py.detach(|| self.store.create(table, &schema, &keys, points)).py_err(py)?;
        Ok(ShardMap { map })
    }

    /// Begins a write against the current version.
    fn begin_write(&self, py: Python<'_>) -> PyResult<StoreWrite> {
        let write = py.detach(|| self.store.begin_write()).py_err(py)?;
        Ok(StoreWrite {
            base_version: write.base_version(),
            seqno: write.seqno(),
            tag: write.tag().to_string(),
            staging_dir: write.staging_dir().to_string_lossy().into_owned(),
            base: write.base().cloned(),
            write: parking_lot::Mutex::new(Some(write)),
        })
    }

    /// Makes `next` the current version if no other write committed since
    /// `write` began (`ConflictError` otherwise; `BusyError` while another
    /// commit runs), then removes the base version and the staging data.
    fn commit(&self, py: Python<'_>, write: &StoreWrite, next: &ShardMap) -> PyResult<()> {
        let w = write.take(py)?;
        py.detach(|| self.store.commit(w, &next.map)).py_err(py)
    }

    /// Ends `write` without a commit: its staging data and the directories
    /// of `next` the current map does not name are removed.
    #[pyo3(signature = (write, next=None))]
    fn abort(&self, py: Python<'_>, write: &StoreWrite, next: Option<&ShardMap>) -> PyResult<()> {
        let w = write.take(py)?;
        py.detach(|| self.store.abort(w, next.map(|n| &n.map))).py_err(py)
    }

    /// Removes what the current map does not name and no live write is
    /// making; returns the directories removed.
    fn collect(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| self.store.collect()).py_err(py)
    }

    /// Split points cutting `sample` (keys: a value, or a tuple for a key
    /// of several columns) into `parts` ranges of about equal counts, in
    /// the engine's key order.
    #[staticmethod]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn split_points<'py>(
        py: Python<'py>,
        key_schema: PySchema,
        sample: Vec<Bound<'py, PyAny>>,
        parts: usize,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let fields: Vec<Field> = key_schema.as_ref().fields().iter().map(|f| f.as_ref().clone()).collect();
        let keys = sample.iter().map(|k| key_values(py, k, &fields, false)).collect::<PyResult<Vec<_>>>()?;
        let points = basalt::split_points_from_sample(&fields, &keys, parts).py_err(py)?;
        points
            .iter()
            .map(|p| {
                let mut values = p.iter().map(|v| key_value_to_py(py, v)).collect::<PyResult<Vec<_>>>()?;
                if values.len() == 1 {
                    return Ok(values.remove(0));
                }
                Ok(PyTuple::new(py, values)?.into_any())
            })
            .collect()
    }
}
