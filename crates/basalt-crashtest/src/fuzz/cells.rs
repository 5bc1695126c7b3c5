//! Table values as the `ops` target's model holds them, and their way to
//! and from Arrow arrays and key values.
//!
//! A [`Cell`] keeps a value exactly as written: floats as bits, so a NaN's
//! sign and payload and the sign of a zero survive every comparison. A
//! [`KeyCell`] is a key part in the engine's key order, derived here from
//! the values (not from the engine's codec): floats canonical (`-0.0` is
//! `0.0`, every NaN one NaN above `+inf`), strings and bytes by their bytes.

use std::fmt;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BinaryArray, BooleanArray, LargeBinaryArray, LargeStringArray,
    PrimitiveArray, RecordBatch, RecordBatchOptions, StringArray,
};
use arrow_schema::{DataType, SchemaRef, TimeUnit};
use basalt::OwnedKeyValue;

/// One value of a table column. Integers of every width, dates,
/// timestamps and decimals are `Int`; the Large forms are their small
/// siblings.
#[derive(Clone, PartialEq, Eq)]
pub enum Cell {
    /// Null.
    Null,
    /// A boolean.
    Bool(bool),
    /// Any integer-like value.
    Int(i128),
    /// An `f32` by its bits.
    F32(u32),
    /// An `f64` by its bits.
    F64(u64),
    /// A string.
    Str(String),
    /// Bytes.
    Bin(Vec<u8>),
}

impl Cell {
    /// The value a SQL comparison sees: a float zero without its sign
    /// (SQL, DataFusion and the engine's filters hold -0.0 equal to 0.0,
    /// where Arrow's kernels order floats totally).
    pub fn as_compared(&self) -> Cell {
        match *self {
            Cell::F32(b) if f32::from_bits(b) == 0.0 => Cell::F32(0),
            Cell::F64(b) if f64::from_bits(b) == 0.0 => Cell::F64(0),
            ref other => other.clone(),
        }
    }
}

impl fmt::Debug for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Null => write!(f, "null"),
            Cell::Bool(v) => write!(f, "{v}"),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::F32(b) => write!(f, "{:?}f32({b:#010x})", f32::from_bits(*b)),
            Cell::F64(b) => write!(f, "{:?}f64({b:#018x})", f64::from_bits(*b)),
            Cell::Str(s) => write!(f, "{s:?}"),
            Cell::Bin(b) => write!(f, "b{b:02x?}"),
        }
    }
}

/// A key part in key order. One column's parts are all one variant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyCell {
    /// `false` first.
    Bool(bool),
    /// Signed and unsigned integers, by value.
    Int(i128),
    /// A float's canonical bits mapped to an unsigned order.
    Float(u64),
    /// Strings and bytes, by their bytes.
    Bytes(Vec<u8>),
}

/// The key value of a key column's cell.
pub fn key_value(ty: &DataType, cell: &Cell) -> OwnedKeyValue {
    match (ty, cell) {
        (DataType::Boolean, Cell::Bool(v)) => OwnedKeyValue::Bool(*v),
        (DataType::Int8, Cell::Int(v)) => OwnedKeyValue::I8(*v as i8),
        (DataType::Int16, Cell::Int(v)) => OwnedKeyValue::I16(*v as i16),
        (DataType::Int32 | DataType::Date32, Cell::Int(v)) => OwnedKeyValue::I32(*v as i32),
        (DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _), Cell::Int(v)) => {
            OwnedKeyValue::I64(*v as i64)
        }
        (DataType::UInt8, Cell::Int(v)) => OwnedKeyValue::U8(*v as u8),
        (DataType::UInt16, Cell::Int(v)) => OwnedKeyValue::U16(*v as u16),
        (DataType::UInt32, Cell::Int(v)) => OwnedKeyValue::U32(*v as u32),
        (DataType::UInt64, Cell::Int(v)) => OwnedKeyValue::U64(*v as u64),
        (DataType::Float32, Cell::F32(b)) => OwnedKeyValue::F32(f32::from_bits(*b)),
        (DataType::Float64, Cell::F64(b)) => OwnedKeyValue::F64(f64::from_bits(*b)),
        (DataType::Utf8 | DataType::LargeUtf8, Cell::Str(s)) => OwnedKeyValue::Str(s.clone()),
        (DataType::Binary | DataType::LargeBinary, Cell::Bin(b)) => OwnedKeyValue::Bytes(b.clone()),
        _ => panic!("harness bug: no key value for {cell:?} in a {ty} key column"),
    }
}

/// A key value's place in key order.
pub fn key_cell(v: &OwnedKeyValue) -> KeyCell {
    match v {
        OwnedKeyValue::Bool(v) => KeyCell::Bool(*v),
        OwnedKeyValue::I8(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::I16(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::I32(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::I64(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::U8(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::U16(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::U32(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::U64(v) => KeyCell::Int(i128::from(*v)),
        OwnedKeyValue::F32(v) => {
            let bits = if v.is_nan() {
                0x7fc0_0000
            } else if *v == 0.0 {
                0
            } else {
                v.to_bits()
            };
            let ordered = if bits >> 31 == 1 { !bits } else { bits | 1 << 31 };
            KeyCell::Float(u64::from(ordered))
        }
        OwnedKeyValue::F64(v) => {
            let bits = if v.is_nan() {
                0x7ff8_0000_0000_0000
            } else if *v == 0.0 {
                0
            } else {
                v.to_bits()
            };
            KeyCell::Float(if bits >> 63 == 1 { !bits } else { bits | 1 << 63 })
        }
        OwnedKeyValue::Str(s) => KeyCell::Bytes(s.as_bytes().to_vec()),
        OwnedKeyValue::Bytes(b) => KeyCell::Bytes(b.clone()),
    }
}

fn int(c: &Cell) -> Option<i128> {
    match c {
        Cell::Null => None,
        Cell::Int(v) => Some(*v),
        other => panic!("harness bug: {other:?} in an integer column"),
    }
}

fn primitive<T: ArrowPrimitiveType>(
    ty: &DataType,
    cells: &[&Cell],
    f: impl Fn(&Cell) -> Option<T::Native>,
) -> ArrayRef {
    Arc::new(cells.iter().map(|c| f(c)).collect::<PrimitiveArray<T>>().with_data_type(ty.clone()))
}

/// An array of type `ty` holding `cells`.
pub fn array_of(ty: &DataType, cells: &[&Cell]) -> ArrayRef {
    macro_rules! ints {
        ($t:ty, $n:ty) => {
            primitive::<$t>(ty, cells, |c| int(c).map(|v| v as $n))
        };
    }
    match ty {
        DataType::Boolean => Arc::new(
            cells
                .iter()
                .map(|c| match c {
                    Cell::Null => None,
                    Cell::Bool(v) => Some(*v),
                    other => panic!("harness bug: {other:?} in a Boolean column"),
                })
                .collect::<BooleanArray>(),
        ),
        DataType::Int8 => ints!(Int8Type, i8),
        DataType::Int16 => ints!(Int16Type, i16),
        DataType::Int32 => ints!(Int32Type, i32),
        DataType::Int64 => ints!(Int64Type, i64),
        DataType::UInt8 => ints!(UInt8Type, u8),
        DataType::UInt16 => ints!(UInt16Type, u16),
        DataType::UInt32 => ints!(UInt32Type, u32),
        DataType::UInt64 => ints!(UInt64Type, u64),
        DataType::Date32 => ints!(Date32Type, i32),
        DataType::Date64 => ints!(Date64Type, i64),
        DataType::Timestamp(TimeUnit::Second, _) => ints!(TimestampSecondType, i64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => ints!(TimestampMillisecondType, i64),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType, i64),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => ints!(TimestampNanosecondType, i64),
        DataType::Decimal128(_, _) => ints!(Decimal128Type, i128),
        DataType::Float32 => primitive::<Float32Type>(ty, cells, |c| match c {
            Cell::Null => None,
            Cell::F32(b) => Some(f32::from_bits(*b)),
            other => panic!("harness bug: {other:?} in a Float32 column"),
        }),
        DataType::Float64 => primitive::<Float64Type>(ty, cells, |c| match c {
            Cell::Null => None,
            Cell::F64(b) => Some(f64::from_bits(*b)),
            other => panic!("harness bug: {other:?} in a Float64 column"),
        }),
        DataType::Utf8 => Arc::new(cells.iter().map(|c| text(c)).collect::<StringArray>()),
        DataType::LargeUtf8 => Arc::new(cells.iter().map(|c| text(c)).collect::<LargeStringArray>()),
        DataType::Binary => Arc::new(cells.iter().map(|c| bytes(c)).collect::<BinaryArray>()),
        DataType::LargeBinary => Arc::new(cells.iter().map(|c| bytes(c)).collect::<LargeBinaryArray>()),
        other => panic!("harness bug: no arrays of {other}"),
    }
}

fn text(c: &Cell) -> Option<&str> {
    match c {
        Cell::Null => None,
        Cell::Str(s) => Some(s),
        other => panic!("harness bug: {other:?} in a string column"),
    }
}

fn bytes(c: &Cell) -> Option<&[u8]> {
    match c {
        Cell::Null => None,
        Cell::Bin(b) => Some(b),
        other => panic!("harness bug: {other:?} in a binary column"),
    }
}

/// The values of an array.
pub fn cells_of(array: &dyn Array) -> Vec<Cell> {
    macro_rules! ints {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map_or(Cell::Null, |v| Cell::Int(i128::from(v))))
                .collect()
        };
    }
    match array.data_type() {
        DataType::Boolean => array.as_boolean().iter().map(|v| v.map_or(Cell::Null, Cell::Bool)).collect(),
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Date32 => ints!(Date32Type),
        DataType::Date64 => ints!(Date64Type),
        DataType::Timestamp(TimeUnit::Second, _) => ints!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => ints!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => ints!(TimestampNanosecondType),
        DataType::Decimal128(_, _) => ints!(Decimal128Type),
        DataType::Float32 => array
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| v.map_or(Cell::Null, |v| Cell::F32(v.to_bits())))
            .collect(),
        DataType::Float64 => array
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map_or(Cell::Null, |v| Cell::F64(v.to_bits())))
            .collect(),
        DataType::Utf8 => {
            array.as_string::<i32>().iter().map(|v| v.map_or(Cell::Null, |s| Cell::Str(s.into()))).collect()
        }
        DataType::LargeUtf8 => {
            array.as_string::<i64>().iter().map(|v| v.map_or(Cell::Null, |s| Cell::Str(s.into()))).collect()
        }
        DataType::Binary => {
            array.as_binary::<i32>().iter().map(|v| v.map_or(Cell::Null, |b| Cell::Bin(b.into()))).collect()
        }
        DataType::LargeBinary => {
            array.as_binary::<i64>().iter().map(|v| v.map_or(Cell::Null, |b| Cell::Bin(b.into()))).collect()
        }
        other => panic!("a table returned a column of type {other}, which no table has"),
    }
}

/// A batch of `schema` holding `rows` (each a value per column).
pub fn batch_of(schema: &SchemaRef, rows: &[&[Cell]]) -> RecordBatch {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| array_of(f.data_type(), &rows.iter().map(|r| &r[i]).collect::<Vec<_>>()))
        .collect();
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options).expect("a batch of the model's rows")
}

/// The rows of a batch.
pub fn rows_of(batch: &RecordBatch) -> Vec<Vec<Cell>> {
    let columns: Vec<Vec<Cell>> = batch.columns().iter().map(|c| cells_of(c.as_ref())).collect();
    (0..batch.num_rows()).map(|r| columns.iter().map(|c| c[r].clone()).collect()).collect()
}
