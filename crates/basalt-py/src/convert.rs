//! Python values in, Arrow and bytes out: byte strings for the key-value
//! API, and typed Arrow arrays (then key values) for the tables' keys,
//! ranges and filter literals.
//!
//! A Python value becomes an array of the type its Python type names
//! (`int` → Int64, `str` → Utf8, `datetime` → microsecond timestamps…),
//! then Arrow's cast makes it the column's type with overflow checked, so
//! `300` for an Int8 column is an error, not 44. Only casts that keep the
//! meaning are allowed: an `int` for a date or timestamp column is its
//! raw value in the column's unit, a `str` is parsed for dates, times and
//! decimals, but a `str` is never a number and a `float` is an integer
//! only when it has no fraction.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int64Array, StringArray,
    TimestampMicrosecondArray, UInt64Array,
};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType, DataType as D, Field};
use basalt::OwnedKeyValue;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyList, PyString, PyTuple, PyType};

use crate::errors::{self, IntoPy};

/// The bytes of a `bytes`, `bytearray` or `memoryview` (of bytes):
/// borrowed from an immutable `bytes`, copied from the others (their
/// contents could change while the GIL is released).
pub fn binary<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(array) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(errors::wrong_type(format!(
            "{what} must be bytes, bytearray or memoryview, not str (encode it: s.encode())"
        )));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buffer) => Ok(Cow::Owned(buffer.to_vec(obj.py())?)),
        Err(_) => Err(errors::wrong_type(format!(
            "{what} must be bytes, bytearray or memoryview, not {}",
            type_name(obj)
        ))),
    }
}

/// The name of `obj`'s type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// What Python type a value has, as far as Arrow is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    Str,
    Bytes,
    DateTime,
    Date,
    Decimal,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Null => "None",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::Bytes => "bytes",
            Kind::DateTime => "datetime",
            Kind::Date => "date",
            Kind::Decimal => "Decimal",
        }
    }
}

/// `datetime.datetime`, `datetime.date` and `decimal.Decimal`.
fn value_classes(py: Python<'_>) -> PyResult<&(Py<PyType>, Py<PyType>, Py<PyType>)> {
    static CLASSES: PyOnceLock<(Py<PyType>, Py<PyType>, Py<PyType>)> = PyOnceLock::new();
    CLASSES.get_or_try_init(py, || {
        let module = py.import("datetime")?;
        let datetime = module.getattr("datetime")?.cast_into::<PyType>()?.unbind();
        let date = module.getattr("date")?.cast_into::<PyType>()?.unbind();
        let decimal = py.import("decimal")?.getattr("Decimal")?.cast_into::<PyType>()?.unbind();
        Ok((datetime, date, decimal))
    })
}

fn kind_of(v: &Bound<'_, PyAny>) -> PyResult<Kind> {
    let py = v.py();
    if v.is_none() {
        return Ok(Kind::Null);
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(Kind::Bool);
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Kind::Float);
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Kind::Str);
    }
    if v.is_instance_of::<PyBytes>() || v.is_instance_of::<PyByteArray>() {
        return Ok(Kind::Bytes);
    }
    let (datetime, date, decimal) = value_classes(py)?;
    if v.is_instance(decimal.bind(py))? {
        return Ok(Kind::Decimal);
    }
    // datetime before date: a datetime is a date.
    if v.is_instance(datetime.bind(py))? {
        return Ok(Kind::DateTime);
    }
    if v.is_instance(date.bind(py))? {
        return Ok(Kind::Date);
    }
    // int, and anything with `__index__` (numpy's integers).
    if v.hasattr("__index__")? {
        return Ok(Kind::Int);
    }
    if v.hasattr("__float__")? {
        return Ok(Kind::Float);
    }
    Err(errors::wrong_type(format!("a {} is not a value Basalt can store or compare", type_name(v))))
}

/// Whether a value of `kind` may be cast to a column of `target`.
fn allowed(kind: Kind, target: &DataType) -> bool {
    let temporal = matches!(
        target,
        D::Date32 | D::Date64 | D::Timestamp(..) | D::Time32(_) | D::Time64(_) | D::Duration(_)
    );
    let decimal =
        matches!(target, D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..) | D::Decimal256(..));
    match kind {
        Kind::Null => true,
        Kind::Bool => matches!(target, D::Boolean),
        Kind::Int => target.is_integer() || target.is_floating() || decimal || temporal,
        Kind::Float => target.is_integer() || target.is_floating() || decimal,
        Kind::Str => matches!(target, D::Utf8 | D::LargeUtf8 | D::Utf8View) || temporal || decimal,
        Kind::Bytes => matches!(target, D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_)),
        Kind::DateTime => matches!(target, D::Timestamp(..)),
        Kind::Date => matches!(target, D::Date32 | D::Date64 | D::Timestamp(..)),
        Kind::Decimal => decimal,
    }
}

/// The values as an array of `field`'s type. `None` is null (refused by a
/// non-nullable field's later checks, not here).
pub fn array_of(values: &[Bound<'_, PyAny>], field: &Field) -> PyResult<ArrayRef> {
    let target = field.data_type();
    let mut kind = Kind::Null;
    for v in values {
        let k = kind_of(v)?;
        if !allowed(k, target) {
            return Err(errors::wrong_type(format!(
                "column {} is {target}: a {} value ({}) does not fit it",
                field.name(),
                k.name(),
                v.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
            )));
        }
        kind = match (kind, k) {
            (a, Kind::Null) => a,
            (Kind::Null, b) => b,
            // Each value converted exactly to the column's kind of number.
            (Kind::Int, Kind::Float) | (Kind::Float, Kind::Int) => {
                if target.is_integer() {
                    Kind::Int
                } else {
                    Kind::Float
                }
            }
            (Kind::DateTime, Kind::Date) | (Kind::Date, Kind::DateTime) => Kind::DateTime,
            (a, b) if a == b => a,
            (a, b) => {
                return Err(errors::wrong_type(format!(
                    "values for column {} mix {} and {}",
                    field.name(),
                    a.name(),
                    b.name()
                )));
            }
        };
    }
    let py_array = natural_array(values, kind, target)?;
    if kind == Kind::Float && target.is_integer() {
        refuse_fractions(&py_array, field)?;
    }
    if let (D::Timestamp(_, None), D::Timestamp(_, Some(zone))) = (py_array.data_type(), target) {
        return Err(errors::wrong_type(format!(
            "column {} is a timestamp in zone {zone}: give an aware datetime (a naive one names no instant)",
            field.name()
        )));
    }
    exact_cast(
        &py_array,
        field,
        !matches!(kind, Kind::Str | Kind::Decimal | Kind::Null | Kind::Bytes | Kind::Bool),
    )
    .map_err(|e| errors::wrong_type(format!("a value does not fit column {}: {e}", field.name())))
}

/// `array` cast to `field`'s type, refusing (with `check`) any value the
/// cast changes — a timestamp cut to whole seconds, a float64 rounded to
/// float32, an integer above 2^53 into a float — by casting back and
/// comparing. A key, filter or row then means exactly what was given.
pub fn exact_cast(array: &ArrayRef, field: &Field, check: bool) -> Result<ArrayRef, String> {
    let target = field.data_type();
    if array.data_type() == target {
        return Ok(array.clone());
    }
    let options = CastOptions { safe: false, ..CastOptions::default() };
    let cast = cast_with_options(array, target, &options).map_err(|e| format!("({target}): {e}"))?;
    if check {
        let back =
            cast_with_options(&cast, array.data_type(), &options).map_err(|e| format!("({target}): {e}"))?;
        // Whole arrays first; element by element only when they differ
        // (a changed value, or a NaN, which equals nothing).
        let differs = array.to_data() != back.to_data();
        if let Some(i) = (0..array.len()).filter(|_| differs).find(|&i| !same_value(array, &back, i)) {
            return Err(format!(
                "({target}) cannot hold {} exactly; it would become {}",
                show(array, i),
                show(&cast, i)
            ));
        }
    }
    Ok(cast)
}

/// Whether element `i` of `a` and `b` (same type) is the same value, NaN
/// included.
fn same_value(a: &ArrayRef, b: &ArrayRef, i: usize) -> bool {
    a.slice(i, 1).to_data() == b.slice(i, 1).to_data()
        || (a.is_valid(i) && b.is_valid(i) && show(a, i) == show(b, i) && show(a, i).contains("NaN"))
}

fn show(array: &ArrayRef, i: usize) -> String {
    arrow_cast::display::array_value_to_string(array, i).unwrap_or_else(|_| "?".to_string())
}

/// The values as an array of the type their Python type names.
fn natural_array(values: &[Bound<'_, PyAny>], kind: Kind, target: &DataType) -> PyResult<ArrayRef> {
    Ok(match kind {
        Kind::Null => Arc::new(arrow_array::NullArray::new(values.len())),
        Kind::Bool => Arc::new(
            values.iter().map(|v| opt(v, |v| v.extract::<bool>())).collect::<PyResult<BooleanArray>>()?,
        ),
        Kind::Int => {
            let signed: PyResult<Int64Array> = values.iter().map(|v| opt(v, whole_number)).collect();
            match signed {
                Ok(a) => Arc::new(a),
                // Above i64::MAX: unsigned; otherwise the signed error
                // (it names the value).
                Err(e) => Arc::new(
                    values
                        .iter()
                        .map(|v| opt(v, |v| v.extract::<u64>()))
                        .collect::<PyResult<UInt64Array>>()
                        .map_err(|_| e)?,
                ),
            }
        }
        Kind::Float => {
            Arc::new(values.iter().map(|v| opt(v, exact_float)).collect::<PyResult<Float64Array>>()?)
        }
        Kind::Decimal => {
            let scale = match target {
                D::Decimal32(_, s) | D::Decimal64(_, s) | D::Decimal128(_, s) | D::Decimal256(_, s) => {
                    i64::from(*s)
                }
                _ => 0,
            };
            Arc::new(
                values
                    .iter()
                    .map(|v| opt(v, |v| decimal_text(v, scale)))
                    .collect::<PyResult<StringArray>>()?,
            )
        }
        Kind::Str => Arc::new(
            values.iter().map(|v| opt(v, |v| v.extract::<String>())).collect::<PyResult<StringArray>>()?,
        ),
        Kind::Bytes => {
            let owned: Vec<Option<Vec<u8>>> = values
                .iter()
                .map(|v| opt(v, |v| binary(v, "value").map(Cow::into_owned)))
                .collect::<PyResult<_>>()?;
            Arc::new(owned.iter().map(Option::as_deref).collect::<BinaryArray>())
        }
        Kind::Date => {
            Arc::new(values.iter().map(|v| opt(v, days_since_epoch)).collect::<PyResult<Date32Array>>()?)
        }
        Kind::DateTime => {
            let mut aware = None;
            let micros = values
                .iter()
                .map(|v| {
                    opt(v, |v| {
                        let (m, is_aware) = micros_since_epoch(v)?;
                        if *aware.get_or_insert(is_aware) != is_aware {
                            return Err(errors::wrong_type(
                                "values mix datetimes with and without a time zone".to_string(),
                            ));
                        }
                        Ok(m)
                    })
                })
                .collect::<PyResult<TimestampMicrosecondArray>>()?;
            // An aware datetime is an instant: UTC, cast to the column's zone.
            if aware == Some(true) { Arc::new(micros.with_timezone("+00:00")) } else { Arc::new(micros) }
        }
    })
}

/// An `int` as i64, or a `float` with no fraction as one (for a list
/// mixing both for an integer column).
fn whole_number(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    if v.is_instance_of::<PyFloat>() {
        let f: f64 = v.extract()?;
        if f.fract() != 0.0 || !f.is_finite() || f < -(2f64.powi(63)) || f >= 2f64.powi(63) {
            return Err(errors::wrong_type(format!("{f} is not an integer")));
        }
        return Ok(f as i64);
    }
    v.extract::<i64>()
}

/// A `float`, or an `int` a float64 holds exactly.
fn exact_float(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if !v.is_instance_of::<PyFloat>() && v.hasattr("__index__")? {
        let exact = v.extract::<i64>().ok().filter(|&i| (i as f64) as i64 == i && i != i64::MAX);
        return exact.map(|i| i as f64).ok_or_else(|| {
            errors::wrong_type(format!(
                "{} has no exact float64 value",
                v.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        });
    }
    v.extract::<f64>()
}

/// A `Decimal` as text for a decimal column of `scale`, refused when it
/// has more fractional digits than the column keeps.
fn decimal_text(v: &Bound<'_, PyAny>, scale: i64) -> PyResult<String> {
    let exponent: i64 =
        v.call_method0("normalize")?.call_method0("as_tuple")?.getattr("exponent")?.extract().map_err(
            |_| {
                errors::wrong_type(format!(
                    "{} is not a finite Decimal",
                    v.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                ))
            },
        )?;
    if exponent < -scale {
        return Err(errors::wrong_type(format!(
            "{} has more than {scale} digits after the point",
            v.str().map_or_else(|_| "?".into(), |r| r.to_string())
        )));
    }
    Ok(v.str()?.to_string())
}

fn opt<'py, T>(
    v: &Bound<'py, PyAny>,
    f: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Option<T>> {
    if v.is_none() { Ok(None) } else { f(v).map(Some) }
}

/// A `date` (or a `datetime`'s date) as days since 1970-01-01.
fn days_since_epoch(v: &Bound<'_, PyAny>) -> PyResult<i32> {
    // `toordinal` counts from 0001-01-01 = 1; 1970-01-01 is 719163.
    let ordinal: i64 = v.call_method0("toordinal")?.extract()?;
    Ok((ordinal - 719_163) as i32)
}

/// A `datetime` as microseconds since the epoch (of UTC when it has a
/// zone, of its own wall clock when naive), and whether it had a zone.
fn micros_since_epoch(v: &Bound<'_, PyAny>) -> PyResult<(i64, bool)> {
    let aware = !v.getattr("tzinfo")?.is_none() && !v.call_method0("utcoffset")?.is_none();
    let wall = if aware {
        let offset = v.call_method0("utcoffset")?;
        v.call_method1("__sub__", (offset,))?
    } else {
        v.clone()
    };
    let days = i64::from(days_since_epoch(&wall)?);
    let field = |name: &str| -> PyResult<i64> { wall.getattr(name)?.extract() };
    let seconds = days * 86_400 + field("hour")? * 3600 + field("minute")? * 60 + field("second")?;
    Ok((seconds * 1_000_000 + field("microsecond")?, aware))
}

/// A float for an integer column must have no fraction (a cast would
/// truncate 1.7 to 1).
fn refuse_fractions(array: &ArrayRef, field: &Field) -> PyResult<()> {
    use arrow_array::cast::AsArray;
    let floats = array.as_primitive::<arrow_array::types::Float64Type>();
    if let Some(v) = floats.iter().flatten().find(|v| v.fract() != 0.0 || !v.is_finite()) {
        return Err(errors::wrong_type(format!(
            "column {} is {}: {v} is not an integer",
            field.name(),
            field.data_type()
        )));
    }
    Ok(())
}

/// A key (or a key prefix, with `prefix`) given as one value or a tuple
/// of values, for the leading `fields`.
pub fn key_values(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    fields: &[Field],
    prefix: bool,
) -> PyResult<Vec<OwnedKeyValue>> {
    let parts: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = key.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = key.cast::<PyList>() {
        list.iter().collect()
    } else {
        vec![key.clone()]
    };
    if parts.len() > fields.len() || (!prefix && parts.len() != fields.len()) || parts.is_empty() {
        let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        return Err(errors::invalid(
            py,
            format!(
                "a key of ({}) takes {}{} value{}, not {}",
                names.join(", "),
                if prefix { "1 to " } else { "" },
                fields.len(),
                if fields.len() == 1 { "" } else { "s" },
                parts.len()
            ),
        ));
    }
    parts
        .iter()
        .zip(fields)
        .map(|(part, field)| {
            if part.is_none() {
                return Err(errors::invalid(py, format!("key column {} cannot be None", field.name())));
            }
            let array = array_of(std::slice::from_ref(part), field)?;
            OwnedKeyValue::from_array(array.as_ref(), 0).py_err(py)
        })
        .collect()
}

/// Key columns as arrays, from a list of keys (each one value or a tuple).
pub fn key_columns(py: Python<'_>, keys: &Bound<'_, PyAny>, fields: &[Field]) -> PyResult<Vec<ArrayRef>> {
    let mut columns: Vec<Vec<Bound<'_, PyAny>>> = vec![Vec::new(); fields.len()];
    for key in keys.try_iter()? {
        let key = key?;
        let parts: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = key.cast::<PyTuple>() {
            tuple.iter().collect()
        } else if let Ok(list) = key.cast::<PyList>() {
            list.iter().collect()
        } else {
            vec![key.clone()]
        };
        if parts.len() != fields.len() {
            return Err(errors::invalid(
                py,
                format!("a key takes {} value(s), not {}: {key}", fields.len(), parts.len()),
            ));
        }
        for (column, part) in columns.iter_mut().zip(parts) {
            if part.is_none() {
                return Err(errors::invalid(py, "a key value cannot be None".to_string()));
            }
            column.push(part);
        }
    }
    columns.iter().zip(fields).map(|(values, field)| array_of(values, field)).collect()
}
