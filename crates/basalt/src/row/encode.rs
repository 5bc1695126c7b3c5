//! Encodes a batch's rows into user keys and row bytes (layout in
//! `layout.rs` and `docs/format.md`).

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};

use super::layout::{TableLayout, Width};
use crate::codec::key::{self, KeyValue};
use crate::codec::varint;
use crate::error::{Error, Result};

/// Borrowed access to one column of a batch, prepared once per batch.
pub(super) enum ColumnValues<'a> {
    Fixed { bytes: &'a [u8], width: usize },
    Bool(&'a arrow_array::BooleanArray),
    Var32 { offsets: &'a [i32], data: &'a [u8] },
    Var64 { offsets: &'a [i64], data: &'a [u8] },
}

pub(super) struct ColumnReader<'a> {
    values: ColumnValues<'a>,
    nulls: Option<&'a NullBuffer>,
}

impl<'a> ColumnReader<'a> {
    pub(super) fn new(array: &'a ArrayRef, width: Width) -> Result<ColumnReader<'a>> {
        use arrow_array::cast::AsArray;
        let values = match width {
            Width::Bool => ColumnValues::Bool(array.as_boolean()),
            Width::Fixed(w) => ColumnValues::Fixed { bytes: fixed_values(array)?, width: w },
            Width::Var32 if array.data_type() == &DataType::Utf8 => {
                let a = array.as_string::<i32>();
                ColumnValues::Var32 { offsets: a.value_offsets(), data: a.value_data() }
            }
            Width::Var32 => {
                let a = array.as_binary::<i32>();
                ColumnValues::Var32 { offsets: a.value_offsets(), data: a.value_data() }
            }
            Width::Var64 if array.data_type() == &DataType::LargeUtf8 => {
                let a = array.as_string::<i64>();
                ColumnValues::Var64 { offsets: a.value_offsets(), data: a.value_data() }
            }
            Width::Var64 => {
                let a = array.as_binary::<i64>();
                ColumnValues::Var64 { offsets: a.value_offsets(), data: a.value_data() }
            }
        };
        Ok(ColumnReader { values, nulls: array.nulls() })
    }

    fn is_null(&self, row: usize) -> bool {
        self.nulls.is_some_and(|n| n.is_null(row))
    }

    /// The value's bytes: fixed-width little-endian, a bool byte, or the
    /// variable-width payload.
    pub(super) fn bytes(&self, row: usize) -> &'a [u8] {
        const BOOLS: [[u8; 1]; 2] = [[0], [1]];
        match &self.values {
            ColumnValues::Fixed { bytes, width } => &bytes[row * width..(row + 1) * width],
            ColumnValues::Bool(a) => &BOOLS[usize::from(a.value(row))][..],
            ColumnValues::Var32 { offsets, data } => &data[offsets[row] as usize..offsets[row + 1] as usize],
            ColumnValues::Var64 { offsets, data } => &data[offsets[row] as usize..offsets[row + 1] as usize],
        }
    }
}

/// The fixed-width values of a primitive array as little-endian bytes,
/// starting at the array's first row (Arrow buffers are little-endian on
/// every platform Basalt builds for).
fn fixed_values(array: &ArrayRef) -> Result<&[u8]> {
    use arrow_array::cast::AsArray;
    use arrow_array::types as t;
    macro_rules! bytes_of {
        ($ty:ty) => {
            Ok(array.as_primitive::<$ty>().values().inner().as_slice())
        };
    }
    match array.data_type() {
        DataType::Int8 => bytes_of!(t::Int8Type),
        DataType::Int16 => bytes_of!(t::Int16Type),
        DataType::Int32 => bytes_of!(t::Int32Type),
        DataType::Int64 => bytes_of!(t::Int64Type),
        DataType::UInt8 => bytes_of!(t::UInt8Type),
        DataType::UInt16 => bytes_of!(t::UInt16Type),
        DataType::UInt32 => bytes_of!(t::UInt32Type),
        DataType::UInt64 => bytes_of!(t::UInt64Type),
        DataType::Float32 => bytes_of!(t::Float32Type),
        DataType::Float64 => bytes_of!(t::Float64Type),
        DataType::Date32 => bytes_of!(t::Date32Type),
        DataType::Date64 => bytes_of!(t::Date64Type),
        DataType::Timestamp(TimeUnit::Second, _) => bytes_of!(t::TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => bytes_of!(t::TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => bytes_of!(t::TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => bytes_of!(t::TimestampNanosecondType),
        DataType::Decimal128(_, _) => bytes_of!(t::Decimal128Type),
        other => Err(Error::InvalidArgument(format!("type {other} is not fixed width"))),
    }
}

/// Encodes rows of a checked batch: user keys and row bytes.
pub struct RowEncoder<'a> {
    layout: &'a TableLayout,
    columns: Vec<ColumnReader<'a>>,
}

impl<'a> RowEncoder<'a> {
    /// Prepares to encode `batch`, which must have passed `check_batch`.
    pub fn new(layout: &'a TableLayout, batch: &'a RecordBatch) -> Result<RowEncoder<'a>> {
        RowEncoder::over_columns(layout, batch.columns())
    }

    /// Prepares to encode rows of `columns`, one array per column of the
    /// layout's schema (a table block's arrays).
    pub fn over_columns(layout: &'a TableLayout, columns: &'a [ArrayRef]) -> Result<RowEncoder<'a>> {
        let columns = layout
            .columns
            .iter()
            .map(|c| ColumnReader::new(&columns[c.index], c.width))
            .collect::<Result<Vec<_>>>()?;
        Ok(RowEncoder { layout, columns })
    }

    /// Appends the user key of `row` to `out`; the key columns hold no null.
    pub fn key(&self, row: usize, out: &mut Vec<u8>) {
        if self.layout.raw_key() {
            out.extend_from_slice(self.columns[self.layout.primary_key[0]].bytes(row));
            return;
        }
        for &i in &self.layout.primary_key {
            let c = &self.columns[i];
            let bytes = c.bytes(row);
            let field = &self.layout.columns[i].field;
            key::put_value(out, &key_value_of(field.data_type(), bytes));
        }
    }

    /// Appends the stored columns of `row` to `builders` (one per schema
    /// column, as a table block builds them), straight from the arrays:
    /// no row bytes on the way, and the arrays were cast once, in `new`.
    pub fn push_stored(&self, row: usize, builders: &mut [crate::row::decode::ColumnBuilder]) {
        for &i in &self.layout.stored {
            let c = &self.columns[i];
            if c.is_null(row) {
                builders[i].push_null();
            } else {
                builders[i].push(c.bytes(row));
            }
        }
    }

    /// Each column's value in `row` (`None`: null) by schema index, as
    /// row bytes give them: fixed-width little-endian bytes, a bool byte,
    /// variable-width payloads, and the user key for a key column.
    pub fn values(&self, row: usize) -> Vec<Option<&'a [u8]>> {
        self.columns.iter().map(|c| (!c.is_null(row)).then(|| c.bytes(row))).collect()
    }

    /// The length of the row bytes of `row` (what `row` appends), found
    /// without writing them: a bulk load checks it against
    /// `value_bytes_max` for every row but stores no row bytes.
    pub fn row_len(&self, row: usize) -> usize {
        let stored = &self.layout.stored;
        let mut len = if self.layout.nullable_stored { stored.len().div_ceil(8) } else { 0 };
        for (n, &i) in stored.iter().enumerate() {
            let c = &self.columns[i];
            if c.is_null(row) {
                continue;
            }
            let bytes = c.bytes(row).len();
            let last = n + 1 == stored.len();
            len += match self.layout.columns[i].width {
                Width::Var32 | Width::Var64 if !last => varint::u64_len(bytes as u64) + bytes,
                _ => bytes,
            };
        }
        len
    }

    /// An upper bound of the row bytes of the first `rows` rows together
    /// (every value whole, every length prefix taken as 10 bytes): when it
    /// is within a limit, so is every row, and none needs `row_len`.
    pub fn rows_len_bound(&self, rows: usize) -> usize {
        let stored = &self.layout.stored;
        let bitmap = if self.layout.nullable_stored { stored.len().div_ceil(8) } else { 0 };
        let values: usize = stored
            .iter()
            .map(|&i| match &self.columns[i].values {
                ColumnValues::Fixed { width, .. } => width * rows,
                ColumnValues::Bool(_) => rows,
                ColumnValues::Var32 { offsets, .. } => {
                    (offsets[rows] - offsets[0]) as usize + varint::U64_LEN_MAX * rows
                }
                ColumnValues::Var64 { offsets, .. } => {
                    (offsets[rows] - offsets[0]) as usize + varint::U64_LEN_MAX * rows
                }
            })
            .sum();
        bitmap * rows + values
    }

    /// Appends the row bytes of `row` to `out`.
    pub fn row(&self, row: usize, out: &mut Vec<u8>) {
        let stored = &self.layout.stored;
        if self.layout.nullable_stored {
            let start = out.len();
            out.resize(start + stored.len().div_ceil(8), 0);
            for (n, &i) in stored.iter().enumerate() {
                if self.columns[i].is_null(row) {
                    out[start + n / 8] |= 1 << (n % 8);
                }
            }
        }
        for (n, &i) in stored.iter().enumerate() {
            let c = &self.columns[i];
            if c.is_null(row) {
                continue;
            }
            let bytes = c.bytes(row);
            let last = n + 1 == stored.len();
            match self.layout.columns[i].width {
                Width::Var32 | Width::Var64 if !last => varint::put_bytes(out, bytes),
                _ => out.extend_from_slice(bytes),
            }
        }
    }
}

/// Encodes the user keys of a batch holding only the key columns (deletes,
/// point lookups).
pub struct KeyEncoder<'a> {
    layout: &'a TableLayout,
    columns: Vec<ColumnReader<'a>>,
}

impl<'a> KeyEncoder<'a> {
    /// Prepares to encode `keys`, which must have passed `check_key_batch`.
    pub fn new(layout: &'a TableLayout, keys: &'a RecordBatch) -> Result<KeyEncoder<'a>> {
        let columns = layout
            .primary_key
            .iter()
            .enumerate()
            .map(|(n, &i)| ColumnReader::new(keys.column(n), layout.columns[i].width))
            .collect::<Result<Vec<_>>>()?;
        Ok(KeyEncoder { layout, columns })
    }

    /// Appends the user key of `row` to `out`.
    pub fn key(&self, row: usize, out: &mut Vec<u8>) {
        if self.layout.raw_key() {
            out.extend_from_slice(self.columns[0].bytes(row));
            return;
        }
        for (n, &i) in self.layout.primary_key.iter().enumerate() {
            let bytes = self.columns[n].bytes(row);
            key::put_value(out, &key_value_of(self.layout.columns[i].field.data_type(), bytes));
        }
    }
}

/// Appends the key-codec encoding of a value given as row bytes.
pub fn key_bytes_of(data_type: &DataType, bytes: &[u8], out: &mut Vec<u8>) {
    key::put_value(out, &key_value_of(data_type, bytes));
}

/// Appends the row bytes of element `i` of `array` (non-null).
pub fn value_bytes(array: &ArrayRef, width: Width, i: usize, out: &mut Vec<u8>) -> Result<()> {
    let reader = ColumnReader::new(array, width)?;
    out.extend_from_slice(reader.bytes(i));
    Ok(())
}

/// The key codec value for a key column's little-endian (or raw) bytes.
pub fn key_value_of<'b>(data_type: &DataType, b: &'b [u8]) -> KeyValue<'b> {
    let le8 = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        a
    };
    let le4 = |b: &[u8]| [b[0], b[1], b[2], b[3]];
    match data_type {
        DataType::Boolean => KeyValue::Bool(b[0] != 0),
        DataType::Int8 => KeyValue::I8(b[0] as i8),
        DataType::UInt8 => KeyValue::U8(b[0]),
        DataType::Int16 => KeyValue::I16(i16::from_le_bytes([b[0], b[1]])),
        DataType::UInt16 => KeyValue::U16(u16::from_le_bytes([b[0], b[1]])),
        DataType::Int32 | DataType::Date32 => KeyValue::I32(i32::from_le_bytes(le4(b))),
        DataType::UInt32 => KeyValue::U32(u32::from_le_bytes(le4(b))),
        DataType::Float32 => KeyValue::F32(f32::from_le_bytes(le4(b))),
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => {
            KeyValue::I64(i64::from_le_bytes(le8(b)))
        }
        DataType::UInt64 => KeyValue::U64(u64::from_le_bytes(le8(b))),
        DataType::Float64 => KeyValue::F64(f64::from_le_bytes(le8(b))),
        DataType::Utf8 | DataType::LargeUtf8 => KeyValue::Str(std::str::from_utf8(b).unwrap_or_default()),
        _ => KeyValue::Bytes(b),
    }
}

impl key::OwnedKeyValue {
    /// The key value of element `row` of `array`, an array of a type a key
    /// column may have (as the engine encodes it: dates and timestamps as
    /// their integers, strings and binaries as bytes). For callers that
    /// turn typed input (a command line's text, a Python value) into the
    /// key of a point read or a range bound.
    pub fn from_array(array: &dyn Array, row: usize) -> Result<key::OwnedKeyValue> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{
            Date32Type, Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
            TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
            UInt8Type, UInt16Type, UInt32Type, UInt64Type,
        };
        use key::OwnedKeyValue as K;
        if row >= array.len() || array.is_null(row) {
            return Err(Error::InvalidArgument(format!(
                "a key value must be present: element {row} of the {} array is {}",
                array.data_type(),
                if row >= array.len() { "missing" } else { "null" }
            )));
        }
        Ok(match array.data_type() {
            DataType::Boolean => K::Bool(array.as_boolean().value(row)),
            DataType::Int8 => K::I8(array.as_primitive::<Int8Type>().value(row)),
            DataType::Int16 => K::I16(array.as_primitive::<Int16Type>().value(row)),
            DataType::Int32 => K::I32(array.as_primitive::<Int32Type>().value(row)),
            DataType::Date32 => K::I32(array.as_primitive::<Date32Type>().value(row)),
            DataType::Int64 => K::I64(array.as_primitive::<Int64Type>().value(row)),
            DataType::Date64 => K::I64(array.as_primitive::<Date64Type>().value(row)),
            DataType::Timestamp(TimeUnit::Second, _) => {
                K::I64(array.as_primitive::<TimestampSecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                K::I64(array.as_primitive::<TimestampMillisecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                K::I64(array.as_primitive::<TimestampMicrosecondType>().value(row))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                K::I64(array.as_primitive::<TimestampNanosecondType>().value(row))
            }
            DataType::UInt8 => K::U8(array.as_primitive::<UInt8Type>().value(row)),
            DataType::UInt16 => K::U16(array.as_primitive::<UInt16Type>().value(row)),
            DataType::UInt32 => K::U32(array.as_primitive::<UInt32Type>().value(row)),
            DataType::UInt64 => K::U64(array.as_primitive::<UInt64Type>().value(row)),
            DataType::Float32 => K::F32(array.as_primitive::<Float32Type>().value(row)),
            DataType::Float64 => K::F64(array.as_primitive::<Float64Type>().value(row)),
            DataType::Utf8 => K::Str(array.as_string::<i32>().value(row).to_owned()),
            DataType::LargeUtf8 => K::Str(array.as_string::<i64>().value(row).to_owned()),
            DataType::Binary => K::Bytes(array.as_binary::<i32>().value(row).to_vec()),
            DataType::LargeBinary => K::Bytes(array.as_binary::<i64>().value(row).to_vec()),
            DataType::FixedSizeBinary(_) => K::Bytes(array.as_fixed_size_binary().value(row).to_vec()),
            other => return Err(Error::InvalidArgument(format!("a {other} value cannot be part of a key"))),
        })
    }
}
