//! Row views: a table's row read where it lies — a memtable entry, the row
//! cache's bytes, or a row of a cached block's column buffers — with typed
//! values by column and no Arrow array built. A caller who wants one row
//! (`Table::get_with`) or a few (`Table::lookup_with`) pays for the values
//! it reads, as SQLite's `sqlite3_column_*` and LMDB's borrowed values do;
//! the Arrow machinery of a one-row batch cost more than the lookup under
//! it (docs/BENCHMARKS-history.md, issue 58).

use std::sync::Arc;

use arrow_schema::SchemaRef;

use super::point::Value;
use crate::error::{Error, Result};
use crate::row::cell::{Cell, RawCell, Span, row_spans, typed};
use crate::row::layout::TableLayout;
use crate::sst::block::Block;

/// One row of a table, borrowed where it lies for as long as the call that
/// hands it out: typed values by column (schema position), nulls as
/// `None`/[`Cell::Null`]. Keep a row past the call with [`RowRef::to_row`].
///
/// Values are read and checked when asked for: damage in a value never
/// asked for is not seen, and damage found is `Error::Corruption` naming
/// the file and offset of its block (or the memtable's empty path).
#[derive(Clone, Copy)]
pub struct RowRef<'a> {
    layout: &'a Arc<TableLayout>,
    source: Source<'a>,
}

#[derive(Clone, Copy)]
enum Source<'a> {
    /// Values at spans of bytes: row bytes (and the user key, for a
    /// column kept only there), or an index entry's values copied out.
    Spans { bytes: &'a [u8], key: &'a [u8], spans: &'a [Span] },
    /// Row `row` of a table block (checked against the layout).
    Block { block: &'a Block, row: usize },
}

/// Columns a row view of row bytes keeps its spans for on the stack;
/// wider rows allocate them.
const INLINE_COLUMNS: usize = 32;

impl<'a> RowRef<'a> {
    /// A view of row `row` of `block`, a block of the current schema
    /// version of `layout`'s table.
    pub(crate) fn over_block(
        layout: &'a Arc<TableLayout>,
        block: &'a Block,
        row: usize,
    ) -> Result<RowRef<'a>> {
        block.check_table_row(layout, row).map_err(|e| block.corruption(e))?;
        block.warm_table_row(layout, row);
        Ok(RowRef { layout, source: Source::Block { block, row } })
    }

    /// A view of values at `spans` (one per column) of `bytes`.
    pub(crate) fn over_spans(
        layout: &'a Arc<TableLayout>,
        bytes: &'a [u8],
        key: &'a [u8],
        spans: &'a [Span],
    ) -> RowRef<'a> {
        RowRef { layout, source: Source::Spans { bytes, key, spans } }
    }

    /// `f` of a view of `row`, row bytes of `layout` whose user key is
    /// `key`.
    pub(crate) fn with_row_bytes<R>(
        layout: &Arc<TableLayout>,
        key: &[u8],
        row: &[u8],
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<R> {
        let n = layout.columns().len();
        if n <= INLINE_COLUMNS {
            let mut spans = [Span::Null; INLINE_COLUMNS];
            row_spans(layout, row, &mut spans[..n])?;
            Ok(f(RowRef::over_spans(layout, row, key, &spans[..n])))
        } else {
            let mut spans = vec![Span::Null; n];
            row_spans(layout, row, &mut spans)?;
            Ok(f(RowRef::over_spans(layout, row, key, &spans)))
        }
    }

    /// The table's schema (of the version the row was read through).
    pub fn schema(&self) -> &'a SchemaRef {
        self.layout.schema()
    }

    /// Columns of the row.
    pub fn num_columns(&self) -> usize {
        self.layout.columns().len()
    }

    /// Column `c`'s value, typed by its Arrow type.
    pub fn value(&self, c: usize) -> Result<Cell<'a>> {
        let field = self.layout.schema().fields().get(c).ok_or_else(|| self.no_column(c))?;
        let raw = self.raw(c)?;
        typed(field, raw).map_err(|e| self.damage(&e))
    }

    /// Whether column `c` is null.
    pub fn is_null(&self, c: usize) -> Result<bool> {
        Ok(matches!(self.raw(c)?, RawCell::Null))
    }

    /// Column `c`'s bytes, unchecked and untyped, as the row encoding
    /// holds them.
    fn raw(&self, c: usize) -> Result<RawCell<'a>> {
        match self.source {
            Source::Block { block, row } => {
                let Some(field) = self.layout.schema().fields().get(c) else {
                    return Err(self.no_column(c));
                };
                match block.table_cell(self.layout, c, row).map_err(|e| block.corruption(e))? {
                    // A delete's row carries nulls in every column, but a
                    // view is of a put: row bytes refuse this too.
                    RawCell::Null if !field.is_nullable() => Err(block
                        .corruption(format!("row {row}: a null in non-nullable column {}", field.name()))),
                    raw => Ok(raw),
                }
            }
            Source::Spans { bytes, key, spans } => match spans.get(c).ok_or_else(|| self.no_column(c))? {
                Span::Null => Ok(RawCell::Null),
                Span::At(start, end) => bytes
                    .get(*start as usize..*end as usize)
                    .map(RawCell::Bytes)
                    .ok_or_else(|| Error::internal(format!("column {c}: a span past its row"))),
                Span::Key => Ok(RawCell::Bytes(key)),
                Span::Absent => Err(Error::InvalidArgument(format!(
                    "column {} was not read: the lookup's projection leaves it out",
                    self.layout.schema().field(c).name()
                ))),
            },
        }
    }

    fn no_column(&self, c: usize) -> Error {
        Error::InvalidArgument(format!("no column {c}: the table has {}", self.layout.columns().len()))
    }

    /// A value's damage, under the block it lies in.
    fn damage(&self, e: &Error) -> Error {
        match self.source {
            Source::Block { block, .. } => block.corruption(e.reason()),
            Source::Spans { .. } => Error::corruption("", 0, format!("row bytes: {}", e.reason())),
        }
    }

    fn wrong_type(&self, c: usize, asked: &str) -> Error {
        let field = self.layout.schema().field(c);
        Error::SchemaMismatch(format!(
            "column {} has type {}, read as {asked}",
            field.name(),
            field.data_type()
        ))
    }

    /// An owned copy of the row, with the same accessors
    /// ([`Row::view`]).
    pub fn to_row(&self) -> Result<Row> {
        let mut bytes = Vec::new();
        let mut spans = vec![Span::Absent; self.num_columns()];
        self.copy_into(&mut bytes, &mut spans)?;
        Ok(Row { layout: self.layout.clone(), bytes, spans })
    }

    /// Appends each column's bytes to `bytes` and says where they lie in
    /// `spans` (one per column): a copy of the row that
    /// [`RowRef::over_spans`] reads back. Columns not read stay absent.
    pub(crate) fn copy_into(&self, bytes: &mut Vec<u8>, spans: &mut [Span]) -> Result<()> {
        for (c, span) in spans.iter_mut().enumerate().take(self.num_columns()) {
            let raw = match self.raw(c) {
                Err(Error::InvalidArgument(_)) => {
                    *span = Span::Absent;
                    continue;
                }
                raw => raw?,
            };
            let Some(value) = raw.row_bytes(self.layout.columns()[c].width) else {
                *span = Span::Null;
                continue;
            };
            let start = bytes.len();
            bytes.extend_from_slice(value);
            let at = u32::try_from(start).ok().zip(u32::try_from(bytes.len()).ok());
            let (start, end) = at.ok_or_else(|| Error::InvalidArgument("rows over 4 GiB".into()))?;
            *span = Span::At(start, end);
        }
        Ok(())
    }
}

/// The typed accessors: each takes a column (schema position) and gives
/// `None` for a null, an error for a column of another type.
macro_rules! typed_getters {
    ($($(#[$doc:meta])* $name:ident -> $t:ty: $($variant:ident)|+;)*) => {
        impl<'a> RowRef<'a> {
            $(
                $(#[$doc])*
                pub fn $name(&self, c: usize) -> Result<Option<$t>> {
                    match self.value(c)? {
                        Cell::Null => Ok(None),
                        $(Cell::$variant(v))|+ => Ok(Some(v)),
                        _ => Err(self.wrong_type(c, stringify!($name))),
                    }
                }
            )*
        }
    };
}

typed_getters! {
    /// A `Boolean` column's value.
    bool -> bool: Boolean;
    /// An `Int8` column's value.
    i8 -> i8: Int8;
    /// An `Int16` column's value.
    i16 -> i16: Int16;
    /// An `Int32` or `Date32` column's value.
    i32 -> i32: Int32 | Date32;
    /// An `Int64`, `Date64` or `Timestamp` column's value.
    i64 -> i64: Int64 | Date64 | Timestamp;
    /// A `UInt8` column's value.
    u8 -> u8: UInt8;
    /// A `UInt16` column's value.
    u16 -> u16: UInt16;
    /// A `UInt32` column's value.
    u32 -> u32: UInt32;
    /// A `UInt64` column's value.
    u64 -> u64: UInt64;
    /// A `Float32` column's value.
    f32 -> f32: Float32;
    /// A `Float64` column's value.
    f64 -> f64: Float64;
    /// A `Decimal128` column's unscaled value.
    decimal128 -> i128: Decimal128;
    /// A `Utf8` or `LargeUtf8` column's value, borrowed.
    str -> &'a str: Utf8;
    /// A `Binary` or `LargeBinary` column's value, borrowed.
    bytes -> &'a [u8]: Binary;
}

impl std::fmt::Debug for RowRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut row = f.debug_map();
        for (c, field) in self.schema().fields().iter().enumerate() {
            match self.value(c) {
                Ok(v) => row.entry(field.name(), &v),
                Err(e) => row.entry(field.name(), &e.to_string()),
            };
        }
        row.finish()
    }
}

/// An owned row: what [`RowRef::to_row`] keeps of a view, read through
/// [`Row::view`].
#[derive(Clone)]
pub struct Row {
    layout: Arc<TableLayout>,
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

impl Row {
    /// The row's typed accessors.
    pub fn view(&self) -> RowRef<'_> {
        RowRef::over_spans(&self.layout, &self.bytes, &[], &self.spans)
    }
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

impl Value<'_> {
    /// `f` of a view of this value, a row of the table `layout` describes
    /// (its current version) whose key is `user_key`.
    pub(crate) fn view<R>(
        &self,
        layout: &Arc<TableLayout>,
        user_key: &[u8],
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<R> {
        match self {
            Value::TableRow(block, i) => Ok(f(RowRef::over_block(layout, block, *i)?)),
            Value::Shared(b) => RowRef::with_row_bytes(layout, user_key, b, f),
            Value::Borrowed(b) => RowRef::with_row_bytes(layout, user_key, b, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::RowRef;
    use crate::codec::internal::{Kind, pack_trailer};
    use crate::codec::key::{self, KeyValue};
    use crate::error::Error;
    use crate::row::encode::RowEncoder;
    use crate::row::layout::TableLayout;
    use crate::sst::block::{Block, BlockBuilder};

    fn layout(nullable: bool) -> Arc<TableLayout> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, nullable),
        ]));
        Arc::new(TableLayout::new(schema, &[0]).expect("layout"))
    }

    /// A block row with a null where the layout read through says the
    /// column cannot hold one is damage, as row bytes and Arrow's checks
    /// say; a nullable column's null is a null.
    #[test]
    fn a_null_in_a_non_nullable_column_of_a_block_is_corruption() {
        let nullable = layout(true);
        let columns: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from(vec![1])), Arc::new(Int64Array::from(vec![None::<i64>]))];
        let batch = RecordBatch::try_new(nullable.schema().clone(), columns).expect("batch");
        let mut row = Vec::new();
        RowEncoder::new(&nullable, &batch).expect("encoder").row(0, &mut row);
        let mut builder = BlockBuilder::for_table(nullable.clone(), false, false);
        builder.add_row(&key::encode(&[KeyValue::I64(1)]), pack_trailer(1, Kind::Put), &row).expect("row");
        let block = Block::decode(builder.finish(), Path::new("t.sst"), 0).expect("block");
        let view = RowRef::over_block(&nullable, &block, 0).expect("view");
        assert_eq!(view.i64(1).expect("nullable"), None);
        assert_eq!(view.i64(0).expect("key"), Some(1));
        let strict = layout(false);
        let view = RowRef::over_block(&strict, &block, 0).expect("view");
        assert!(matches!(view.i64(1), Err(Error::Corruption { .. })), "{:?}", view.i64(1));
        assert!(matches!(view.to_row(), Err(Error::Corruption { .. })));
    }
}
