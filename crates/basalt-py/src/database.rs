//! `Database` and `open`: the handle a Python program holds. It is its own
//! default keyspace (a `Keyspace` subclass), so `db[b"k"] = b"v"` works
//! on it directly, and it makes the other handles.

use std::path::PathBuf;

use basalt::{Compression, Options, TableOptions};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3_arrow::PySchema;

use crate::batch::WriteBatch;
use crate::errors::{self, IntoPy};
use crate::keyspace::Keyspace;
use crate::state::{DbState, Shared};
use crate::table::Table;

/// An open Basalt database: a directory of durable key-value keyspaces and
/// Arrow tables. A context manager that closes it on exit. Its own mapping
/// methods (`db[key]`, `get`, `put`, `items`…) are the default keyspace's.
/// Thread-safe: share it between threads; engine calls release the GIL.
#[pyclass(module = "basalt", extends = Keyspace, frozen)]
pub struct Database {
    state: Shared,
    path: PathBuf,
}

/// `Options` from keyword arguments named as the Rust fields.
pub(crate) fn options(py: Python<'_>, create: bool, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default().create_if_missing(create);
    let Some(kwargs) = kwargs else { return Ok(o) };
    for (name, value) in kwargs.iter() {
        let name: String = name.extract()?;
        let usize_of = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
            v.extract::<usize>()
                .map_err(|_| errors::wrong_type(format!("option {name} takes a non-negative int")))
        };
        let u32_of = |v: &Bound<'_, PyAny>| -> PyResult<u32> {
            v.extract::<u32>()
                .map_err(|_| errors::wrong_type(format!("option {name} takes an int from 0 to 2**32-1")))
        };
        let bool_of = |v: &Bound<'_, PyAny>| -> PyResult<bool> {
            v.extract::<bool>().map_err(|_| errors::wrong_type(format!("option {name} takes a bool")))
        };
        match name.as_str() {
            "error_if_exists" => o.error_if_exists = bool_of(&value)?,
            "memtable_bytes_max" => o.memtable_bytes_max = usize_of(&value)?,
            "immutable_memtables_max" => o.immutable_memtables_max = usize_of(&value)?,
            "write_buffer_bytes_max" => o.write_buffer_bytes_max = usize_of(&value)?,
            "write_buffer_soft_percent" => o.write_buffer_soft_percent = u32_of(&value)?,
            "delayed_write_bytes_per_sec" => o.delayed_write_bytes_per_sec = usize_of(&value)? as u64, // usize is 64-bit here
            "l0_compaction_trigger" => o.l0_compaction_trigger = usize_of(&value)?,
            "l0_files_slowdown" => o.l0_files_slowdown = usize_of(&value)?,
            "l0_files_stop" => o.l0_files_stop = usize_of(&value)?,
            "level1_bytes_target" => o.level1_bytes_target = usize_of(&value)?,
            "level_size_ratio" => o.level_size_ratio = u32_of(&value)?,
            "sst_bytes_target" => o.sst_bytes_target = usize_of(&value)?,
            "learned_index" => o.learned_index = bool_of(&value)?,
            "learned_index_epsilon" => o.learned_index_epsilon = u32_of(&value)?,
            "timing_stats" => o.timing_stats = bool_of(&value)?,
            "auto_compaction" => o.auto_compaction = bool_of(&value)?,
            "block_bytes_target" => o.block_bytes_target = usize_of(&value)?,
            "table_block_bytes_target" => o.table_block_bytes_target = usize_of(&value)?,
            "settled_block_bytes_target" => o.settled_block_bytes_target = usize_of(&value)?,
            "bloom_bits_per_key" => o.bloom_bits_per_key = u32_of(&value)?,
            "block_cache_bytes" => o.block_cache_bytes = usize_of(&value)?,
            "row_cache_bytes" => o.row_cache_bytes = usize_of(&value)?,
            "mmap_reads" => o.mmap_reads = bool_of(&value)?,
            "pack_integers" => o.pack_integers = bool_of(&value)?,
            "string_dictionaries" => o.string_dictionaries = bool_of(&value)?,
            "max_open_files" => o.max_open_files = usize_of(&value)?,
            "key_bytes_max" => o.key_bytes_max = usize_of(&value)?,
            "value_bytes_max" => o.value_bytes_max = usize_of(&value)?,
            "blob_value_bytes_min" => o.blob_value_bytes_min = usize_of(&value)?,
            "blob_gc_garbage_percent" => o.blob_gc_garbage_percent = u32_of(&value)?,
            "batch_bytes_max" => o.batch_bytes_max = usize_of(&value)?,
            "group_commit_bytes_max" => o.group_commit_bytes_max = usize_of(&value)?,
            "compression" => o.compression = compression_of(py, "compression", &value)?,
            "index_compression" => o.index_compression = compression_of(py, "index_compression", &value)?,
            "settled_compression" => {
                o.settled_compression = compression_of(py, "settled_compression", &value)?;
            }
            other => {
                return Err(errors::wrong_type(format!(
                    "open() got an unexpected option {other:?} (options are Options' field names)"
                )));
            }
        }
    }
    Ok(o)
}

/// The block compression named by option `name`'s value.
fn compression_of(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Compression> {
    let text: String = value
        .extract()
        .map_err(|_| errors::wrong_type(format!("{name} takes \"none\", \"lz4\" or \"zstd\"")))?;
    match text.as_str() {
        "none" => Ok(Compression::None),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(errors::invalid(py, format!("{name} {other:?}: use \"none\", \"lz4\" or \"zstd\""))),
    }
}

/// Opens (and with `create`, creates) the database in directory `path`.
/// Options are keywords named as the engine's `Options` fields
/// (`block_cache_bytes=…`, `compression="lz4"`…). With `read_only` the
/// engine opens it with `Db::open_read_only`: nothing in the directory is
/// written, any number of processes may read it at once while no process
/// writes it (an open by a writer is refused with `LockedError`), and
/// every write raises `ReadOnlyError`.
#[pyfunction]
#[pyo3(signature = (path, *, create=true, read_only=false, **options))]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    create: bool,
    read_only: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<Database>> {
    let opts = self::options(py, create && !read_only, options)?;
    let opened = {
        let path = path.clone();
        py.detach(move || {
            if read_only { basalt::Db::open_read_only(&path, opts) } else { basalt::Db::open(&path, opts) }
        })
    };
    let db = opened.map_err(|e| errors::to_py(py, e))?;
    let default = db.keyspace("default").map_err(|e| errors::to_py(py, e))?;
    let state = DbState::new(db, read_only);
    let init = PyClassInitializer::from(Keyspace::new(state.clone(), default))
        .add_subclass(Database { state, path });
    Py::new(py, init)
}

#[pymethods]
impl Database {
    /// The database directory.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Whether `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.state.is_closed()
    }

    /// Whether writes are refused (opened with `read_only=True`).
    #[getter]
    fn read_only(&self) -> bool {
        self.state.read_only
    }

    fn __repr__(&self) -> String {
        let state = if self.state.is_closed() { " closed" } else { "" };
        format!("<basalt.Database {:?}{state}>", self.path.display().to_string())
    }

    /// Syncs the log, stops background work and releases the directory.
    /// Every handle made from this database raises `ClosedError` afterwards.
    /// A second call does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let state = &self.state;
        py.detach(|| state.close()).py_err(py)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// A new, empty `WriteBatch` for this database.
    fn write_batch(&self, py: Python<'_>) -> PyResult<WriteBatch> {
        self.state.db(py)?;
        Ok(WriteBatch::new(self.state.clone()))
    }

    /// A new transaction reading at a snapshot taken now (see
    /// `Transaction`): `with db.transaction() as tx: ...`.
    fn transaction(&self, py: Python<'_>) -> PyResult<crate::transaction::Transaction> {
        crate::transaction::Transaction::begin(py, self.state.clone())
    }

    /// Keyspace `name`; with `create` (the default) made if missing.
    #[pyo3(signature = (name, *, create=true))]
    fn keyspace(&self, py: Python<'_>, name: &str, create: bool) -> PyResult<Keyspace> {
        let db = self.state.db(py)?;
        let exists = db.keyspaces().iter().any(|k| k == name);
        let keyspace = if !exists && create {
            self.state.db_for_write(py, "keyspace(create=True)")?;
            py.detach(|| db.create_keyspace(name)).py_err(py)?
        } else {
            py.detach(|| db.keyspace(name)).py_err(py)?
        };
        Ok(Keyspace::new(self.state.clone(), keyspace))
    }

    /// Names of the keyspaces, `"default"` first.
    fn keyspaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.state.db(py)?.keyspaces())
    }

    /// Drops keyspace `name` and its keys (`BusyError` while a handle to
    /// it is alive).
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let db = self.state.db_for_write(py, "drop_keyspace")?;
        py.detach(|| db.drop_keyspace(name)).py_err(py)
    }

    /// Creates table `name` of `schema` (a `pyarrow.Schema`, or anything
    /// with `__arrow_c_schema__`) keyed by the `primary_key` columns.
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn create_table(
        &self,
        py: Python<'_>,
        name: &str,
        schema: &Bound<'_, PyAny>,
        primary_key: Vec<String>,
    ) -> PyResult<Table> {
        let db = self.state.db_for_write(py, "create_table")?;
        let schema = schema
            .extract::<PySchema>()
            .map_err(|_| {
                errors::wrong_type(format!(
                    "schema must be a pyarrow.Schema (or have __arrow_c_schema__), not {}",
                    crate::convert::type_name(schema)
                ))
            })?
            .into_inner();
        let key: Vec<&str> = primary_key.iter().map(String::as_str).collect();
        let table = py.detach(|| db.create_table(name, schema, &key, TableOptions::default())).py_err(py)?;
        Ok(Table::new(self.state.clone(), table))
    }

    /// Table `name` (`InvalidArgumentError` if there is none).
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        let db = self.state.db(py)?;
        let table = py.detach(|| db.table(name)).py_err(py)?;
        Ok(Table::new(self.state.clone(), table))
    }

    /// Names of the tables (the default keyspace's table face, `"default"`,
    /// left out).
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.state.db(py)?.tables().into_iter().filter(|t| t != "default").collect())
    }

    /// Drops table `name`, its indexes and rows (`BusyError` while another
    /// handle to it is alive).
    fn drop_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let db = self.state.db_for_write(py, "drop_table")?;
        py.detach(|| db.drop_table(name)).py_err(py)
    }

    /// Runs one SQL statement (DataFusion's SQL over every table, with
    /// Basalt's `CREATE INDEX`, `DELETE` and `UPDATE`) and returns its
    /// result as a `pyarrow.Table`. `params` (a sequence of None, bool,
    /// int, float, str or bytes) are the values of `$1`, `$2`, … in a
    /// query, bound as values, never written into the text. A query's plan
    /// is kept by its text, so repeating it costs no parsing or planning.
    #[pyo3(signature = (query, params=None))]
    fn sql<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::sql::run(py, &self.state, query, params)
    }

    /// Parses and plans one SQL statement once; `Statement.execute(params)`
    /// runs it. Queries of one table by key, key range or index run
    /// straight on the engine (`Statement.path`).
    fn prepare(&self, py: Python<'_>, query: &str) -> PyResult<crate::sql::Statement> {
        crate::sql::Statement::prepare(py, self.state.clone(), query)
    }

    /// The last sequence number a write was given (0 for a new database):
    /// files `Table.write_sst_files` writes for this database's
    /// `Table.ingest_files` take a seqno above it.
    #[getter]
    fn last_seqno(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.state.db(py)?.last_seqno())
    }

    /// Writes every memtable to SSTs and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.state.db_for_write(py, "flush")?;
        py.detach(|| db.flush()).py_err(py)
    }

    /// Writes a consistent, openable copy of the database into directory
    /// `path` (which must not exist), SSTs and blob files hard-linked:
    /// `Db::checkpoint`. Open it with `basalt.open(path)` or, from any
    /// number of processes, `basalt.open(path, read_only=True)`.
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        // A read-only handle checkpoints too (the engine refuses it only
        // when its WAL held writes).
        let db = self.state.db(py)?;
        py.detach(|| db.checkpoint(&path)).py_err(py)
    }

    /// Makes every write so far durable (fsyncs the log).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.state.db(py)?;
        py.detach(|| db.sync_wal()).py_err(py)
    }

    /// Waits until flushes and compactions under way are done.
    fn wait_for_background_work(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.state.db(py)?;
        py.detach(|| db.wait_for_background_work()).py_err(py)
    }

    /// Counters and memory figures of the engine, as a `dict`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.state.db(py)?;
        let s = db.stats();
        let d = PyDict::new(py);
        d.set_item("last_seqno", s.last_seqno)?;
        d.set_item("batches_written", s.batches_written)?;
        d.set_item("wal_bytes_written", s.wal_bytes_written)?;
        d.set_item("wal_syncs", s.wal_syncs)?;
        d.set_item("gets", s.gets)?;
        d.set_item("memtable_bytes", s.memtable_bytes)?;
        d.set_item("memtable_bytes_total", s.memtable_bytes_total)?;
        d.set_item("immutable_memtables", s.immutable_memtables)?;
        d.set_item("flushes", s.flushes)?;
        d.set_item("compactions", s.compactions)?;
        d.set_item("table_rows_read", s.table_rows_read)?;
        d.set_item("blob_files", s.blob_files)?;
        d.set_item("blob_file_bytes", s.blob_file_bytes)?;
        d.set_item("blob_live_bytes", s.blob_live_bytes)?;
        d.set_item("history_trees", s.history_trees)?;
        d.set_item("commit_time_marks", s.commit_time_marks)?;
        d.set_item("write_stalls", s.write_stalls)?;
        d.set_item("write_amplification", s.write_amplification())?;
        d.set_item("space_amplification", s.space_amplification())?;
        Ok(d)
    }
}
