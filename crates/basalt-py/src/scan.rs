//! `Scan`: a table scan as a stream of Arrow record batches, shaped like
//! `pyarrow.RecordBatchReader` (`schema`, `read_next_batch`, `read_all`,
//! iteration) and exporting itself through the Arrow C stream interface
//! (`__arrow_c_stream__`), so pyarrow, polars, DuckDB and DataFusion read
//! it with the engine's buffers — no copy of a settled block's columns.

use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use parking_lot::Mutex;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader, PySchema, PyTable};

use crate::errors::{self, IntoPy};
use crate::state::Shared;

/// The batches of a scan, in order.
pub(crate) type Batches = Box<dyn Iterator<Item = basalt::Result<RecordBatch>> + Send>;

/// A stream of record batches from a table.
#[pyclass(module = "basalt", frozen)]
pub struct Scan {
    state: Shared,
    schema: SchemaRef,
    /// `None` once read to the end, closed, or handed to another reader.
    batches: Mutex<Option<Batches>>,
    /// How the engine reads: `"key range"` or `"index NAME"`.
    plan: String,
}

impl Scan {
    pub(crate) fn new(state: Shared, schema: SchemaRef, batches: Batches, plan: String) -> Scan {
        Scan { state, schema, batches: Mutex::new(Some(batches)), plan }
    }

    /// The next batch (the GIL released while the engine reads it).
    fn next_batch(&self, py: Python<'_>) -> PyResult<Option<RecordBatch>> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        // The lock is taken with the GIL released and let go before it is
        // taken back (holding it across would deadlock with a thread that
        // has the GIL and waits for the lock).
        let next = py.detach(|| {
            let mut guard = self.batches.lock();
            let next = guard.as_mut().and_then(Iterator::next);
            if next.is_none() {
                guard.take();
            }
            next
        });
        next.transpose().py_err(py)
    }

    /// The rest of the stream as a reader for the C stream interface; its
    /// reads fail with "database is closed" once the database is.
    fn take_reader(&self) -> Box<dyn RecordBatchReader + Send> {
        let batches = self.batches.lock().take();
        let state = self.state.clone();
        let iter = batches.into_iter().flatten().map(move |b| {
            if state.is_closed() {
                return Err(ArrowError::ExternalError(Box::new(basalt::Error::Closed(
                    "the database was closed during the scan".to_string(),
                ))));
            }
            b.map_err(|e| ArrowError::ExternalError(Box::new(e)))
        });
        Box::new(RecordBatchIterator::new(iter, self.schema.clone()))
    }
}

#[pymethods]
impl Scan {
    /// The schema of the batches, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PySchema::new(self.schema.clone()).into_pyarrow(py)
    }

    /// How the engine reads the rows: `"key range"`, or `"index NAME"` when
    /// the filter's predicates were answered by a secondary index.
    #[getter]
    fn plan(&self) -> &str {
        &self.plan
    }

    /// The next batch as a `pyarrow.RecordBatch`; `StopIteration` at the end.
    fn read_next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.next_batch(py)? {
            Some(batch) => PyRecordBatch::new(batch).into_pyarrow(py),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.next_batch(py)?.map(|b| PyRecordBatch::new(b).into_pyarrow(py)).transpose()
    }

    /// Every remaining batch as one `pyarrow.Table` (read with the GIL
    /// released; the table's buffers are the engine's, not copies).
    fn read_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        let batches = self.batches.lock().take();
        let collected: Vec<RecordBatch> = match batches {
            Some(b) => py.detach(|| b.collect::<basalt::Result<Vec<_>>>()).py_err(py)?,
            None => Vec::new(),
        };
        if self.state.is_closed() {
            return Err(errors::closed(py));
        }
        let table = PyTable::try_new(collected, self.schema.clone())?;
        table.into_pyarrow(py)
    }

    /// `read_all().to_pandas()`.
    fn read_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.read_all(py)?.call_method0("to_pandas")
    }

    /// The rest of the scan as a `pyarrow.RecordBatchReader` (this scan is
    /// spent). After the database closes, its reads raise pyarrow's
    /// `ArrowIOError` saying so.
    fn to_reader<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyRecordBatchReader::new(self.take_reader()).into_pyarrow(py)
    }

    /// The Arrow C stream of the rest of the scan (PyCapsule interface):
    /// `pyarrow.RecordBatchReader.from_stream(scan)`, `polars.from_arrow`,
    /// DuckDB and DataFusion take it. The scan is spent afterwards.
    #[pyo3(signature = (requested_schema=None))]
    #[expect(clippy::doc_markdown, reason = "a Python docstring, which help() shows without Markdown")]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        stream_capsule(py, self.take_reader(), requested_schema)
    }

    /// The Arrow C schema (PyCapsule interface).
    #[expect(clippy::doc_markdown, reason = "a Python docstring, which help() shows without Markdown")]
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let schema = Bound::new(py, PySchema::new(self.schema.clone()))?;
        schema.call_method0("__arrow_c_schema__")
    }

    /// Stops the scan and releases what it holds (files, memtables).
    fn close(&self) {
        self.batches.lock().take();
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

/// The C stream capsule of `reader`, made by pyo3-arrow's reader.
pub(crate) fn stream_capsule<'py>(
    py: Python<'py>,
    reader: Box<dyn RecordBatchReader + Send>,
    requested_schema: Option<Bound<'py, PyCapsule>>,
) -> PyResult<Bound<'py, PyAny>> {
    let reader = Bound::new(py, PyRecordBatchReader::new(reader))?;
    reader.call_method1("__arrow_c_stream__", (requested_schema,))
}
