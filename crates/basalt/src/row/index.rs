//! Secondary-index entries: how a table row becomes the key and value of
//! its entry in an index tree, and how entries become Arrow columns again
//! (byte layout in `docs/format.md`).
//!
//! ```text
//! key   := part{for each indexed column} | the table's user key (its primary key)
//! part  := enc(value)                  (non-nullable column, codec/key.rs)
//!        | 00 | 01 enc(value)         (nullable column: nulls sort first)
//! value := (00 | 01 value){for each included column}
//! value := the row encoding of one value: fixed-width little-endian bytes,
//!          a bool byte, or varint length + bytes
//! ```
//!
//! The key's parts are memcomparable, so the entries of one indexed value
//! are a contiguous range ordered by primary key, and a prefix of the
//! indexed columns is a prefix of the key. The primary key comes last and
//! needs no framing: it is what is left after the parts. Included values
//! keep their exact bytes (a float's `-0.0` and NaN payload), which the
//! key encoding canonicalises.

use std::sync::Arc;

use arrow_schema::DataType;

use super::decode::ColumnBuilder;
use super::encode::key_value_of;
use super::layout::{ColumnSource, TableLayout, Width, key_type_of};
use crate::codec::key::{self, KeyReader, KeyType, KeyValue, OwnedKeyValue};
use crate::codec::varint;
use crate::error::{Error, Result};

/// How one index of a table lays out its entries.
#[derive(Debug)]
pub struct IndexLayout {
    table: Arc<TableLayout>,
    /// Indexed columns (schema indices), in key order.
    columns: Vec<usize>,
    /// Included columns (schema indices), in value order.
    include: Vec<usize>,
    /// The key type and nullability of each indexed column.
    parts: Vec<(KeyType, bool)>,
}

/// The row-format values of one row, by schema index (`None`: null).
pub struct RowValues<'r> {
    values: Vec<Option<&'r [u8]>>,
}

impl<'r> RowValues<'r> {
    /// Splits row bytes (and the user key, for a column kept only there)
    /// into each column's value.
    pub fn parse(layout: &TableLayout, user_key: &'r [u8], row: &'r [u8]) -> Result<RowValues<'r>> {
        let mut values = vec![None; layout.columns().len()];
        super::decode::row_fields(layout, row, |i, v| values[i] = v)?;
        for c in layout.columns() {
            if c.source == ColumnSource::Key {
                values[c.index] = Some(user_key);
            }
        }
        Ok(RowValues { values })
    }

    /// The values of one row of a batch, read from its arrays by `encoder`
    /// (no row bytes on the way): what [`RowValues::parse`] gives for the
    /// row's encoding.
    pub fn of_batch_row(encoder: &super::encode::RowEncoder<'r>, row: usize) -> RowValues<'r> {
        RowValues { values: encoder.values(row) }
    }
}

/// Where the parts of an entry written by [`IndexLayout::entry_into`] end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryShape {
    /// Bytes of the key; the value follows.
    pub key_len: usize,
    /// Bytes of the key before the primary key.
    pub prefix_len: usize,
    /// Some indexed value is null.
    pub has_null: bool,
    /// Bytes of the value.
    pub value_len: usize,
}

/// One index entry of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The entry's key.
    pub key: Vec<u8>,
    /// Bytes of the key before the primary key: the indexed values.
    pub prefix_len: usize,
    /// Some indexed value is null (a unique index admits any number of
    /// such rows, as SQL's do).
    pub has_null: bool,
    /// The included values.
    pub value: Vec<u8>,
}

impl IndexLayout {
    /// Checks an index's columns against its table and derives its layout.
    /// `columns` must be non-empty, distinct and of key-encodable types;
    /// `include` distinct and outside `columns` and the primary key.
    pub fn new(table: Arc<TableLayout>, columns: &[usize], include: &[usize]) -> Result<IndexLayout> {
        let schema = table.schema().clone();
        if columns.is_empty() {
            return Err(Error::InvalidArgument("an index needs at least one column".into()));
        }
        let mut parts = Vec::with_capacity(columns.len());
        for (n, &i) in columns.iter().enumerate() {
            let f = schema.fields().get(i).ok_or_else(|| Error::InvalidArgument(format!("no column {i}")))?;
            if columns[..n].contains(&i) {
                return Err(Error::InvalidArgument(format!("index column {} listed twice", f.name())));
            }
            let ty = key_type_of(f.data_type()).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "column {} has type {}, which an index cannot order",
                    f.name(),
                    f.data_type()
                ))
            })?;
            parts.push((ty, f.is_nullable()));
        }
        for (n, &i) in include.iter().enumerate() {
            let f = schema.fields().get(i).ok_or_else(|| Error::InvalidArgument(format!("no column {i}")))?;
            if include[..n].contains(&i) || columns.contains(&i) || table.primary_key().contains(&i) {
                return Err(Error::InvalidArgument(format!(
                    "included column {} is listed twice, or is an indexed or primary-key column \
                     (which every entry holds already)",
                    f.name()
                )));
            }
        }
        Ok(IndexLayout { table, columns: columns.to_vec(), include: include.to_vec(), parts })
    }

    /// The table's layout.
    pub fn table(&self) -> &Arc<TableLayout> {
        &self.table
    }

    /// Indexed columns (schema indices).
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// Included columns (schema indices).
    pub fn include(&self) -> &[usize] {
        &self.include
    }

    /// The entry of a row.
    pub fn entry(&self, user_key: &[u8], row: &RowValues<'_>) -> IndexEntry {
        let mut out = Vec::with_capacity(user_key.len() + 16);
        let shape = self.entry_into(user_key, row, &mut out);
        let value = out.split_off(shape.key_len);
        IndexEntry { key: out, prefix_len: shape.prefix_len, has_null: shape.has_null, value }
    }

    /// Appends the entry of a row to `out`, its key and then its value
    /// (an index build sorts many entries kept in one buffer).
    pub fn entry_into(&self, user_key: &[u8], row: &RowValues<'_>, out: &mut Vec<u8>) -> EntryShape {
        let start = out.len();
        let mut has_null = false;
        for (&i, &(_, nullable)) in self.columns.iter().zip(&self.parts) {
            let v = row.values[i];
            has_null |= v.is_none();
            let data_type = self.table.schema().field(i).data_type();
            match (nullable, v) {
                (false, Some(b)) => key::put_value(out, &key_value_of(data_type, b)),
                (true, v) => key::put_nullable(out, v.map(|b| key_value_of(data_type, b)).as_ref()),
                // A non-nullable column holds no null (the write was checked).
                (false, None) => out.push(key::NULL_MARKER),
            }
        }
        let prefix_len = out.len() - start;
        out.extend_from_slice(user_key);
        let key_len = out.len() - start;
        for &i in &self.include {
            match row.values[i] {
                None => out.push(key::NULL_MARKER),
                Some(b) => {
                    out.push(key::PRESENT_MARKER);
                    match self.table.columns()[i].width {
                        Width::Var32 | Width::Var64 => varint::put_bytes(out, b),
                        Width::Fixed(_) | Width::Bool => out.extend_from_slice(b),
                    }
                }
            }
        }
        EntryShape { key_len, prefix_len, has_null, value_len: out.len() - start - key_len }
    }

    /// Encodes leading indexed values (a prefix of the columns) as a key
    /// prefix, each checked against its column: a value of another type
    /// would select a silently wrong range. `None` is a null, allowed only
    /// in a nullable column.
    pub fn encode_values(&self, values: &[Option<KeyValue<'_>>]) -> Result<Vec<u8>> {
        if values.len() > self.columns.len() {
            return Err(Error::InvalidArgument(format!(
                "the index has {} columns, {} values given",
                self.columns.len(),
                values.len()
            )));
        }
        let mut out = Vec::new();
        for ((v, &i), &(_, nullable)) in values.iter().zip(&self.columns).zip(&self.parts) {
            let field = self.table.schema().field(i);
            match v {
                Some(v) if !super::layout::key_value_fits(v, field.data_type()) => {
                    return Err(Error::SchemaMismatch(format!(
                        "index column {} has type {}, got {v:?}",
                        field.name(),
                        field.data_type()
                    )));
                }
                None if !nullable => {
                    return Err(Error::InvalidArgument(format!(
                        "index column {} is not nullable; a null never matches",
                        field.name()
                    )));
                }
                _ => {}
            }
            if nullable {
                key::put_nullable(&mut out, v.as_ref());
            } else if let Some(v) = v {
                key::put_value(&mut out, v);
            }
        }
        Ok(out)
    }

    /// Splits an entry's key into its indexed parts and the table's user
    /// key, checking every byte; damage is `Error::Corruption` with the
    /// offset within the key.
    pub fn split_key<'k>(&self, index_key: &'k [u8]) -> Result<(Vec<Option<OwnedKeyValue>>, &'k [u8])> {
        let mut r = KeyReader::new(index_key);
        let mut parts = Vec::with_capacity(self.parts.len());
        for &(ty, nullable) in &self.parts {
            parts.push(if nullable { r.read_nullable(ty)? } else { Some(r.read(ty)?) });
        }
        Ok((parts, r.rest()))
    }

    /// Calls `f` with the end of each leading run of indexed values in an
    /// entry's key — after the first part, the first two, …, all of them:
    /// the prefixes an equality or a prefix lookup seeks, which an SST's
    /// filter holds (`sst/writer.rs`). Nothing is allocated.
    pub fn prefix_ends(&self, index_key: &[u8], mut f: impl FnMut(usize)) -> Result<()> {
        let mut r = KeyReader::new(index_key);
        for &(ty, nullable) in &self.parts {
            if nullable {
                r.skip_nullable(ty)?;
            } else {
                r.skip(ty)?;
            }
            f(r.position());
        }
        Ok(())
    }

    /// The table's user key in an entry's key.
    pub fn user_key<'k>(&self, index_key: &'k [u8]) -> Result<&'k [u8]> {
        Ok(self.split_key(index_key)?.1)
    }

    /// The indexed values of an entry's key as text, for errors.
    pub fn describe_prefix(&self, index_key: &[u8]) -> String {
        match self.split_key(index_key) {
            Ok((parts, _)) => {
                let shown: Vec<String> = parts
                    .iter()
                    .map(|p| p.as_ref().map_or_else(|| "null".to_string(), |v| format!("{:?}", v.as_value())))
                    .collect();
                format!("({})", shown.join(", "))
            }
            Err(e) => format!("an undecodable key ({})", e.reason()),
        }
    }

    /// Whether `column` can be answered from the entries alone, exactly:
    /// included columns always; indexed and primary-key columns unless
    /// they are floats (the key keeps a float's canonical form, not its
    /// `-0.0` or NaN payload).
    pub fn covers(&self, column: usize) -> bool {
        let exact_in_key =
            !matches!(self.table.schema().field(column).data_type(), DataType::Float32 | DataType::Float64);
        self.include.contains(&column)
            || (exact_in_key
                && (self.columns.contains(&column) || self.table.primary_key().contains(&column)))
    }

    /// Appends the values of one entry to `builders` (one per schema
    /// column; columns the entry does not cover are left alone).
    pub fn decode_entry(&self, index_key: &[u8], value: &[u8], builders: &mut [ColumnBuilder]) -> Result<()> {
        self.entry_values(index_key, value, |i, v| match v {
            None => builders[i].push_null(),
            Some(v) => builders[i].push(v),
        })
    }

    /// Calls `f(schema index, value)` with each value one entry holds, in
    /// the row encoding (`None`: null): the indexed columns, the primary
    /// key's and the included ones, each column once. Every byte is
    /// checked.
    pub fn entry_values(
        &self,
        index_key: &[u8],
        value: &[u8],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let (parts, user_key) = self.split_key(index_key)?;
        for (&i, part) in self.columns.iter().zip(&parts) {
            match part {
                None => f(i, None),
                Some(v) => with_row_bytes(v, |b| f(i, Some(b))),
            }
        }
        let table = &self.table;
        let pk = table.primary_key();
        if table.raw_key() {
            if !self.columns.contains(&pk[0]) {
                f(pk[0], Some(user_key));
            }
        } else {
            let mut r = KeyReader::new(user_key);
            for &i in pk {
                let ty = key_type_of(table.schema().field(i).data_type())
                    .ok_or_else(|| Error::corruption("", 0, "primary key column without a key type"))?;
                let v = r.read(ty)?;
                if !self.columns.contains(&i) {
                    with_row_bytes(&v, |b| f(i, Some(b)));
                }
            }
            r.finish()?;
        }
        let bad = |what: &str| Error::corruption("", 0, format!("index entry value: {what}"));
        let mut pos = 0usize;
        for &i in &self.include {
            let marker = *value.get(pos).ok_or_else(|| bad("short"))?;
            pos += 1;
            match marker {
                key::NULL_MARKER => f(i, None),
                key::PRESENT_MARKER => {
                    let v = match table.columns()[i].width {
                        Width::Fixed(w) => value.get(pos..pos + w).ok_or_else(|| bad("short value"))?,
                        Width::Bool => value.get(pos..=pos).ok_or_else(|| bad("short value"))?,
                        Width::Var32 | Width::Var64 => {
                            let mut r = varint::Reader::new(&value[pos..], std::path::Path::new(""), 0);
                            let v = r.len_bytes().map_err(|_| bad("bad length"))?;
                            pos += r.position() - v.len();
                            v
                        }
                    };
                    pos += v.len();
                    f(i, Some(v));
                }
                b => return Err(bad(&format!("bad null marker {b:02x}"))),
            }
        }
        if pos != value.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(())
    }
}

/// `f` of a decoded key part as row bytes.
pub(crate) fn with_row_bytes(v: &OwnedKeyValue, f: impl FnOnce(&[u8])) {
    match v {
        OwnedKeyValue::Bool(b) => f(&[u8::from(*b)]),
        OwnedKeyValue::I8(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::I16(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::I32(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::I64(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::U8(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::U16(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::U32(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::U64(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::F32(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::F64(x) => f(&x.to_le_bytes()),
        OwnedKeyValue::Bytes(b) => f(b),
        OwnedKeyValue::Str(s) => f(s.as_bytes()),
    }
}
