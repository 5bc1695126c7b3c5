//! Column statistics for DataFusion's planner from the engine's zone maps
//! (`Table::column_estimates`): null counts and value bounds, all inexact
//! (a deleted or overwritten row still stored counts), unknown while a
//! memtable holds some of the table's rows.

use arrow_schema::{DataType, Schema};
use basalt::{ColumnEstimate, OwnedKeyValue, Table};
use datafusion::common::ScalarValue;
use datafusion::common::stats::{ColumnStatistics, Precision};

/// The statistics of each column of `schema` (the table's, or a projection
/// of it), by name, from the table's zone maps; unknown where the engine
/// knows nothing.
pub(crate) fn column_statistics(table: &Table, schema: &Schema) -> Vec<ColumnStatistics> {
    // The estimates are by position in the schema of the version they
    // read: a column change between them and the schema (both loads) would
    // give one column's bounds to another, so then nothing is known.
    let table_schema = table.schema();
    let estimates = table.column_estimates().unwrap_or_default();
    if !std::sync::Arc::ptr_eq(&table_schema, &table.schema()) {
        return vec![ColumnStatistics::new_unknown(); schema.fields().len()];
    }
    schema
        .fields()
        .iter()
        .map(|field| {
            let estimate = table_schema.index_of(field.name()).ok().and_then(|i| estimates.get(i));
            estimate.map_or_else(ColumnStatistics::new_unknown, |e| statistics_of(e, field.data_type()))
        })
        .collect()
}

fn statistics_of(estimate: &ColumnEstimate, data_type: &DataType) -> ColumnStatistics {
    let bound = |v: &Option<OwnedKeyValue>| {
        v.as_ref().and_then(|v| scalar_of(v, data_type)).map_or(Precision::Absent, Precision::Inexact)
    };
    let (min_value, max_value) = if bounds_survive_casts(estimate, data_type) {
        (bound(&estimate.min), bound(&estimate.max))
    } else {
        (Precision::Absent, Precision::Absent)
    };
    ColumnStatistics {
        null_count: estimate.null_count.map_or(Precision::Absent, |n| Precision::Inexact(n as usize)),
        min_value,
        max_value,
        ..ColumnStatistics::new_unknown()
    }
}

/// Largest integer magnitude every float type holds exactly (2^24, the
/// width of an `f32` mantissa).
const INTEGER_EXACT_IN_FLOATS_MAX: i128 = 1 << 24;

/// Whether DataFusion may be given the column's bounds. DataFusion 55
/// narrows a filter's interval back through a cast as if the cast could
/// be undone: over a lossy one (`CAST(x AS DOUBLE)` of a large BIGINT, a
/// DOUBLE cast to INT, a timestamp to a date, a string to a number) it
/// concludes from the bounds that the column is constant where it is not,
/// and drops the ORDER BY on it (apache/datafusion#25523, fixed upstream by
/// #25531 after 55.2; Parquet's statistics give the same wrong order).
/// Until a DataFusion with that fix is used here, only bounds no such
/// cast can blur are handed over: booleans, and integers (dates) whose
/// bounds every float type holds exactly. Nothing else reads them: the
/// engine prunes by its own zone maps.
fn bounds_survive_casts(estimate: &ColumnEstimate, data_type: &DataType) -> bool {
    if !(data_type.is_integer() || matches!(data_type, DataType::Boolean | DataType::Date32)) {
        return false;
    }
    let exact = |v: &Option<OwnedKeyValue>| match v {
        None
        | Some(
            OwnedKeyValue::Bool(_)
            | OwnedKeyValue::I8(_)
            | OwnedKeyValue::U8(_)
            | OwnedKeyValue::I16(_)
            | OwnedKeyValue::U16(_),
        ) => true,
        Some(OwnedKeyValue::I32(v)) => i128::from(*v).abs() <= INTEGER_EXACT_IN_FLOATS_MAX,
        Some(OwnedKeyValue::U32(v)) => i128::from(*v) <= INTEGER_EXACT_IN_FLOATS_MAX,
        Some(OwnedKeyValue::I64(v)) => i128::from(*v).abs() <= INTEGER_EXACT_IN_FLOATS_MAX,
        Some(OwnedKeyValue::U64(v)) => i128::from(*v) <= INTEGER_EXACT_IN_FLOATS_MAX,
        Some(_) => false,
    };
    exact(&estimate.min) && exact(&estimate.max)
}

/// `value` (a key codec value: dates and timestamps as integers) as a
/// scalar of `data_type`.
fn scalar_of(value: &OwnedKeyValue, data_type: &DataType) -> Option<ScalarValue> {
    let raw = match value {
        OwnedKeyValue::Bool(v) => ScalarValue::Boolean(Some(*v)),
        OwnedKeyValue::I8(v) => ScalarValue::Int8(Some(*v)),
        OwnedKeyValue::I16(v) => ScalarValue::Int16(Some(*v)),
        OwnedKeyValue::I32(v) => ScalarValue::Int32(Some(*v)),
        OwnedKeyValue::I64(v) => ScalarValue::Int64(Some(*v)),
        OwnedKeyValue::U8(v) => ScalarValue::UInt8(Some(*v)),
        OwnedKeyValue::U16(v) => ScalarValue::UInt16(Some(*v)),
        OwnedKeyValue::U32(v) => ScalarValue::UInt32(Some(*v)),
        OwnedKeyValue::U64(v) => ScalarValue::UInt64(Some(*v)),
        OwnedKeyValue::F32(v) => ScalarValue::Float32(Some(*v)),
        OwnedKeyValue::F64(v) => ScalarValue::Float64(Some(*v)),
        OwnedKeyValue::Bytes(v) => ScalarValue::Binary(Some(v.clone())),
        OwnedKeyValue::Str(v) => ScalarValue::Utf8(Some(v.clone())),
    };
    if raw.data_type() == *data_type { Some(raw) } else { raw.cast_to(data_type).ok() }
}
