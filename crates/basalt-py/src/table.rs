//! `Table`: a Basalt table as Arrow from Python. Writes take any Arrow
//! data through the `PyCapsule` interface (pyarrow, polars, pandas through
//! pyarrow, DuckDB results…); reads give pyarrow objects whose buffers are
//! the engine's. Conditions are parsed in `filter.rs`, rows made Python
//! values in `rows.rs`.

use std::ops::Bound as Edge;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{RecordBatch, UInt32Array};
use arrow_schema::{Field, Schema, SchemaRef};
use basalt::{
    Filter, IndexOptions, KeyValue, LookupOptions, OwnedKeyValue, ScanOptions, ScanPlan, WriteOptions,
};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyArray, PyField, PySchema, PyTable};

use crate::convert::{self, type_name};
use crate::errors::{self, IntoPy};
use crate::filter::{filter, index_predicate};
use crate::rows::{key_value_to_py, made_here, project, row_as_dict, view_as_dict};
use crate::scan::{Batches, Scan};
use crate::snapshot::Snapshot;
use crate::state::Shared;

/// A table: rows of an Arrow schema, kept in primary-key order, with
/// secondary indexes. Get it from `Database.create_table` or
/// `Database.table`.
#[pyclass(module = "basalt", frozen)]
pub struct Table {
    state: Shared,
    table: basalt::Table,
}

/// A key range of owned key values.
type KeyRange = (Edge<Vec<OwnedKeyValue>>, Edge<Vec<OwnedKeyValue>>);

/// Rows per part of a reverse scan: each part is read forwards, then
/// handed out reversed, one part in memory at a time.
const REVERSE_PART_ROWS: u64 = 64 * 1024;

impl Table {
    pub(crate) fn new(state: Shared, table: basalt::Table) -> Table {
        Table { state, table }
    }

    /// The database state this handle belongs to.
    pub(crate) fn state(&self) -> &Shared {
        &self.state
    }

    /// The engine's handle, or `ClosedError`.
    pub(crate) fn handle(&self, py: Python<'_>) -> PyResult<&basalt::Table> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        Ok(&self.table)
    }

    pub(crate) fn key_fields(&self) -> Vec<Field> {
        let schema = self.table.schema();
        self.table
            .primary_key()
            .iter()
            .filter_map(|name| schema.field_with_name(name).ok().cloned())
            .collect()
    }

    /// `data` as a stream of record batches: anything with
    /// `__arrow_c_stream__` or `__arrow_c_array__`, else whatever
    /// `pyarrow.table()` accepts (a pandas `DataFrame`, a dict of columns).
    fn reader(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<Box<dyn arrow_array::RecordBatchReader + Send>> {
        if let Ok(any) = data.extract::<AnyRecordBatch>() {
            return any.into_reader();
        }
        let converted = py
            .import("pyarrow")?
            .call_method1("table", (data,))
            .map_err(|e| errors::wrong_type(format!("{} is not Arrow data ({e})", type_name(data))))?;
        converted.extract::<AnyRecordBatch>()?.into_reader()
    }

    /// Every batch of `data`, conformed to the table's schema.
    pub(crate) fn conformed_batches(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<RecordBatch>> {
        let schema = self.table.schema();
        let reader = Self::reader(py, data)?;
        py.detach(|| {
            reader
                .map(|b| b.map_err(|e| e.to_string()).and_then(|b| conform(&b, &schema)))
                .collect::<Result<Vec<_>, String>>()
        })
        .map_err(|e| errors::schema(py, e))
    }

    /// Keys as a batch of the key columns: Arrow data naming them, or an
    /// iterable of keys (a value, or a tuple for a composite key).
    pub(crate) fn key_batch(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
        let fields = self.key_fields();
        let key_schema = Arc::new(Schema::new(fields.clone()));
        let is_arrow = keys.hasattr("__arrow_c_stream__")? || keys.hasattr("__arrow_c_array__")?;
        if is_arrow {
            let reader = Self::reader(py, keys)?;
            let batches = reader
                .map(|b| b.map_err(|e| e.to_string()).and_then(|b| conform(&b, &key_schema)))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|e| errors::schema(py, e))?;
            return arrow_select::concat::concat_batches(&key_schema, &batches)
                .map_err(|e| errors::schema(py, e.to_string()));
        }
        let columns = convert::key_columns(py, keys, &fields)?;
        RecordBatch::try_new(key_schema, columns).map_err(|e| errors::schema(py, e.to_string()))
    }

    /// A key range from Python bounds: `start` included, `end` excluded;
    /// each a key or a key prefix (a shorter tuple).
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<KeyRange> {
        let fields = self.key_fields();
        let lower = match start {
            Some(s) => Edge::Included(convert::key_values(py, s, &fields, true)?),
            None => Edge::Unbounded,
        };
        let upper = match end {
            Some(e) => Edge::Excluded(convert::key_values(py, e, &fields, true)?),
            None => Edge::Unbounded,
        };
        Ok((lower, upper))
    }

    /// Runs `change` (a change of the table's columns, called `what`) on a
    /// writable database, without the GIL: it may flush the memtables.
    fn change_columns(
        &self,
        py: Python<'_>,
        what: &str,
        change: impl FnOnce(&basalt::Table) -> basalt::Result<()> + Send,
    ) -> PyResult<()> {
        self.state.db_for_write(py, what)?;
        let table = &self.table;
        py.detach(|| change(table)).py_err(py)
    }

    /// A scan of the rows a transaction sees: its `snapshot` with its own
    /// writes (`overlay`) on top.
    #[expect(clippy::too_many_arguments, reason = "the keywords of the Python methods that call it")]
    pub(crate) fn scan_in_transaction(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: &basalt::Snapshot,
        overlay: &basalt::TableOverlay,
    ) -> PyResult<Scan> {
        self.handle(py)?;
        let range = self.range(py, start, end)?;
        let filter = r#where.map(|w| filter(py, &self.table, w)).transpose()?;
        let db = self.state.db(py)?;
        let (batches, plan, schema) = py
            .detach(|| self.batches(range, columns, filter, 0, reverse, Some(snapshot), Some(overlay), &db))
            .py_err(py)?;
        Ok(Scan::new(self.state.clone(), schema, batches, plan))
    }

    /// The batches of a scan over `range`: forwards, or backwards part by
    /// part (each part read forwards, then reversed).
    #[expect(
        clippy::too_many_arguments,
        reason = "the options of every scan method (Table.scan, to_arrow, the transaction's) in one place"
    )]
    fn batches(
        &self,
        range: KeyRange,
        projection: Option<Vec<String>>,
        filter: Option<Filter>,
        batch_size: usize,
        reverse: bool,
        snapshot: Option<&basalt::Snapshot>,
        overlay: Option<&basalt::TableOverlay>,
        db: &basalt::Db,
    ) -> basalt::Result<(Batches, String, SchemaRef)> {
        let table = self.table.clone();
        let borrowed = (borrow_edge(&range.0), borrow_edge(&range.1));
        let opts = ScanOptions::default()
            .range(borrowed.clone())
            .projection(projection.clone())
            .filter(filter.clone())
            .batch_size(batch_size)
            .snapshot(snapshot)
            .overlay(overlay.cloned());
        let scan = table.scan(opts)?;
        let plan = match scan.plan() {
            ScanPlan::Index { index, .. } => format!("index {index}"),
            _ => "key range".to_string(),
        };
        let schema = scan.schema();
        if !reverse {
            return Ok((Box::new(scan), plan, schema));
        }
        drop(scan);
        let rows = table.estimate()?.rows;
        let parts = (rows / REVERSE_PART_ROWS).clamp(1, 4096) as usize;
        let parts = table.split_range(&borrowed, parts)?;
        // One moment for every part.
        let pinned = snapshot.cloned().unwrap_or_else(|| db.snapshot());
        let overlay = overlay.cloned();
        let iter = parts.into_iter().rev().flat_map(move |part| {
            let range = (borrow_edge(&part.0), borrow_edge(&part.1));
            let opts = ScanOptions::default()
                .range(range)
                .projection(projection.clone())
                .filter(filter.clone())
                .batch_size(batch_size)
                .snapshot(Some(&pinned))
                .overlay(overlay.clone());
            let read: basalt::Result<Vec<RecordBatch>> = table.scan(opts).and_then(Iterator::collect);
            let out: Vec<basalt::Result<RecordBatch>> = match read {
                Ok(batches) => batches.iter().rev().map(reversed).collect(),
                Err(e) => vec![Err(e)],
            };
            out
        });
        Ok((Box::new(iter), plan, schema))
    }
}

fn borrow_edge(edge: &Edge<Vec<OwnedKeyValue>>) -> Edge<Vec<KeyValue<'_>>> {
    match edge {
        Edge::Included(v) => Edge::Included(v.iter().map(OwnedKeyValue::as_value).collect()),
        Edge::Excluded(v) => Edge::Excluded(v.iter().map(OwnedKeyValue::as_value).collect()),
        Edge::Unbounded => Edge::Unbounded,
    }
}

fn reversed(batch: &RecordBatch) -> basalt::Result<RecordBatch> {
    let n = batch.num_rows() as u32;
    let order = UInt32Array::from_iter_values((0..n).rev());
    arrow_select::take::take_record_batch(batch, &order)
        .map_err(|e| basalt::Error::InvalidArgument(format!("reversing a batch: {e}")))
}

/// `batch` with the table's schema (`basalt::conform`): columns matched by
/// name, cast only where every value survives (`Casts::Lossless`), absent
/// nullable columns null; the error as Python's `SchemaError` words it.
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, String> {
    use basalt::conform::{Casts, Columns, ConformError};
    basalt::conform::conform(batch, schema, Columns::ByName, Casts::Lossless).map(|(batch, _)| batch).map_err(
        |e| match e {
            ConformError::ExtraColumn { name } => {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                let hint = if name.starts_with("__index_level") {
                    "; a pandas index: reset_index(drop=True)"
                } else {
                    ""
                };
                format!(
                    "the data has a column {name} the table does not (columns: {}){hint}",
                    names.join(", ")
                )
            }
            other => other.to_string(),
        },
    )
}

/// A one-batch scan (`get_many`, `lookup`) or a collected one as `pyarrow.Table`.
fn to_pyarrow(py: Python<'_>, batches: Vec<RecordBatch>, schema: SchemaRef) -> PyResult<Bound<'_, PyAny>> {
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

#[pymethods]
impl Table {
    /// The table's name.
    #[getter]
    fn name(&self) -> &str {
        self.table.name()
    }

    /// The table's schema, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PySchema::new(self.table.schema()).into_pyarrow(py)
    }

    /// The primary key's columns, in key order.
    #[getter]
    fn primary_key(&self) -> Vec<String> {
        self.table.primary_key()
    }

    /// Up to `n - 1` primary keys, ascending, that cut the table into `n`
    /// key ranges of similar size on disk, from SST metadata alone
    /// (`Table::split_points`): a scalar per point for a one-column key, a
    /// tuple otherwise, each usable as `scan(start=…, end=…)`. Fewer when
    /// the table has fewer SSTs to cut at.
    fn split_points<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let table = self.handle(py)?.clone();
        let points = py.detach(move || table.split_points(n)).py_err(py)?;
        points
            .into_iter()
            .map(|point| {
                let mut values =
                    point.iter().map(|v| key_value_to_py(py, v)).collect::<PyResult<Vec<_>>>()?;
                if values.len() == 1 {
                    return Ok(values.remove(0));
                }
                Ok(PyTuple::new(py, values)?.into_any())
            })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("<basalt.Table {:?} key=({})>", self.table.name(), self.table.primary_key().join(", "))
    }

    /// Upserts the rows of `data` by primary key, all or none: a
    /// `pyarrow.Table`, `RecordBatch` or `RecordBatchReader`, a polars or
    /// pandas DataFrame, or anything with `__arrow_c_stream__` or
    /// `__arrow_c_array__`. Columns are matched by name and cast where no
    /// value changes meaning (large strings, dictionaries, narrower
    /// integers with overflow checked). The whole of `data` is one atomic
    /// write; for data larger than memory use `bulk_load`.
    #[pyo3(signature = (data, *, sync=false))]
    #[expect(clippy::doc_markdown, reason = "a Python docstring, which help() shows without Markdown")]
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>, sync: bool) -> PyResult<u64> {
        let db = self.state.db_for_write(py, "write")?;
        let batches = self.conformed_batches(py, data)?;
        let table = &self.table;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| {
            let mut batch = basalt::WriteBatch::new();
            let mut rows = 0u64;
            for b in &batches {
                batch.put_table(table, b)?;
                rows += b.num_rows() as u64;
            }
            db.write_opt(batch, &opts)?;
            Ok(rows)
        })
        .py_err(py)
    }

    /// Loads `data` (as `write` takes it, of any size, streamed one input
    /// batch at a time with the GIL released) by writing its rows straight
    /// into the engine's files, past the WAL and the memtable, and
    /// installing them in one step: the load is all there or not at all,
    /// and durable when this returns. Rows are upserts, as in `write`;
    /// batches in key order load fastest (straight to the deepest level),
    /// any order works. Other writes wait while it runs. Returns the rows
    /// installed: one per key of each sorted run of batches (a key twice in
    /// a batch counts once). Refused for a table with
    /// indexes: load first, then create them. `sync` is accepted for
    /// compatibility: a load is always synced.
    #[pyo3(signature = (data, *, sync=true))]
    fn bulk_load(&self, py: Python<'_>, data: &Bound<'_, PyAny>, sync: bool) -> PyResult<u64> {
        let _ = sync;
        self.state.db_for_write(py, "bulk_load")?;
        let reader = Self::reader(py, data)?;
        let schema = self.table.schema();
        let table = &self.table;
        let result: Result<u64, basalt::Error> = py.detach(|| {
            let batches = reader.map(|batch| {
                let batch = batch.map_err(|e| basalt::Error::SchemaMismatch(e.to_string()))?;
                conform(&batch, &schema).map_err(basalt::Error::SchemaMismatch)
            });
            Ok(table.bulk_load_from(batches)?.rows)
        });
        result.py_err(py)
    }

    /// How many rows the table holds from `start` (included) to `end`
    /// (excluded; keys or key prefixes), exactly: from the files'
    /// properties where no other source holds their keys, without reading
    /// a block (`Table::count_rows`).
    #[pyo3(signature = (*, start=None, end=None))]
    fn count_rows(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        self.state.db(py)?;
        let (lower, upper) = self.range(py, start, end)?;
        let table = &self.table;
        py.detach(|| table.count_rows(&(borrow_edge(&lower), borrow_edge(&upper)), None)).py_err(py)
    }

    /// Writes `data` (as `bulk_load` takes it) as finished SST files of
    /// this table into `directory`, for `ingest_files` here or in another
    /// database holding this table (a shard of one store): sorted and
    /// built as `bulk_load` builds its files. Nothing in the database
    /// changes; a read-only handle writes them too. The rows get seqno
    /// `seqno` (one more per further sorted run); an ingest refuses them
    /// unless `seqno` lies above the ingesting database's `last_seqno`.
    /// `cut_at` (keys or key prefixes, ascending): no file holds keys on
    /// both sides of one. Returns one dict per file: `path`, `rows`,
    /// `bytes`, `range` (which range the cut points make holds it) and
    /// `seqno`. On an error the files written so far are deleted.
    #[pyo3(signature = (directory, data, *, seqno, cut_at=None))]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn write_sst_files<'py>(
        &self,
        py: Python<'py>,
        directory: PathBuf,
        data: &Bound<'py, PyAny>,
        seqno: u64,
        cut_at: Option<Vec<Bound<'py, PyAny>>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.state.db(py)?;
        let fields = self.key_fields();
        let cuts = cut_at
            .unwrap_or_default()
            .iter()
            .map(|c| convert::key_values(py, c, &fields, true))
            .collect::<PyResult<Vec<Vec<OwnedKeyValue>>>>()?;
        let reader = Self::reader(py, data)?;
        let schema = self.table.schema();
        let table = &self.table;
        let files = py
            .detach(|| {
                let cuts: Vec<Vec<KeyValue<'_>>> =
                    cuts.iter().map(|c| c.iter().map(OwnedKeyValue::as_value).collect()).collect();
                let batches = reader.map(|batch| {
                    let batch = batch.map_err(|e| basalt::Error::SchemaMismatch(e.to_string()))?;
                    conform(&batch, &schema).map_err(basalt::Error::SchemaMismatch)
                });
                table.write_sst_files(&directory, seqno, &cuts, batches)
            })
            .py_err(py)?;
        files
            .into_iter()
            .map(|f| {
                let d = PyDict::new(py);
                d.set_item("path", f.path.to_string_lossy().into_owned())?;
                d.set_item("rows", f.rows)?;
                d.set_item("bytes", f.bytes)?;
                d.set_item("range", f.range)?;
                d.set_item("seqno", f.seqno)?;
                Ok(d)
            })
            .collect()
    }

    /// Installs, in one step, the rows from `start` (included) to `end`
    /// (excluded; keys or key prefixes, `None` for no bound) of SST files
    /// `write_sst_files` made for this table: a file wholly in the range is
    /// hard-linked in (the caller's file stays), one straddling its edge is
    /// rewritten with its rows in the range, one outside is skipped. Rows
    /// are upserts; where files overlap, the higher seqno wins. Refused,
    /// changing nothing: files of another table, two overlapping files of
    /// one seqno, a table with indexes, and files whose seqno is not above
    /// this database's `last_seqno` (`ConflictError`). Returns the rows
    /// installed.
    #[pyo3(signature = (paths, *, start=None, end=None))]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn ingest_files(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        self.state.db_for_write(py, "ingest_files")?;
        let (lower, upper) = self.range(py, start, end)?;
        let table = &self.table;
        py.detach(|| {
            let range = (borrow_edge(&lower), borrow_edge(&upper));
            Ok(table.ingest_files(&paths, range)?.rows)
        })
        .py_err(py)
    }

    /// Deletes the rows whose keys are `keys` (an iterable of keys — a
    /// value each, or a tuple for a composite key — or Arrow data of the
    /// key columns); absent keys are ignored. Atomic.
    #[pyo3(signature = (keys, *, sync=false))]
    fn delete(&self, py: Python<'_>, keys: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let db = self.state.db_for_write(py, "delete")?;
        let keys = self.key_batch(py, keys)?;
        let table = &self.table;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| {
            let mut batch = basalt::WriteBatch::new();
            batch.delete_table(table, &keys)?;
            db.write_opt(batch, &opts)
        })
        .py_err(py)
    }

    /// Deletes every row whose key lies in `[start, end)` (each a key or a
    /// key prefix, as `scan` takes them; every row by default): one write
    /// however many rows, their index entries deleted in the same commit.
    #[pyo3(signature = (start=None, end=None, *, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        sync: bool,
    ) -> PyResult<()> {
        let db = self.state.db_for_write(py, "delete_range")?;
        let range = self.range(py, start, end)?;
        let table = &self.table;
        let opts = WriteOptions::default().sync(sync);
        py.detach(|| {
            let mut batch = basalt::WriteBatch::new();
            batch.delete_table_range(table, &(borrow_edge(&range.0), borrow_edge(&range.1)))?;
            db.write_opt(batch, &opts)
        })
        .py_err(py)
    }

    /// The row with primary key `key` (a value, or a tuple for a composite
    /// key) as a `dict` of column → Python value, or `None`.
    #[pyo3(signature = (key, *, columns=None, snapshot=None))]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        columns: Option<Vec<String>>,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let table = self.handle(py)?;
        let key = convert::key_values(py, key, &self.key_fields(), false)?;
        let borrowed: Vec<KeyValue<'_>> = key.iter().map(OwnedKeyValue::as_value).collect();
        // A row of numbers, strings and bytes is read as a view, copied
        // out with the GIL released, and made a dict: no Arrow array on
        // the way. Other rows take the batch path below.
        let schema = table.schema();
        let fits_view = match &columns {
            None => schema.fields().iter().all(|f| made_here(f)),
            Some(names) => names.iter().all(|n| schema.field_with_name(n).is_ok_and(made_here)),
        };
        if fits_view {
            let read = |s: Option<&basalt::Snapshot>| {
                let opts = basalt::ReadOptions::default().snapshot(s);
                py.detach(|| table.get_with_opt(&borrowed, &opts, |row| row.to_row())?.transpose()).py_err(py)
            };
            let row = match snapshot {
                Some(s) => s.get().with_for(py, &self.state, |s| read(Some(s)))?,
                None => read(None)?,
            };
            let Some(row) = row else { return Ok(None) };
            // `None` only when the table's columns changed since: the
            // batch path reads the row again.
            if let Some(dict) = view_as_dict(py, row.view(), columns.as_deref())? {
                return Ok(Some(dict.into_any()));
            }
        }
        let row = match snapshot {
            Some(s) => s.get().with_for(py, &self.state, |s| {
                let opts = basalt::ReadOptions::default().snapshot(Some(s));
                py.detach(|| table.get_opt(&borrowed, &opts)).py_err(py)
            })?,
            None => py.detach(|| table.get(&borrowed)).py_err(py)?,
        };
        let Some(row) = row else { return Ok(None) };
        let row = match &columns {
            Some(names) => project(py, &row, names)?,
            None => row,
        };
        Ok(Some(row_as_dict(py, &row)?.into_any()))
    }

    /// The rows whose keys are in `keys` (as `delete` takes them), in the
    /// order asked, absent keys left out, as a `pyarrow.Table`.
    #[pyo3(signature = (keys, *, columns=None))]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        columns: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.handle(py)?;
        let keys = self.key_batch(py, keys)?;
        let rows = py.detach(|| table.get_many(&keys)).py_err(py)?;
        let rows = match &columns {
            Some(names) => project(py, &rows, names)?,
            None => rows,
        };
        let schema = rows.schema();
        to_pyarrow(py, vec![rows], schema)
    }

    /// A scan of the rows in key order (descending with `reverse`) as a
    /// `Scan`, a stream of record batches (see `Scan`): keys from `start`
    /// (included) to `end` (excluded), each a key or a key prefix; only
    /// `columns`; only rows meeting every `(column, op, value)` of `where`
    /// (answered by an index when one fits, blocks skipped by zone maps).
    #[pyo3(signature = (*, columns=None, r#where=None, start=None, end=None, reverse=false, batch_size=None, snapshot=None))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    fn scan(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        batch_size: Option<usize>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Scan> {
        self.handle(py)?;
        let range = self.range(py, start, end)?;
        let filter = r#where.map(|w| filter(py, &self.table, w)).transpose()?;
        if batch_size == Some(0) {
            return Err(errors::invalid(py, "batch_size must be at least 1".to_string()));
        }
        let batch_size = batch_size.unwrap_or(0);
        let db = self.state.db(py)?;
        let made = match snapshot {
            Some(s) => s.get().with_for(py, &self.state, |s| {
                py.detach(|| self.batches(range, columns, filter, batch_size, reverse, Some(s), None, &db))
                    .py_err(py)
            })?,
            None => py
                .detach(|| self.batches(range, columns, filter, batch_size, reverse, None, None, &db))
                .py_err(py)?,
        };
        let (batches, plan, schema) = made;
        Ok(Scan::new(self.state.clone(), schema, batches, plan))
    }

    /// `scan(...).read_all()`: the rows as one `pyarrow.Table`.
    #[pyo3(signature = (*, columns=None, r#where=None, start=None, end=None, reverse=false, snapshot=None))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    fn to_arrow<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'py, PyAny>>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let scan = self.scan(py, columns, r#where, start, end, reverse, None, snapshot)?;
        Bound::new(py, scan)?.call_method0("read_all")
    }

    /// `to_arrow(...).to_pandas()`.
    #[pyo3(signature = (*, columns=None, r#where=None, start=None, end=None, reverse=false, snapshot=None))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    fn to_pandas<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'py, PyAny>>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.to_arrow(py, columns, r#where, start, end, reverse, snapshot)?.call_method0("to_pandas")
    }

    /// `polars.from_arrow(to_arrow(...))` (polars keeps Arrow's buffers).
    #[pyo3(signature = (*, columns=None, r#where=None, start=None, end=None, reverse=false, snapshot=None))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    fn to_polars<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        r#where: Option<&Bound<'py, PyAny>>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.to_arrow(py, columns, r#where, start, end, reverse, snapshot)?;
        py.import("polars")?.call_method1("from_arrow", (table,))
    }

    /// The whole table as an Arrow C stream (PyCapsule interface), so
    /// `pyarrow.table(t)`, `polars.DataFrame(t)` or DuckDB read it directly.
    #[pyo3(signature = (requested_schema=None))]
    #[expect(clippy::doc_markdown, reason = "a Python docstring, which help() shows without Markdown")]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let scan = Bound::new(py, self.scan(py, None, None, None, None, false, None, None)?)?;
        scan.call_method1("__arrow_c_stream__", (requested_schema,))
    }

    /// Builds a secondary index on `columns` (backfilled now, kept by every
    /// later write): `unique` refuses two rows with the same values;
    /// `include` stores more columns in the index so lookups needing only
    /// them never read the rows.
    #[pyo3(signature = (name, columns, *, unique=false, include=None))]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn create_index(
        &self,
        py: Python<'_>,
        name: &str,
        columns: Vec<String>,
        unique: bool,
        include: Option<Vec<String>>,
    ) -> PyResult<()> {
        self.state.db_for_write(py, "create_index")?;
        let refs: Vec<&str> = columns.iter().map(String::as_str).collect();
        let opts = IndexOptions::default().unique(unique).include(include.unwrap_or_default());
        let table = &self.table;
        py.detach(|| table.create_index(name, &refs, opts)).py_err(py)
    }

    /// Adds a column (a `pyarrow.Field`) at the end of the schema. Rows
    /// already there read `default` in it (any value `pyarrow.array`
    /// takes for the field's type), or null without one; a field that is
    /// not nullable needs a default. No file is rewritten.
    #[pyo3(signature = (field, default=None))]
    fn add_column(&self, py: Python<'_>, field: PyField, default: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let field = field.into_inner();
        let default = match default {
            None => None,
            Some(value) => {
                let as_field = PyField::new(field.clone());
                let pyfield = as_field.to_pyarrow(py)?;
                let data_type = pyfield.getattr("type")?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("type", data_type)?;
                let array = py.import("pyarrow")?.getattr("array")?.call((vec![value],), Some(&kwargs))?;
                Some(array.extract::<PyArray>()?.into_inner().0)
            }
        };
        self.change_columns(py, "add_column", |t| t.add_column(field, default))
    }

    /// Drops column `name` (not a key column, nor one an index holds).
    fn drop_column(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.change_columns(py, "drop_column", |t| t.drop_column(name))
    }

    /// Renames column `old` to `new`.
    fn rename_column(&self, py: Python<'_>, old: &str, new: &str) -> PyResult<()> {
        self.change_columns(py, "rename_column", |t| t.rename_column(old, new))
    }

    /// Drops index `name`.
    fn drop_index(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.state.db_for_write(py, "drop_index")?;
        let table = &self.table;
        py.detach(|| table.drop_index(name)).py_err(py)
    }

    /// The table's indexes: `[{"name", "columns", "include", "unique"}]`.
    fn indexes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.handle(py)?;
        let list = PyList::empty(py);
        for info in self.table.indexes() {
            let d = PyDict::new(py);
            d.set_item("name", &info.name)?;
            d.set_item("columns", &info.columns)?;
            d.set_item("include", &info.include)?;
            d.set_item("unique", info.unique)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The rows an index selects, in index order, as a `pyarrow.Table`:
    /// `eq=` every indexed column equal (a value, or a tuple for several
    /// columns; `None` in a tuple matches null: `eq=(None,)`, since a bare
    /// `eq=None` means "not given"), `prefix=` the leading columns equal,
    /// or `range=(low, high)` low included, high excluded (either `None`).
    #[pyo3(signature = (index, *, eq=None, prefix=None, range=None, columns=None, limit=None, reverse=false, snapshot=None))]
    #[expect(clippy::too_many_arguments, reason = "one argument per keyword of the Python method")]
    #[expect(clippy::needless_pass_by_value, reason = "pyo3 extracts Python arguments as owned values")]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        index: &str,
        eq: Option<&Bound<'py, PyAny>>,
        prefix: Option<&Bound<'py, PyAny>>,
        range: Option<&Bound<'py, PyAny>>,
        columns: Option<Vec<String>>,
        limit: Option<usize>,
        reverse: bool,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.handle(py)?;
        let predicate = index_predicate(py, &self.table, index, eq, prefix, range)?;
        let run = |s: Option<&basalt::Snapshot>| {
            let opts = LookupOptions::default()
                .projection(columns.clone())
                .limit(limit)
                .reverse(reverse)
                .snapshot(s);
            py.detach(|| table.lookup(index, predicate.borrowed(), opts)).py_err(py)
        };
        let rows = match snapshot {
            Some(s) => s.get().with_for(py, &self.state, |s| run(Some(s)))?,
            None => run(None)?,
        };
        let schema = rows.schema();
        to_pyarrow(py, vec![rows], schema)
    }

    /// The number of rows an index selects (`eq=`, `prefix=` or `range=`
    /// as `lookup` takes them), counted from the index alone.
    #[pyo3(signature = (index, *, eq=None, prefix=None, range=None, snapshot=None))]
    fn count(
        &self,
        py: Python<'_>,
        index: &str,
        eq: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        range: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<u64> {
        let table = self.handle(py)?;
        let predicate = index_predicate(py, &self.table, index, eq, prefix, range)?;
        match snapshot {
            Some(s) => s.get().with_for(py, &self.state, |s| {
                py.detach(|| table.count_opt(index, predicate.borrowed(), Some(s))).py_err(py)
            }),
            None => py.detach(|| table.count(index, predicate.borrowed())).py_err(py),
        }
    }

    /// Keeps history from now on, for the table and its indexes: every
    /// version committed within `keep` (a `timedelta` or seconds) and/or
    /// each row's newest `versions`. Reads as of a point in the window
    /// (`db.snapshot(as_of=...)`) see exactly what was committed then.
    /// `set_history(None)` turns it off.
    #[pyo3(signature = (keep=None, *, versions=None))]
    fn set_history(
        &self,
        py: Python<'_>,
        keep: Option<&Bound<'_, PyAny>>,
        versions: Option<u32>,
    ) -> PyResult<()> {
        let window = crate::history::window(py, keep, versions)?;
        self.state.db_for_write(py, "set_history")?;
        let table = self.handle(py)?;
        py.detach(|| table.set_history(window)).py_err(py)
    }

    /// Sets how long each row lives after its last write (a `timedelta` or
    /// seconds; `None`: for ever), kept in the database: an expired row is
    /// gone from every read (scans, gets, index lookups, SQL) at once, its
    /// index entries with it, and compaction drops it.
    fn set_ttl(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let ttl = crate::history::ttl(py, ttl)?;
        self.state.db_for_write(py, "set_ttl")?;
        let table = self.handle(py)?;
        py.detach(|| table.set_ttl(ttl)).py_err(py)
    }

    /// The time to live as a `timedelta`, or `None`.
    #[getter]
    fn ttl<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.handle(py)?.ttl().map(|d| crate::history::timedelta(py, d)).transpose()
    }

    /// The history window as a `dict` (`keep`, `versions`, `since`,
    /// `oldest_seqno`, `oldest_time`), or `None` when off.
    #[getter]
    fn history_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDict>>> {
        let table = self.handle(py)?;
        crate::history::info(py, table.history_info())
    }

    /// The versions of the row with primary key `key` that the window
    /// keeps, newest first, as a `pyarrow.Table`: `_seqno`,
    /// `_commit_time`, `_deleted`, then the table's columns (a delete
    /// holds its key and nulls); at most `limit`, within `since`/`until`
    /// (seqnos or aware `datetime`s).
    #[pyo3(signature = (key, *, limit=None, since=None, until=None))]
    fn history<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        limit: Option<usize>,
        since: Option<&Bound<'py, PyAny>>,
        until: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.handle(py)?;
        let key = convert::key_values(py, key, &self.key_fields(), false)?;
        let borrowed: Vec<KeyValue<'_>> = key.iter().map(OwnedKeyValue::as_value).collect();
        let opts = crate::history::options(py, limit, since, until)?;
        let rows = py.detach(|| table.history(&borrowed, opts)).py_err(py)?;
        let schema = rows.schema();
        to_pyarrow(py, vec![rows], schema)
    }

    /// The committed changes after seqno `since`, in commit order, at most
    /// `limit` rows, as a `pyarrow.Table`: `_op` (`"upsert"` or
    /// `"delete"`), `_seqno`, `_commit_time`, then the table's columns
    /// (a delete holds its key and nulls). Resume from the last `_seqno`.
    #[pyo3(signature = (since=0, *, limit=None))]
    fn changes<'py>(&self, py: Python<'py>, since: u64, limit: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let table = self.handle(py)?;
        let rows = py.detach(|| table.changes(since, limit.unwrap_or(usize::MAX))).py_err(py)?;
        let schema = rows.schema();
        to_pyarrow(py, vec![rows], schema)
    }

    /// Compacts the table (and its indexes) into one sorted run.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.state.db_for_write(py, "compact")?;
        let table = &self.table;
        py.detach(|| table.compact()).py_err(py)
    }

    /// The table as a DataFusion table provider (the FFI capsule the
    /// `datafusion` Python package registers): `ctx.register_table("t",
    /// table)` then SQL with projections, filters and limits pushed into
    /// Basalt's scan.
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let db = self.state.db(py)?;
        crate::sql::table_provider(py, db, self.table.name(), session)
    }
}
