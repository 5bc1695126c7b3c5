//! The map of a sharded store, for `basalt.sharded` and `basalt.ray_data`: a
//! thin binding of `basalt::ShardMap`, which owns the file format and
//! routes keys by their encoded bytes (the engine's order).

use std::path::PathBuf;

use arrow_schema::Field;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3_arrow::PySchema;

use crate::convert::key_values;
use crate::errors::IntoPy;
use crate::rows::key_value_to_py;

/// A sharded store's map: which directory holds which primary-key range.
#[pyclass(name = "ShardMap", module = "basalt._basalt", frozen)]
pub struct ShardMap {
    map: basalt::ShardMap,
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
