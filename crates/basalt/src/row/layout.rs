//! How a table's rows are laid out: which Arrow types are supported, how the
//! primary key is encoded into the tree's user key, how the other columns
//! are packed into the memtable's row bytes, and how rows become Arrow
//! columns again (in SST blocks and in query results).
//!
//! Row bytes (byte layout in `docs/format.md`):
//!
//! ```text
//! row := [null bitmap: ceil(stored / 8) bytes, bit i set = stored column i is null]
//!        value{for each stored, non-null column}
//! value := fixed width little-endian bytes (bool: one byte 0/1)
//!        | varint length + bytes      (Utf8, Binary and their Large forms)
//!        | bytes to the end of the row (the last stored column, when it is
//!                                       variable width)
//! ```
//!
//! The bitmap is present only when some stored column is nullable. A table
//! whose key is one `Binary` or `Utf8` column keeps that column only in the
//! key (its bytes already sort in key order); every other key column is also
//! stored in the row, so scans can hand it out as an Arrow column.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, make_array};
use arrow_buffer::{Buffer, NullBuffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::codec::key::{self, KeyValue};
use crate::codec::varint;
use crate::error::{Error, Result};

/// Where a column's values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSource {
    /// The column is the tree's user key itself (a single `Binary` or
    /// `Utf8` primary key).
    Key,
    /// The column is stored in the row bytes and in SST column buffers.
    Stored,
}

/// The physical shape of a column's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Fixed-width values of this many bytes.
    Fixed(usize),
    /// Booleans: one byte in rows, one bit in Arrow.
    Bool,
    /// Variable width with i32 offsets (`Utf8`, `Binary`).
    Var32,
    /// Variable width with i64 offsets (`LargeUtf8`, `LargeBinary`).
    Var64,
}

/// One column of a table.
#[derive(Debug, Clone)]
pub struct ColumnLayout {
    /// Position in the schema.
    pub index: usize,
    /// The Arrow field.
    pub field: Arc<Field>,
    /// Physical width.
    pub width: Width,
    /// Key or row.
    pub source: ColumnSource,
}

/// The layout of a table: schema, primary key and the stored columns.
#[derive(Debug, Clone)]
pub struct TableLayout {
    schema: SchemaRef,
    primary_key: Vec<usize>,
    columns: Vec<ColumnLayout>,
    /// Schema indices of the stored columns, in row order.
    stored: Vec<usize>,
    nullable_stored: bool,
}

/// Most columns a table may have. SST readers bound what a damaged block
/// directory or zone map can make them allocate by it (`sst/block.rs`,
/// `table/zone.rs`), so `create_table` refuses wider schemas rather than
/// write files it could not read back.
pub const COLUMNS_MAX: usize = 1000;

/// The physical width of a supported type, or `None`.
pub fn width_of(data_type: &DataType) -> Option<Width> {
    Some(match data_type {
        DataType::Boolean => Width::Bool,
        DataType::Int8 | DataType::UInt8 => Width::Fixed(1),
        DataType::Int16 | DataType::UInt16 => Width::Fixed(2),
        DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Date32 => Width::Fixed(4),
        DataType::Int64
        | DataType::UInt64
        | DataType::Float64
        | DataType::Date64
        | DataType::Timestamp(_, _) => Width::Fixed(8),
        DataType::Decimal128(_, _) => Width::Fixed(16),
        DataType::Utf8 | DataType::Binary => Width::Var32,
        DataType::LargeUtf8 | DataType::LargeBinary => Width::Var64,
        _ => return None,
    })
}

/// Whether a type may be part of a primary key (it has a key encoding).
fn key_type_supported(data_type: &DataType) -> bool {
    !matches!(data_type, DataType::Decimal128(_, _)) && width_of(data_type).is_some()
}

impl TableLayout {
    /// Checks a schema and primary key and derives the layout.
    pub fn new(schema: SchemaRef, primary_key: &[usize]) -> Result<TableLayout> {
        if primary_key.is_empty() {
            return Err(Error::InvalidArgument("a table needs at least one primary key column".into()));
        }
        if schema.fields().len() > COLUMNS_MAX {
            return Err(Error::InvalidArgument(format!(
                "a table has at most {COLUMNS_MAX} columns, the schema has {}",
                schema.fields().len()
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for f in schema.fields() {
            if !seen.insert(f.name().as_str()) {
                return Err(Error::InvalidArgument(format!("column {} appears twice", f.name())));
            }
            if width_of(f.data_type()).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "column {} has unsupported type {}",
                    f.name(),
                    f.data_type()
                )));
            }
        }
        for (n, &i) in primary_key.iter().enumerate() {
            let f = schema.fields().get(i).ok_or_else(|| Error::InvalidArgument(format!("no column {i}")))?;
            if primary_key[..n].contains(&i) {
                return Err(Error::InvalidArgument(format!("key column {} listed twice", f.name())));
            }
            if !key_type_supported(f.data_type()) {
                return Err(Error::InvalidArgument(format!(
                    "key column {} has type {}, which cannot be a primary key",
                    f.name(),
                    f.data_type()
                )));
            }
        }
        let raw_key = primary_key.len() == 1
            && matches!(schema.field(primary_key[0]).data_type(), DataType::Binary | DataType::Utf8);
        let mut columns = Vec::new();
        let mut stored = Vec::new();
        for (i, f) in schema.fields().iter().enumerate() {
            let source =
                if raw_key && primary_key[0] == i { ColumnSource::Key } else { ColumnSource::Stored };
            if source == ColumnSource::Stored {
                stored.push(i);
            }
            let width =
                width_of(f.data_type()).ok_or_else(|| Error::InvalidArgument("unsupported type".into()))?;
            columns.push(ColumnLayout { index: i, field: f.clone(), width, source });
        }
        let nullable_stored = stored.iter().any(|&i| schema.field(i).is_nullable());
        Ok(TableLayout { schema, primary_key: primary_key.to_vec(), columns, stored, nullable_stored })
    }

    /// The layout of the key-value store: `{key: Binary (PK), value: Binary}`,
    /// whose rows are the raw value bytes.
    pub fn key_value() -> TableLayout {
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Binary, false),
            Field::new("value", DataType::Binary, false),
        ]));
        match TableLayout::new(schema, &[0]) {
            Ok(l) => l,
            Err(_) => unreachable!("the key-value schema is valid"),
        }
    }

    /// The table's schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Schema indices of the primary key columns.
    pub fn primary_key(&self) -> &[usize] {
        &self.primary_key
    }

    /// Every column.
    pub fn columns(&self) -> &[ColumnLayout] {
        &self.columns
    }

    /// Schema indices of the stored columns, in row order.
    pub fn stored(&self) -> &[usize] {
        &self.stored
    }

    /// True when the user key is the raw bytes of the single key column.
    pub fn raw_key(&self) -> bool {
        self.columns.iter().any(|c| c.source == ColumnSource::Key)
    }

    /// Checks that `batch` has this table's columns (names and types, in
    /// order) and no nulls where the schema forbids them.
    pub fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        check_columns(self.schema.fields(), batch)
    }

    /// Checks that `keys` holds exactly the key columns, without nulls (key
    /// columns are never nullable, so a null is a schema mismatch).
    pub fn check_key_batch(&self, keys: &RecordBatch) -> Result<()> {
        let fields: Vec<Arc<Field>> =
            self.primary_key.iter().map(|&i| self.schema.fields()[i].clone()).collect();
        check_columns(&fields, keys)
    }
}

/// Type equality as the table sees it: an empty time zone is no time zone
/// (Arrow IPC reads `""` back as none, so a table created with one keeps
/// none, and must still take batches that carry it).
fn same_type(a: &DataType, b: &DataType) -> bool {
    let norm = |t: &DataType| match t {
        DataType::Timestamp(u, Some(tz)) if tz.is_empty() => DataType::Timestamp(*u, None),
        other => other.clone(),
    };
    norm(a) == norm(b)
}

fn check_columns(fields: &[Arc<Field>], batch: &RecordBatch) -> Result<()> {
    let got = batch.schema();
    if got.fields().len() != fields.len() {
        let names: Vec<_> = got.fields().iter().map(|f| f.name().clone()).collect();
        let want: Vec<_> = fields.iter().map(|f| f.name().clone()).collect();
        return Err(Error::SchemaMismatch(format!("batch has columns {names:?}, the table {want:?}")));
    }
    for ((f, g), col) in fields.iter().zip(got.fields().iter()).zip(batch.columns()) {
        if f.name() != g.name() {
            return Err(Error::SchemaMismatch(format!("expected column {}, found {}", f.name(), g.name())));
        }
        if !same_type(f.data_type(), g.data_type()) {
            return Err(Error::SchemaMismatch(format!(
                "column {} has type {}, the table {}",
                f.name(),
                g.data_type(),
                f.data_type()
            )));
        }
        if !f.is_nullable() && col.null_count() > 0 {
            return Err(Error::SchemaMismatch(format!(
                "column {} is not nullable but holds nulls",
                f.name()
            )));
        }
    }
    Ok(())
}

/// Borrowed access to one column of a batch, prepared once per batch.
enum ColumnValues<'a> {
    Fixed { bytes: &'a [u8], width: usize },
    Bool(&'a arrow_array::BooleanArray),
    Var32 { offsets: &'a [i32], data: &'a [u8] },
    Var64 { offsets: &'a [i64], data: &'a [u8] },
}

struct ColumnReader<'a> {
    values: ColumnValues<'a>,
    nulls: Option<&'a NullBuffer>,
}

impl<'a> ColumnReader<'a> {
    fn new(array: &'a ArrayRef, width: Width) -> Result<ColumnReader<'a>> {
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
    fn bytes<'s>(&'s self, row: usize, scratch: &'s mut [u8; 1]) -> &'s [u8] {
        match &self.values {
            ColumnValues::Fixed { bytes, width } => &bytes[row * width..(row + 1) * width],
            ColumnValues::Bool(a) => {
                scratch[0] = u8::from(a.value(row));
                &scratch[..]
            }
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
        let mut scratch = [0u8; 1];
        if self.layout.raw_key() {
            out.extend_from_slice(self.columns[self.layout.primary_key[0]].bytes(row, &mut scratch));
            return;
        }
        for &i in &self.layout.primary_key {
            let c = &self.columns[i];
            let bytes = c.bytes(row, &mut scratch);
            let field = &self.layout.columns[i].field;
            key::put_value(out, &key_value(field.data_type(), bytes));
        }
    }

    /// Appends the row bytes of `row` to `out`.
    pub fn row(&self, row: usize, out: &mut Vec<u8>) {
        let mut scratch = [0u8; 1];
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
            let bytes = c.bytes(row, &mut scratch);
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
        let mut scratch = [0u8; 1];
        if self.layout.raw_key() {
            out.extend_from_slice(self.columns[0].bytes(row, &mut scratch));
            return;
        }
        for (n, &i) in self.layout.primary_key.iter().enumerate() {
            let bytes = self.columns[n].bytes(row, &mut scratch);
            key::put_value(out, &key_value(self.layout.columns[i].field.data_type(), bytes));
        }
    }
}

/// Appends the key-codec encoding of a value given as row bytes.
pub fn key_bytes_of(data_type: &DataType, bytes: &[u8], out: &mut Vec<u8>) {
    key::put_value(out, &key_value(data_type, bytes));
}

/// Appends the row bytes of element `i` of `array` (non-null).
pub fn value_bytes(array: &ArrayRef, width: Width, i: usize, out: &mut Vec<u8>) -> Result<()> {
    let reader = ColumnReader::new(array, width)?;
    let mut scratch = [0u8; 1];
    out.extend_from_slice(reader.bytes(i, &mut scratch));
    Ok(())
}

/// The key codec value for a key column's little-endian (or raw) bytes.
fn key_value<'b>(data_type: &DataType, b: &'b [u8]) -> KeyValue<'b> {
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

fn set_bit(bits: &mut Vec<u8>, i: usize, on: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if on {
        bits[i / 8] |= 1 << (i % 8);
    }
}

impl ColumnBuilder {
    /// An empty builder for a column.
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
        let mut scratch = [0u8; 1];
        self.push(reader.bytes(i, &mut scratch));
        Ok(())
    }

    /// The row bytes of row `i`, or `None` if it is null.
    pub fn value_at<'s>(&'s self, i: usize, scratch: &'s mut [u8; 1]) -> Option<&'s [u8]> {
        if self.validity.get(i / 8).is_none_or(|b| b & (1 << (i % 8)) == 0) {
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
            Width::Bool => {
                scratch[0] = (self.values[i / 8] >> (i % 8)) & 1;
                &scratch[..]
            }
            Width::Var32 => &self.values[off(i, false)..off(i + 1, false)],
            Width::Var64 => &self.values[off(i, true)..off(i + 1, true)],
        })
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

    /// Builds an Arrow array (copying the buffers once).
    pub fn finish(&mut self) -> Result<ArrayRef> {
        let len = self.len;
        let [validity, offsets, values] = self.take_buffers();
        let field = self.field.clone();
        array_from_buffers(
            &field,
            self.width,
            len,
            Buffer::from_vec(validity),
            Buffer::from_vec(offsets),
            Buffer::from_vec(values),
        )
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
    let data = b
        .align_buffers(true)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("column {}: {e}", field.name())))?;
    data.validate_full().map_err(|e| Error::InvalidArgument(format!("column {}: {e}", field.name())))?;
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
            builders[i].push_null();
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
        builders[i].push(value);
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

#[cfg(test)]
mod tests {
    use arrow_array::{BinaryArray, Int64Array, StringArray};

    use super::*;

    fn users() -> (TableLayout, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("blob", DataType::Binary, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![-5, 7])),
                Arc::new(StringArray::from(vec![Some("ann"), None])),
                Arc::new(BinaryArray::from(vec![&b"x"[..], &b""[..]])),
            ],
        )
        .expect("batch");
        (TableLayout::new(schema, &[0]).expect("layout"), batch)
    }

    #[test]
    fn rows_round_trip_through_row_bytes() {
        let (layout, batch) = users();
        layout.check_batch(&batch).expect("matches");
        let enc = RowEncoder::new(&layout, &batch).expect("encoder");
        let mut builders = builders_for(&layout);
        let mut keys = Vec::new();
        for r in 0..2 {
            let (mut k, mut row) = (Vec::new(), Vec::new());
            enc.key(r, &mut k);
            enc.row(r, &mut row);
            keys.push(k);
            decode_row(&layout, Some(&row), &mut builders).expect("decodes");
        }
        assert!(keys[0] < keys[1], "-5 sorts before 7 in key bytes");
        let arrays: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish().expect("array")).collect();
        let back = RecordBatch::try_new(layout.schema().clone(), arrays).expect("batch");
        assert_eq!(back, batch);
    }

    #[test]
    fn key_value_layout_stores_raw_values() {
        let layout = TableLayout::key_value();
        assert!(layout.raw_key());
        assert_eq!(layout.stored(), &[1]);
        let mut b = builders_for(&layout);
        decode_row(&layout, Some(b"raw value"), &mut b).expect("raw");
        assert_eq!(b[1].len(), 1);
    }

    #[test]
    fn bad_schemas_and_batches_are_refused() {
        let (layout, batch) = users();
        let schema = layout.schema().clone();
        assert!(TableLayout::new(schema.clone(), &[]).is_err());
        assert!(TableLayout::new(schema.clone(), &[0, 0]).is_err());
        assert!(TableLayout::new(schema.clone(), &[9]).is_err());
        let renamed = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("nom", DataType::Utf8, true),
                Field::new("blob", DataType::Binary, false),
            ])),
            batch.columns().to_vec(),
        )
        .expect("batch");
        assert!(matches!(layout.check_batch(&renamed), Err(Error::SchemaMismatch(m)) if m.contains("name")));
    }

    #[test]
    fn damaged_row_bytes_are_errors() {
        let (layout, _) = users();
        let mut b = builders_for(&layout);
        // Row bytes live inside checksummed WAL records and blocks; these are
        // structurally impossible.
        for bad in [&b""[..], &[0u8, 1, 2][..], &[0b001u8, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]] {
            assert!(decode_row(&layout, Some(bad), &mut b).is_err());
        }
    }
}
