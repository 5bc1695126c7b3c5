//! SQL from Python: `Database.sql` runs a statement through
//! `basalt-datafusion` (the session Basalt's own SQL layer makes, its plan
//! cache and direct paths), `Database.prepare` plans one once, and
//! `Table.__datafusion_table_provider__` hands a table to the `datafusion`
//! Python package through DataFusion's FFI.

use std::ptr::NonNull;
use std::sync::Arc;

use basalt::Db;
use basalt_datafusion::datafusion::common::{Result as DfResult, ScalarValue};
use basalt_datafusion::{BasaltTable, PreparedStatement, QueryOutput};
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyCapsule, PyFloat, PyInt, PyString};
use pyo3_arrow::PyTable;

use crate::errors;
use crate::state::{DbState, Shared, runtime};

/// Runs one statement with `params` (`$1` first) and collects its result
/// (the GIL released). The session's plan cache keeps the plan of a query
/// of the same text, so a repeated statement is not parsed or planned again.
pub fn run<'py>(
    py: Python<'py>,
    state: &DbState,
    query: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    refuse_writes(py, state, query, "sql")?;
    let params = scalars(params)?;
    let ctx = state.session(py)?;
    let rt = runtime(py)?;
    let result = py.detach(|| rt.block_on(basalt_datafusion::query(&ctx, query, &params)));
    into_table(py, state, result)
}

/// The pyarrow table of a statement's output, or its error.
fn into_table<'py>(
    py: Python<'py>,
    state: &DbState,
    result: DfResult<QueryOutput>,
) -> PyResult<Bound<'py, PyAny>> {
    if state.is_closed() {
        return Err(errors::closed(py));
    }
    let output = result.map_err(|e| errors::invalid(py, format!("SQL: {e}")))?;
    PyTable::try_new(output.batches, output.schema)?.into_pyarrow(py)
}

/// A statement parsed and planned once (`Database.prepare`), run with
/// parameter values by `execute`: values are bound, never written into the
/// text. Queries of one table by key, key range or index run straight on
/// the engine (`path` says which way it runs).
#[pyclass(module = "basalt", frozen)]
pub struct Statement {
    state: Shared,
    prepared: Arc<PreparedStatement>,
}

impl Statement {
    pub fn prepare(py: Python<'_>, state: Shared, query: &str) -> PyResult<Statement> {
        refuse_writes(py, &state, query, "prepare")?;
        let ctx = state.session(py)?;
        let rt = runtime(py)?;
        let prepared = py
            .detach(|| rt.block_on(basalt_datafusion::prepare(&ctx, query)))
            .map_err(|e| errors::invalid(py, format!("SQL: {e}")))?;
        Ok(Statement { state, prepared: Arc::new(prepared) })
    }
}

#[pymethods]
impl Statement {
    /// Runs the statement with `params` (a sequence: None, bool, int,
    /// float, str or bytes, `$1` first) and returns a `pyarrow.Table`.
    #[pyo3(signature = (params=None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.state.db(py)?;
        let params = scalars(params)?;
        let rt = runtime(py)?;
        let prepared = Arc::clone(&self.prepared);
        let result = py.detach(|| rt.block_on(prepared.execute(&params)));
        into_table(py, &self.state, result)
    }

    /// How many parameters the statement takes.
    #[getter]
    fn parameter_count(&self) -> usize {
        self.prepared.parameter_count()
    }

    /// How it runs: "direct (table …)" on the engine's own calls, or
    /// "DataFusion".
    #[getter]
    fn path(&self) -> String {
        self.prepared.path()
    }

    fn __repr__(&self) -> String {
        format!("Statement({:?}, path={:?})", self.prepared.text(), self.prepared.path())
    }
}

/// Python values as SQL parameter values.
fn scalars(params: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<ScalarValue>> {
    let Some(params) = params.filter(|p| !p.is_none()) else { return Ok(Vec::new()) };
    if params.is_instance_of::<PyString>() || params.is_instance_of::<PyBytes>() {
        return Err(errors::wrong_type(
            "params is a sequence of values (a list or tuple), not one string".into(),
        ));
    }
    let mut out = Vec::new();
    for (i, value) in params.try_iter()?.enumerate() {
        let value = value?;
        let n = i + 1;
        out.push(if value.is_none() {
            ScalarValue::Null
        } else if let Ok(b) = value.cast::<PyBool>() {
            ScalarValue::Boolean(Some(b.is_true()))
        } else if value.is_instance_of::<PyInt>() {
            match value.extract::<i64>() {
                Ok(v) => ScalarValue::Int64(Some(v)),
                Err(_) => ScalarValue::UInt64(Some(value.extract::<u64>().map_err(|_| {
                    errors::wrong_type(format!("parameter ${n}: {value} does not fit in 64 bits"))
                })?)),
            }
        } else if let Ok(f) = value.cast::<PyFloat>() {
            ScalarValue::Float64(Some(f.value()))
        } else if let Ok(s) = value.cast::<PyString>() {
            ScalarValue::Utf8(Some(s.to_str()?.to_string()))
        } else if let Ok(b) = value.cast::<PyBytes>() {
            ScalarValue::Binary(Some(b.as_bytes().to_vec()))
        } else if let Some(time) = date_or_time(&value, n)? {
            time
        } else {
            return Err(errors::wrong_type(format!(
                "parameter ${n}: a {} is not a SQL value here (None, bool, int, float, str, bytes, \
                 datetime.date or a naive datetime.datetime)",
                value.get_type().name()?
            )));
        });
    }
    Ok(out)
}

/// A `datetime.datetime` without a time zone as microseconds since the
/// epoch, a `datetime.date` as days since it; `None` for anything else. A
/// datetime with a time zone is refused: a timestamp column without one
/// holds wall-clock times, and converting would pick a zone for the caller.
fn date_or_time(value: &Bound<'_, PyAny>, n: usize) -> PyResult<Option<ScalarValue>> {
    /// `date(1970, 1, 1).toordinal()`.
    const EPOCH_ORDINAL: i64 = 719_163;
    let datetime = value.py().import("datetime")?;
    let is_datetime = value.is_instance(&datetime.getattr("datetime")?)?;
    if !is_datetime && !value.is_instance(&datetime.getattr("date")?)? {
        return Ok(None);
    }
    let days = value.call_method0("toordinal")?.extract::<i64>()? - EPOCH_ORDINAL;
    if !is_datetime {
        let days = i32::try_from(days)
            .map_err(|_| errors::wrong_type(format!("parameter ${n}: date out of range")))?;
        return Ok(Some(ScalarValue::Date32(Some(days))));
    }
    if !value.getattr("tzinfo")?.is_none() {
        return Err(errors::wrong_type(format!(
            "parameter ${n}: a datetime with a time zone; pass a naive datetime (its wall-clock time)"
        )));
    }
    let part = |name: &str| -> PyResult<i64> { value.getattr(name)?.extract::<i64>() };
    let seconds = days * 86_400 + part("hour")? * 3_600 + part("minute")? * 60 + part("second")?;
    Ok(Some(ScalarValue::TimestampMicrosecond(Some(seconds * 1_000_000 + part("microsecond")?), None)))
}

/// Refuses `query` on a read-only handle unless every statement of it
/// only reads: a query, an `EXPLAIN` of one (not `EXPLAIN ANALYZE INSERT`,
/// which runs it), `SHOW`, or a table's description. Text that does not
/// parse is a syntax error (as on a writable handle), not a write.
/// DataFusion's own parser decides, as it is the one that runs the text
/// (it knows `COPY` and `CREATE EXTERNAL TABLE`, which write files).
fn refuse_writes(py: Python<'_>, state: &DbState, query: &str, call: &str) -> PyResult<()> {
    use basalt_datafusion::datafusion::sql::parser::{DFParser, Statement as DfStatement};
    use basalt_datafusion::datafusion::sql::sqlparser::ast::Statement;
    let statements = match DFParser::parse_sql(query) {
        Ok(statements) => statements,
        // Not parsable: the SQL layer says why (a read-only handle here,
        // as a writable one would).
        Err(e) if state.read_only => return Err(errors::invalid(py, format!("SQL: {e}"))),
        Err(_) => return Ok(()),
    };
    // One session serves every thread of a `Database`: a block there would
    // take in other threads' statements.
    let block = statements.iter().any(|s| {
        matches!(
            s,
            DfStatement::Statement(s) if matches!(
                **s,
                Statement::StartTransaction { .. } | Statement::Commit { .. } | Statement::Rollback { .. }
            )
        )
    });
    if block {
        return Err(errors::invalid(
            py,
            format!(
                "{call}: BEGIN, COMMIT and ROLLBACK do not run through db.sql; use `with db.transaction() as tx:`"
            ),
        ));
    }
    if !state.read_only {
        return Ok(());
    }
    let reads = |s: &Statement| match s {
        Statement::Query(_)
        | Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowVariable { .. }
        | Statement::ExplainTable { .. } => true,
        Statement::Explain { statement, .. } => matches!(**statement, Statement::Query(_)),
        _ => false,
    };
    let only_reads = statements.iter().all(|s| match s {
        DfStatement::Statement(s) => reads(s),
        DfStatement::Explain(explain) => matches!(&*explain.statement, DfStatement::Statement(s) if reads(s)),
        _ => false,
    });
    if only_reads {
        Ok(())
    } else {
        Err(errors::read_only(py, &format!("{call} (only SELECT, EXPLAIN of a SELECT and SHOW run)")))
    }
}

/// The FFI codec of a `datafusion` session: the capsule its
/// `__datafusion_logical_extension_codec__()` returns (or the capsule
/// itself).
fn codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    const GETTER: &str = "__datafusion_logical_extension_codec__";
    let capsule = if session.hasattr(GETTER)? { session.call_method0(GETTER)? } else { session.clone() };
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| {
        errors::wrong_type(format!(
            "expected a datafusion SessionContext (with {GETTER}) or its codec capsule"
        ))
    })?;
    let pointer: NonNull<FFI_LogicalExtensionCodec> =
        capsule.pointer_checked(Some(c"datafusion_logical_extension_codec"))?.cast();
    // SAFETY: a capsule of that name holds an `FFI_LogicalExtensionCodec`
    // (datafusion-python's contract, checked by name above), alive while
    // the capsule is; it is cloned (its own clone function) before the
    // capsule can go.
    #[expect(unsafe_code, reason = "a PyCapsule hands over a raw pointer; SAFETY above")]
    let codec = unsafe { pointer.as_ref() };
    Ok(codec.clone())
}

/// A capsule named `datafusion_table_provider` holding the FFI provider
/// of table `name`.
pub fn table_provider<'py>(
    py: Python<'py>,
    db: Arc<Db>,
    name: &str,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = codec(session)?;
    let provider = BasaltTable::try_new(db, name).map_err(|e| errors::to_py(py, e))?;
    let rt = runtime(py)?;
    let ffi =
        FFI_TableProvider::new_with_ffi_codec(Arc::new(provider), true, Some(rt.handle().clone()), codec);
    PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
}
