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

use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

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
    pub(super) primary_key: Vec<usize>,
    pub(super) columns: Vec<ColumnLayout>,
    /// Schema indices of the stored columns, in row order.
    pub(super) stored: Vec<usize>,
    pub(super) nullable_stored: bool,
    /// Which schema of the table this is (`evolve.rs`): 0 at creation, one
    /// more with each change of its columns.
    pub(super) version: u32,
    /// Each column's id, stable across versions: its position at creation,
    /// the next unused id for a column added later. Files written under
    /// another version are read by matching ids.
    pub(super) column_ids: Vec<u32>,
    /// Per column, the value rows written before it was added read as
    /// (`None`: null).
    pub(super) defaults: Vec<Option<arrow_array::ArrayRef>>,
    /// The table's earlier versions, oldest first, each with how its
    /// columns become this version's (empty for the versions kept there).
    pub(super) older: Arc<Vec<super::evolve::OlderVersion>>,
    /// The id a column added next takes: above every id of every version
    /// (kept here so that a change need not look through them all).
    pub(super) column_id_next: u32,
}

/// Most columns a table may have. SST readers bound what a damaged block
/// directory or zone map can make them allocate by it (`sst/block.rs`,
/// `row/zone.rs`), so `create_table` refuses wider schemas rather than
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
        let n = columns.len();
        Ok(TableLayout {
            schema,
            primary_key: primary_key.to_vec(),
            columns,
            stored,
            nullable_stored,
            version: 0,
            column_ids: (0..n as u32).collect(),
            defaults: vec![None; n],
            older: Arc::default(),
            column_id_next: n as u32,
        })
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

    /// Where column `c` (a schema index) lies among the stored columns,
    /// `None` for a column kept only in the key (or past the schema).
    pub fn stored_position(&self, c: usize) -> Option<usize> {
        if self.columns.get(c)?.source == ColumnSource::Key {
            return None;
        }
        // `stored` is every column but a raw key's, in schema order.
        let key = self.primary_key[0];
        Some(c - usize::from(key < c && self.columns[key].source == ColumnSource::Key))
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
pub(super) fn same_type(a: &DataType, b: &DataType) -> bool {
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

/// The key type of a column type that has a key encoding.
pub fn key_type_of(data_type: &DataType) -> Option<crate::codec::key::KeyType> {
    use crate::codec::key::KeyType;
    Some(match data_type {
        DataType::Boolean => KeyType::Bool,
        DataType::Int8 => KeyType::I8,
        DataType::Int16 => KeyType::I16,
        DataType::Int32 | DataType::Date32 => KeyType::I32,
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => KeyType::I64,
        DataType::UInt8 => KeyType::U8,
        DataType::UInt16 => KeyType::U16,
        DataType::UInt32 => KeyType::U32,
        DataType::UInt64 => KeyType::U64,
        DataType::Float32 => KeyType::F32,
        DataType::Float64 => KeyType::F64,
        DataType::Utf8 | DataType::LargeUtf8 => KeyType::Str,
        DataType::Binary | DataType::LargeBinary => KeyType::Bytes,
        _ => return None,
    })
}

/// Whether a key value's variant is the key encoding of `data_type`.
pub fn key_value_fits(v: &crate::codec::key::KeyValue<'_>, data_type: &DataType) -> bool {
    key_type_of(data_type) == Some(v.key_type())
}

#[cfg(test)]
mod tests;
