//! One value of a table row, typed and borrowed where it lies: what a row
//! view (`db/read/row_view.rs`) hands out instead of an Arrow array. The
//! bytes are the row encoding's (`layout.rs`): fixed-width little-endian,
//! a bool byte, or a variable-width payload, wherever they come from (row
//! bytes, a block's column buffers, an index entry).

use arrow_schema::{DataType, Field};

use super::decode::row_fields;
use super::layout::{ColumnSource, TableLayout, Width};
use crate::error::{Error, Result};

/// One column's value in a row view, typed by the column's Arrow type.
/// `LargeUtf8` and `LargeBinary` values are `Utf8` and `Binary`; a
/// timestamp's unit and zone are its field's.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Cell<'a> {
    /// A null.
    Null,
    /// A `Boolean`.
    Boolean(bool),
    /// An `Int8`.
    Int8(i8),
    /// An `Int16`.
    Int16(i16),
    /// An `Int32`.
    Int32(i32),
    /// An `Int64`.
    Int64(i64),
    /// A `UInt8`.
    UInt8(u8),
    /// A `UInt16`.
    UInt16(u16),
    /// A `UInt32`.
    UInt32(u32),
    /// A `UInt64`.
    UInt64(u64),
    /// A `Float32` (its exact bits, `-0.0` and NaN payloads kept).
    Float32(f32),
    /// A `Float64` (its exact bits).
    Float64(f64),
    /// A `Date32`: days since the epoch.
    Date32(i32),
    /// A `Date64`: milliseconds since the epoch.
    Date64(i64),
    /// A `Timestamp` in its field's unit.
    Timestamp(i64),
    /// A `Decimal128`'s unscaled value (precision and scale are its field's).
    Decimal128(i128),
    /// A `Utf8` or `LargeUtf8` string.
    Utf8(&'a str),
    /// A `Binary` or `LargeBinary` value.
    Binary(&'a [u8]),
}

/// Where a column's value lies in a row view over bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// The value is null.
    Null,
    /// Bytes `start..end` of the view's bytes.
    At(u32, u32),
    /// The value is the row's user key (a single `Binary`/`Utf8` key).
    Key,
    /// The column was not read (an index lookup's projection left it out).
    Absent,
}

/// A column's value before it is typed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawCell<'a> {
    /// A null.
    Null,
    /// The value's row-encoding bytes.
    Bytes(&'a [u8]),
    /// A fixed-width value unpacked from a packed block column: its
    /// little-endian bytes, the first `width` of them the value's.
    Word([u8; 8]),
}

impl RawCell<'_> {
    /// The value's row-encoding bytes for a column of `width` (a packed
    /// word cut to the value's width, a bool's one byte); `None` for a null.
    pub(crate) fn row_bytes(&self, width: Width) -> Option<&[u8]> {
        match self {
            RawCell::Null => None,
            RawCell::Bytes(b) => Some(b),
            RawCell::Word(w) => Some(match width {
                Width::Fixed(n) => &w[..n.min(8)],
                _ => &w[..1],
            }),
        }
    }
}

/// Fills `spans` (one per schema column) with where each column's value
/// lies in `row`, row bytes of `layout`; every byte is checked.
pub(crate) fn row_spans(layout: &TableLayout, row: &[u8], spans: &mut [Span]) -> Result<()> {
    let base = row.as_ptr() as usize;
    row_fields(layout, row, |i, value| {
        spans[i] = match value {
            None => Span::Null,
            // A subslice of `row`, at most `u32::MAX` bytes long (a row's
            // length is bounded by the memtable's and the block's u32
            // offsets).
            Some(v) => {
                let start = v.as_ptr() as usize - base;
                Span::At(start as u32, (start + v.len()) as u32)
            }
        };
    })?;
    for c in layout.columns() {
        if c.source == ColumnSource::Key {
            spans[c.index] = Span::Key;
        }
    }
    Ok(())
}

/// Types `raw`, a value of `field`. A value whose length does not fit its
/// type, or a string that is not UTF-8, is damage (`Error::Corruption`
/// with an empty file: the caller names where it read).
pub(crate) fn typed<'a>(field: &Field, raw: RawCell<'a>) -> Result<Cell<'a>> {
    fn fixed<const N: usize>(field: &Field, bytes: &[u8], exact: bool) -> Result<[u8; N]> {
        let value = if exact { bytes.get(..N).filter(|_| bytes.len() == N) } else { bytes.get(..N) };
        value.and_then(|b| b.try_into().ok()).ok_or_else(|| {
            Error::corruption(
                "",
                0,
                format!("column {}: a value of {} bytes for a {N}-byte type", field.name(), bytes.len()),
            )
        })
    }
    let bytes: &[u8] = match &raw {
        RawCell::Null => return Ok(Cell::Null),
        RawCell::Bytes(b) => b,
        RawCell::Word(w) => w,
    };
    // A packed value is a word whose first bytes are the value's.
    let exact = matches!(raw, RawCell::Bytes(_));
    Ok(match field.data_type() {
        DataType::Boolean => Cell::Boolean(fixed::<1>(field, bytes, exact)?[0] != 0),
        DataType::Int8 => Cell::Int8(i8::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Int16 => Cell::Int16(i16::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Int32 => Cell::Int32(i32::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Int64 => Cell::Int64(i64::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::UInt8 => Cell::UInt8(u8::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::UInt16 => Cell::UInt16(u16::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::UInt32 => Cell::UInt32(u32::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::UInt64 => Cell::UInt64(u64::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Float32 => Cell::Float32(f32::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Float64 => Cell::Float64(f64::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Date32 => Cell::Date32(i32::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Date64 => Cell::Date64(i64::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Timestamp(..) => Cell::Timestamp(i64::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Decimal128(..) => Cell::Decimal128(i128::from_le_bytes(fixed(field, bytes, exact)?)),
        DataType::Utf8 | DataType::LargeUtf8 => match raw {
            RawCell::Bytes(b) => Cell::Utf8(std::str::from_utf8(b).map_err(|e| {
                Error::corruption("", 0, format!("column {}: a string that is not UTF-8: {e}", field.name()))
            })?),
            _ => return Err(unpacked_variable(field)),
        },
        DataType::Binary | DataType::LargeBinary => match raw {
            RawCell::Bytes(b) => Cell::Binary(b),
            _ => return Err(unpacked_variable(field)),
        },
        other => {
            return Err(Error::internal(format!("column {}: a row view of type {other}", field.name())));
        }
    })
}

fn unpacked_variable(field: &Field) -> Error {
    Error::corruption("", 0, format!("column {}: a packed value in a variable-width column", field.name()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
    use arrow_schema::Schema;

    use super::*;
    use crate::row::encode::RowEncoder;

    fn layout(key: DataType) -> TableLayout {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", key, false),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("n", DataType::Int64, true),
        ]));
        TableLayout::new(schema, &[0]).expect("layout")
    }

    #[test]
    fn spans_find_every_value_and_null_of_row_bytes() {
        let l = layout(DataType::Int64);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![7, 8])),
            Arc::new(StringArray::from(vec![Some("héllo"), None])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false)])),
            Arc::new(Int64Array::from(vec![None, Some(-3)])),
        ];
        let batch = RecordBatch::try_new(l.schema().clone(), columns).expect("batch");
        let encoder = RowEncoder::new(&l, &batch).expect("encoder");
        for (r, want) in [
            (0, [Cell::Int64(7), Cell::Utf8("héllo"), Cell::Boolean(true), Cell::Null]),
            (1, [Cell::Int64(8), Cell::Null, Cell::Boolean(false), Cell::Int64(-3)]),
        ] {
            let mut row = Vec::new();
            encoder.row(r, &mut row);
            let mut spans = [Span::Absent; 4];
            row_spans(&l, &row, &mut spans).expect("spans");
            for (c, want) in want.iter().enumerate() {
                let raw = match spans[c] {
                    Span::Null => RawCell::Null,
                    Span::At(s, e) => RawCell::Bytes(&row[s as usize..e as usize]),
                    other => panic!("column {c}: {other:?}"),
                };
                assert_eq!(typed(l.schema().field(c), raw).expect("typed"), *want, "row {r} column {c}");
            }
        }
    }

    #[test]
    fn a_value_of_the_wrong_length_or_bad_utf8_is_corruption_not_a_panic() {
        let l = layout(DataType::Int64);
        let short = typed(l.schema().field(3), RawCell::Bytes(&[1, 2, 3]));
        assert!(matches!(short, Err(Error::Corruption { .. })), "{short:?}");
        let long = typed(l.schema().field(3), RawCell::Bytes(&[0; 9]));
        assert!(matches!(long, Err(Error::Corruption { .. })), "{long:?}");
        let bad = typed(l.schema().field(1), RawCell::Bytes(&[0xff, 0xfe]));
        assert!(matches!(bad, Err(Error::Corruption { .. })), "{bad:?}");
        let word = typed(l.schema().field(1), RawCell::Word([0; 8]));
        assert!(matches!(word, Err(Error::Corruption { .. })), "{word:?}");
        assert_eq!(
            typed(l.schema().field(3), RawCell::Word((-5i64).to_le_bytes())).expect("word"),
            Cell::Int64(-5)
        );
    }

    #[test]
    fn a_raw_string_key_is_the_user_key() {
        let l = layout(DataType::Utf8);
        let mut spans = [Span::Absent; 4];
        // Every stored column null: the bitmap byte only.
        row_spans(&l, &[0b111], &mut spans).expect("spans");
        assert_eq!(spans, [Span::Key, Span::Null, Span::Null, Span::Null]);
    }
}
