//! Decodes row bytes back into Arrow columns: the column builders that SST
//! blocks and query results fill.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, make_array};
use arrow_buffer::Buffer;
use arrow_data::ArrayDataBuilder;
use arrow_schema::Field;

use super::encode::ColumnReader;
use super::layout::{TableLayout, Width};
use crate::codec::varint;
use crate::error::{Error, Result};

/// Accumulates one column's values in Arrow layout: validity bits, offsets
/// and values. Used for SST blocks and for query results.
#[derive(Debug, Clone)]
pub struct ColumnBuilder {
    field: Arc<Field>,
    width: Width,
    len: usize,
    null_count: usize,
    /// Validity bits, one per row (1 = valid).
    validity: Vec<u8>,
    offsets: Vec<u8>,
    values: Vec<u8>,
}

/// Rows a new builder has room for before it first grows.
const FEW_ROWS: usize = 16;

fn set_bit(bits: &mut Vec<u8>, i: usize, on: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if on {
        bits[i / 8] |= 1 << (i % 8);
    }
}

impl ColumnBuilder {
    /// An empty builder for a column. Nothing is allocated until the
    /// first row, which reserves room for a few: most answers (a lookup's
    /// rows, a short range) are small, and growing each buffer from
    /// nothing cost a reallocation per doubling (measured: a tenth of a
    /// 10-row covering lookup), while a builder of a column no row reaches
    /// (a covering lookup's) allocates nothing.
    pub fn new(field: Arc<Field>, width: Width) -> ColumnBuilder {
        let offsets = match width {
            Width::Var32 => 0i32.to_le_bytes().to_vec(),
            Width::Var64 => 0i64.to_le_bytes().to_vec(),
            _ => Vec::new(),
        };
        ColumnBuilder {
            field,
            width,
            len: 0,
            null_count: 0,
            validity: Vec::new(),
            offsets,
            values: Vec::new(),
        }
    }

    /// Room for a few rows, taken by the first one.
    #[cold]
    fn reserve_first_rows(&mut self) {
        self.validity.reserve(FEW_ROWS.div_ceil(8));
        match self.width {
            Width::Fixed(w) => self.values.reserve(FEW_ROWS * w),
            Width::Bool => self.values.reserve(FEW_ROWS.div_ceil(8)),
            Width::Var32 => {
                self.offsets.reserve(FEW_ROWS * 4);
                self.values.reserve(FEW_ROWS * 16);
            }
            Width::Var64 => {
                self.offsets.reserve(FEW_ROWS * 8);
                self.values.reserve(FEW_ROWS * 16);
            }
        }
    }

    /// Rows appended.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.validity.len() + self.offsets.len() + self.values.len()
    }

    /// Appends a null (or, for a non-nullable column, a placeholder that a
    /// deleted row carries and no reader sees).
    pub fn push_null(&mut self) {
        if self.len == 0 {
            self.reserve_first_rows();
        }
        set_bit(&mut self.validity, self.len, false);
        self.null_count += 1;
        match self.width {
            Width::Fixed(w) => self.values.resize(self.values.len() + w, 0),
            Width::Bool => set_bit(&mut self.values, self.len, false),
            Width::Var32 => self.offsets.extend_from_slice(&(self.values.len() as i32).to_le_bytes()),
            Width::Var64 => self.offsets.extend_from_slice(&(self.values.len() as i64).to_le_bytes()),
        }
        self.len += 1;
    }

    /// Appends a value given as row bytes (fixed-width LE, a bool byte, or
    /// the variable-width payload).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.len == 0 {
            self.reserve_first_rows();
        }
        set_bit(&mut self.validity, self.len, true);
        match self.width {
            Width::Fixed(_) => self.values.extend_from_slice(bytes),
            Width::Bool => set_bit(&mut self.values, self.len, bytes.first().is_some_and(|b| *b != 0)),
            Width::Var32 => {
                self.values.extend_from_slice(bytes);
                self.offsets.extend_from_slice(&(self.values.len() as i32).to_le_bytes());
            }
            Width::Var64 => {
                self.values.extend_from_slice(bytes);
                self.offsets.extend_from_slice(&(self.values.len() as i64).to_le_bytes());
            }
        }
        self.len += 1;
    }

    /// Appends row `i` of `array` (same type as this column).
    pub fn push_from_array(&mut self, array: &ArrayRef, i: usize) -> Result<()> {
        if array.is_null(i) {
            self.push_null();
            return Ok(());
        }
        let reader = ColumnReader::new(array, self.width)?;
        self.push(reader.bytes(i));
        Ok(())
    }

    /// The row bytes of row `i`, or `None` if it is null.
    pub fn value_at<'s>(&'s self, i: usize, scratch: &'s mut [u8; 1]) -> Option<&'s [u8]> {
        if let Width::Bool = self.width {
            if !self.is_valid(i) {
                return None;
            }
            scratch[0] = (self.values[i / 8] >> (i % 8)) & 1;
            return Some(&scratch[..]);
        }
        self.bytes_at(i)
    }

    /// The row bytes of row `i` as they lie in the builder, `None` if it
    /// is null or the column is boolean (bit-packed: see `value_at`).
    pub fn bytes_at(&self, i: usize) -> Option<&[u8]> {
        if !self.is_valid(i) {
            return None;
        }
        let off = |at: usize, wide: bool| -> usize {
            if wide {
                let mut a = [0u8; 8];
                a.copy_from_slice(&self.offsets[8 * at..8 * at + 8]);
                u64::from_le_bytes(a) as usize
            } else {
                u32::from_le_bytes([
                    self.offsets[4 * at],
                    self.offsets[4 * at + 1],
                    self.offsets[4 * at + 2],
                    self.offsets[4 * at + 3],
                ]) as usize
            }
        };
        Some(match self.width {
            Width::Fixed(w) => &self.values[i * w..(i + 1) * w],
            Width::Bool => return None,
            Width::Var32 => &self.values[off(i, false)..off(i + 1, false)],
            Width::Var64 => &self.values[off(i, true)..off(i + 1, true)],
        })
    }

    fn is_valid(&self, i: usize) -> bool {
        self.validity.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// The column's Arrow field.
    pub fn field(&self) -> &Field {
        &self.field
    }

    /// The three buffers (validity, offsets, values); validity is empty when
    /// no row is null.
    pub fn take_buffers(&mut self) -> [Vec<u8>; 3] {
        let validity = if self.null_count == 0 { Vec::new() } else { std::mem::take(&mut self.validity) };
        let out = [validity, std::mem::take(&mut self.offsets), std::mem::take(&mut self.values)];
        *self = ColumnBuilder::new(self.field.clone(), self.width);
        out
    }

    /// Builds an Arrow array of the rows, consuming the builder (no
    /// empty builder is made to take its place, as [`ColumnBuilder::finish`]
    /// does).
    pub fn into_array(self) -> Result<ArrayRef> {
        let validity = if self.null_count == 0 { Vec::new() } else { self.validity };
        array_from_buffers(
            &self.field,
            self.width,
            self.len,
            Buffer::from_vec(validity),
            Buffer::from_vec(self.offsets),
            Buffer::from_vec(self.values),
        )
    }

    /// Builds an Arrow array (copying the buffers once).
    pub fn finish(&mut self) -> Result<ArrayRef> {
        let empty = ColumnBuilder::new(self.field.clone(), self.width);
        std::mem::replace(self, empty).into_array()
    }
}

/// Builds a validated Arrow array of `len` rows from its buffers (empty
/// validity means no nulls). Misaligned buffers are copied into aligned
/// ones; anything inconsistent is an error, never a panic.
pub fn array_from_buffers(
    field: &Field,
    width: Width,
    len: usize,
    validity: Buffer,
    offsets: Buffer,
    values: Buffer,
) -> Result<ArrayRef> {
    let mut b = ArrayDataBuilder::new(field.data_type().clone()).len(len);
    if !validity.is_empty() {
        b = b.null_bit_buffer(Some(validity));
    }
    b = match width {
        Width::Var32 | Width::Var64 => b.add_buffer(offsets).add_buffer(values),
        _ => b.add_buffer(values),
    };
    // `build` validates fully (offsets, UTF-8, nulls); a table column has
    // no child arrays, so there is nothing further to check.
    let data = b
        .align_buffers(true)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("column {}: {e}", field.name())))?;
    Ok(make_array(data))
}

/// Decodes row bytes, appending each stored column's value to `builders`
/// (indexed by schema position; key-sourced builders are left alone).
/// `None` row bytes (a deleted row) append nulls.
pub fn decode_row(layout: &TableLayout, row: Option<&[u8]>, builders: &mut [ColumnBuilder]) -> Result<()> {
    let Some(row) = row else {
        for &i in &layout.stored {
            builders[i].push_null();
        }
        return Ok(());
    };
    row_fields(layout, row, |i, value| match value {
        None => builders[i].push_null(),
        Some(v) => builders[i].push(v),
    })
}

/// Splits row bytes into each stored column's value, in row order:
/// `f(schema index, value)`, `None` for a null. Every byte is checked.
pub fn row_fields<'r>(
    layout: &TableLayout,
    row: &'r [u8],
    mut f: impl FnMut(usize, Option<&'r [u8]>),
) -> Result<()> {
    let bad = |what: &str| Error::corruption("", 0, format!("row bytes: {what}"));
    let stored = &layout.stored;
    let mut pos = 0usize;
    let bitmap = if layout.nullable_stored {
        let n = stored.len().div_ceil(8);
        let b = row.get(..n).ok_or_else(|| bad("short null bitmap"))?;
        pos = n;
        Some(b)
    } else {
        None
    };
    for (n, &i) in stored.iter().enumerate() {
        if bitmap.is_some_and(|b| b[n / 8] & (1 << (n % 8)) != 0) {
            if !layout.columns[i].field.is_nullable() {
                return Err(bad("null in a non-nullable column"));
            }
            f(i, None);
            continue;
        }
        let last = n + 1 == stored.len();
        let value = match layout.columns[i].width {
            Width::Fixed(w) => row.get(pos..pos + w).ok_or_else(|| bad("short fixed-width value"))?,
            Width::Bool => row.get(pos..=pos).ok_or_else(|| bad("missing bool"))?,
            Width::Var32 | Width::Var64 if last => &row[pos..],
            Width::Var32 | Width::Var64 => {
                let mut r = varint::Reader::new(&row[pos..], std::path::Path::new(""), 0);
                let v = r.len_bytes().map_err(|_| bad("bad length"))?;
                pos += r.position() - v.len();
                v
            }
        };
        pos += value.len();
        f(i, Some(value));
    }
    if pos != row.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(())
}

/// Empty builders for every column of a layout.
pub fn builders_for(layout: &TableLayout) -> Vec<ColumnBuilder> {
    layout.columns.iter().map(|c| ColumnBuilder::new(c.field.clone(), c.width)).collect()
}
