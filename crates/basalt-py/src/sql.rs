//! SQL from Python: `Database.sql` runs a statement through
//! `basalt-datafusion` (the session Basalt's own SQL layer makes), and
//! `Table.__datafusion_table_provider__` hands a table to the `datafusion`
//! Python package through DataFusion's FFI.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use basalt::Db;
use basalt_datafusion::BasaltTable;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use pyo3_arrow::PyTable;

use crate::errors;
use crate::state::{DbState, runtime};

/// Runs one statement and collects its result (the GIL released).
pub fn run<'py>(py: Python<'py>, state: &DbState, query: &str) -> PyResult<Bound<'py, PyAny>> {
    if state.read_only && !reads_only(query) {
        return Err(errors::read_only(py, "sql (only SELECT, EXPLAIN of a SELECT and SHOW run)"));
    }
    let ctx = state.session(py)?;
    let rt = runtime(py)?;
    let result: Result<(Vec<RecordBatch>, SchemaRef), String> = py.detach(|| {
        rt.block_on(async {
            let frame = basalt_datafusion::sql(&ctx, query).await.map_err(|e| e.to_string())?;
            let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
            let batches = frame.collect().await.map_err(|e| e.to_string())?;
            Ok((batches, schema))
        })
    });
    if state.is_closed() {
        return Err(errors::closed(py));
    }
    let (batches, schema) = result.map_err(|e| errors::invalid(py, format!("SQL: {e}")))?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

/// Whether every statement of `query` only reads: a query, an `EXPLAIN`
/// of one (not `EXPLAIN ANALYZE INSERT`, which runs it), `SHOW`, or a
/// table's description. Anything unparsable counts as a write.
fn reads_only(query: &str) -> bool {
    use basalt_datafusion::datafusion::sql::sqlparser::ast::Statement;
    use basalt_datafusion::datafusion::sql::sqlparser::dialect::GenericDialect;
    use basalt_datafusion::datafusion::sql::sqlparser::parser::Parser;
    Parser::parse_sql(&GenericDialect {}, query).is_ok_and(|statements| {
        statements.iter().all(|s| match s {
            Statement::Query(_)
            | Statement::ShowTables { .. }
            | Statement::ShowColumns { .. }
            | Statement::ShowVariable { .. }
            | Statement::ExplainTable { .. } => true,
            Statement::Explain { statement, .. } => matches!(**statement, Statement::Query(_)),
            _ => false,
        })
    })
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
    #[allow(unsafe_code)]
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
