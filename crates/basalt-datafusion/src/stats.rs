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
    let estimates = table.column_estimates().unwrap_or_default();
    let table_schema = table.schema();
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
    ColumnStatistics {
        null_count: estimate.null_count.map_or(Precision::Absent, |n| Precision::Inexact(n as usize)),
        min_value: bound(&estimate.min),
        max_value: bound(&estimate.max),
        ..ColumnStatistics::new_unknown()
    }
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
