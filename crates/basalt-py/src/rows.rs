//! Rows as Python values: a row as the `dict` pyarrow's `to_pylist`
//! makes, a key value as the value `scan(start=…)` takes back, and a row
//! projected to named columns.

use arrow_array::RecordBatch;
use arrow_schema::Field;
use basalt::OwnedKeyValue;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::PyRecordBatch;

use crate::errors;

/// A key value as the Python value `scan(start=…)` takes back.
pub(crate) fn key_value_to_py<'py>(py: Python<'py>, v: &OwnedKeyValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        OwnedKeyValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        OwnedKeyValue::I8(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::I16(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::I32(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::I64(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::U8(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::U16(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::U32(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::U64(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::F32(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::F64(x) => x.into_pyobject(py)?.into_any(),
        OwnedKeyValue::Bytes(b) => pyo3::types::PyBytes::new(py, b).into_any(),
        OwnedKeyValue::Str(s) => s.into_pyobject(py)?.into_any(),
    })
}

/// `row` with only `names`, in that order.
pub(crate) fn project(py: Python<'_>, row: &RecordBatch, names: &[String]) -> PyResult<RecordBatch> {
    let schema = row.schema();
    let indices = names
        .iter()
        .map(|n| schema.index_of(n).map_err(|_| errors::invalid(py, format!("no column {n}"))))
        .collect::<PyResult<Vec<_>>>()?;
    row.project(&indices).map_err(|e| errors::invalid(py, e.to_string()))
}

/// Whether a column's Python values are made here (numbers, booleans,
/// strings and bytes) rather than by pyarrow. An extension type (its name
/// in the field's metadata) has pyarrow scalars of its own: pyarrow
/// converts those columns too.
pub(crate) fn made_here(f: &Field) -> bool {
    use arrow_schema::DataType;
    let t = f.data_type();
    let simple = t.is_integer()
        || matches!(
            t,
            DataType::Float32
                | DataType::Float64
                | DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Binary
                | DataType::LargeBinary
        );
    simple && !f.metadata().contains_key("ARROW:extension:name")
}

/// A row view as the `dict` [`row_as_dict`] makes, of the columns `names`
/// (all without names), with no Arrow array on the way; `None` when a
/// column is not one [`made_here`] or a name is not a column (the caller
/// then takes the batch path, which converts or refuses it).
pub(crate) fn view_as_dict<'py>(
    py: Python<'py>,
    row: basalt::RowRef<'_>,
    names: Option<&[String]>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    use basalt::Cell;
    let schema = row.schema();
    let columns: Vec<usize> = match names {
        None => (0..schema.fields().len()).collect(),
        Some(names) => match names.iter().map(|n| schema.index_of(n)).collect::<Result<_, _>>() {
            Ok(c) => c,
            Err(_) => return Ok(None),
        },
    };
    if !columns.iter().all(|&c| made_here(schema.field(c))) {
        return Ok(None);
    }
    let dict = PyDict::new(py);
    for c in columns {
        let value: Bound<'py, PyAny> = match row.value(c).map_err(|e| errors::to_py(py, e))? {
            Cell::Null => py.None().into_bound(py),
            Cell::Boolean(v) => v.into_pyobject(py)?.to_owned().into_any(),
            Cell::Int8(v) => v.into_pyobject(py)?.into_any(),
            Cell::Int16(v) => v.into_pyobject(py)?.into_any(),
            Cell::Int32(v) => v.into_pyobject(py)?.into_any(),
            Cell::Int64(v) => v.into_pyobject(py)?.into_any(),
            Cell::UInt8(v) => v.into_pyobject(py)?.into_any(),
            Cell::UInt16(v) => v.into_pyobject(py)?.into_any(),
            Cell::UInt32(v) => v.into_pyobject(py)?.into_any(),
            Cell::UInt64(v) => v.into_pyobject(py)?.into_any(),
            Cell::Float32(v) => f64::from(v).into_pyobject(py)?.into_any(),
            Cell::Float64(v) => v.into_pyobject(py)?.into_any(),
            Cell::Utf8(v) => v.into_pyobject(py)?.into_any(),
            Cell::Binary(v) => PyBytes::new(py, v).into_any(),
            other => return Err(errors::invalid(py, format!("no conversion of {other:?} here (a bug)"))),
        };
        dict.set_item(schema.field(c).name(), value)?;
    }
    Ok(Some(dict))
}

/// Row 0 of `row` as the `dict` pyarrow's `to_pylist` makes. Numbers,
/// booleans, strings and bytes are made here; only the other columns
/// (dates, timestamps, decimals) go to pyarrow, in one batch: handing the
/// whole row to pyarrow and back cost about 10 µs of a 16 µs `Table.get`,
/// and 100 µs of a 19-column row's.
pub(crate) fn row_as_dict<'py>(py: Python<'py>, row: &RecordBatch) -> PyResult<Bound<'py, PyDict>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{
        Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
        UInt32Type, UInt64Type,
    };
    use arrow_schema::DataType;

    let schema = row.schema();
    let others: Vec<usize> = (0..schema.fields().len()).filter(|&i| !made_here(schema.field(i))).collect();
    // pyarrow's values of the other columns, by position among them.
    let converted: Vec<Bound<'py, PyAny>> = if others.is_empty() || row.num_rows() == 0 {
        Vec::new()
    } else {
        // Column by column (`as_py` of each first value, what `to_pylist`
        // does): a projection may name a column twice.
        let sub = row.project(&others).map_err(|e| errors::invalid(py, e.to_string()))?;
        let batch = PyRecordBatch::new(sub).into_pyarrow(py)?;
        (0..others.len())
            .map(|j| batch.call_method1("column", (j,))?.get_item(0)?.call_method0("as_py"))
            .collect::<PyResult<_>>()?
    };
    let mut converted = converted.into_iter();
    let dict = PyDict::new(py);
    for (field, column) in row.schema().fields().iter().zip(row.columns()) {
        let c = column.as_ref();
        let value: Bound<'py, PyAny> = if !made_here(field) {
            match converted.next() {
                Some(v) => v,
                None => {
                    return Err(errors::invalid(py, format!("column {} was not converted", field.name())));
                }
            }
        } else if c.is_null(0) {
            py.None().into_bound(py)
        } else {
            match c.data_type() {
                DataType::Int8 => c.as_primitive::<Int8Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::Int16 => c.as_primitive::<Int16Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::Int32 => c.as_primitive::<Int32Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::Int64 => c.as_primitive::<Int64Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::UInt8 => c.as_primitive::<UInt8Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::UInt16 => c.as_primitive::<UInt16Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::UInt32 => c.as_primitive::<UInt32Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::UInt64 => c.as_primitive::<UInt64Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::Float32 => {
                    f64::from(c.as_primitive::<Float32Type>().value(0)).into_pyobject(py)?.into_any()
                }
                DataType::Float64 => c.as_primitive::<Float64Type>().value(0).into_pyobject(py)?.into_any(),
                DataType::Boolean => c.as_boolean().value(0).into_pyobject(py)?.to_owned().into_any(),
                DataType::Utf8 => c.as_string::<i32>().value(0).into_pyobject(py)?.into_any(),
                DataType::LargeUtf8 => c.as_string::<i64>().value(0).into_pyobject(py)?.into_any(),
                DataType::Binary => PyBytes::new(py, c.as_binary::<i32>().value(0)).into_any(),
                DataType::LargeBinary => PyBytes::new(py, c.as_binary::<i64>().value(0)).into_any(),
                other => return Err(errors::invalid(py, format!("no conversion of {other} here (a bug)"))),
            }
        };
        dict.set_item(field.name(), value)?;
    }
    Ok(dict)
}
