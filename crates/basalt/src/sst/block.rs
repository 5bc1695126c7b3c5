//! The columnar block: rows of (user key, trailer, value) stored column by
//! column in Arrow layout behind a generic buffer directory. Data blocks and
//! the fence-key index block share it.
//!
//! [`Block::decode`] checks the directory and every offset once, so that the
//! accessors afterwards only slice within bounds they have already checked.
//!
//! `builder.rs` lays blocks out; `rows.rs` is the allocation-free view of
//! a key-value block's rows that point lookups read.

mod builder;
mod dictionary;
mod packed;
mod rows;

pub use builder::BlockBuilder;
use dictionary::Dictionary;
use packed::{IntColumn, Packed};
pub use rows::{FixedShape, MappedRows, Rows};

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use arrow_array::ArrayRef;
use arrow_buffer::Buffer;
use bytes::Bytes;

use super::format::{
    BLOCK_HEADER_FIXED_BYTES, BUF_KEY_DATA, BUF_KEY_OFFSETS, BUF_TRAILERS, BUF_VALUE_DATA, BUF_VALUE_OFFSETS,
    BUFFER_ALIGN_BYTES, BUFFER_ENTRY_BYTES, DATA_BLOCK_BUFFERS,
};
use crate::codec::internal::unpack_trailer;
use crate::error::{Error, Result};
use crate::row::cell::RawCell;
use crate::row::decode::{ColumnBuilder, array_from_buffers};
use crate::row::layout::{COLUMNS_MAX, ColumnSource, TableLayout, Width};

/// Most buffers a block may have: 3 + 3 per stored column of the widest
/// table (a bound on what a damaged header can make us allocate).
const MAX_BUFFERS: usize = 3 + 3 * COLUMNS_MAX;

/// Bytes of the header (fixed part plus directory) of a v1 block.
const HEADER_BYTES: usize = BLOCK_HEADER_FIXED_BYTES + DATA_BLOCK_BUFFERS * BUFFER_ENTRY_BYTES;

fn align_up(n: usize) -> usize {
    n.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES
}

/// Bytes per CPU cache line (x86-64 and most ARM cores).
const CACHE_LINE_BYTES: usize = 64;

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(a)
}

/// One table column of a block, as an Arrow array once built (or why it
/// could not be).
type LazyColumn = OnceLock<std::result::Result<ArrayRef, String>>;

/// What [`Block::decode_with`] checks.
#[derive(Debug, Clone, Copy)]
enum Checks {
    /// The directory, and every row's offsets and kind.
    Full,
    /// The directory only: the same bytes passed `Full` before.
    DirectoryOnly,
}

/// A decoded, checked block. Immutable and shared through the block cache.
#[derive(Debug, Clone)]
pub struct Block {
    data: Bytes,
    rows: usize,
    /// Where the first five buffers lie, kept inline: a lookup reads keys,
    /// trailers and values without a dependent load of the `buffers`
    /// vector, one cache miss fewer. A table block without stored columns
    /// (a key-only table) has three; its last two slots are empty.
    head: [(usize, usize); DATA_BLOCK_BUFFERS],
    /// Widths of the key and value columns written without offsets
    /// (key-value blocks whose keys, or values, all have one width).
    key_width: Option<usize>,
    value_width: Option<usize>,
    /// Buffers in the directory.
    buffer_count: usize,
    /// Where the buffers after the first five lie (table blocks only): a
    /// key-value block allocates nothing here.
    more_buffers: Vec<Range<usize>>,
    /// The table columns as Arrow arrays over this block's bytes, each
    /// built on first use: a scan of one column checks and wraps that
    /// column's buffers only.
    columns: OnceLock<Box<[LazyColumn]>>,
    /// Every column at once, for readers of whole rows.
    arrays: OnceLock<std::result::Result<Vec<ArrayRef>, String>>,
    /// `Some(newest seqno)` when every row is a put of a key no other row
    /// of the block holds: a scan may then hand out the rows without
    /// looking at each one. Worked out on first use.
    plain_rows: OnceLock<Option<u64>>,
    /// The bytes are a memory-mapped file's, held by the page cache rather
    /// than by this block: the block cache charges only the rest.
    data_is_mapped: bool,
    /// The file and where the block starts in it, for errors found after
    /// decoding (its Arrow arrays are checked on first use).
    file: Arc<Path>,
    file_offset: u64,
}

impl Block {
    /// Checks and wraps block contents (already unsealed) that came from the
    /// block at `offset` of `file`; any problem is corruption at that offset.
    pub fn decode(data: impl Into<Bytes>, file: impl Into<Arc<Path>>, offset: u64) -> Result<Block> {
        Block::decode_with(data.into(), file.into(), offset, Checks::Full)
    }

    fn decode_with(data: Bytes, file: Arc<Path>, offset: u64, checks: Checks) -> Result<Block> {
        let corrupt = |file: &Path, what: String| Error::corruption(file, offset, format!("block: {what}"));
        let (rows, buffers) = read_directory(&data).map_err(|what| corrupt(&file, what))?;
        let head = std::array::from_fn(|i| buffers.get(i).map_or((0, 0), |r| (r.start, r.end)));
        let buffer_count = buffers.len();
        let more_buffers = buffers.get(DATA_BLOCK_BUFFERS..).map(<[_]>::to_vec).unwrap_or_default();
        let mut block = Block {
            data,
            rows,
            head,
            key_width: None,
            value_width: None,
            buffer_count,
            more_buffers,
            columns: OnceLock::new(),
            arrays: OnceLock::new(),
            plain_rows: OnceLock::new(),
            data_is_mapped: false,
            file,
            file_offset: offset,
        };
        let checked = match checks {
            Checks::Full => block.check_columns(),
            Checks::DirectoryOnly => block.column_widths(),
        };
        checked.map_err(|what| corrupt(&block.file, what))?;
        Ok(block)
    }

    /// Corruption found in this block after it was decoded, naming its
    /// file and offset.
    pub fn corruption(&self, what: impl std::fmt::Display) -> Error {
        Error::corruption(&*self.file, self.file_offset, format!("table block: {what}"))
    }

    /// [`Block::decode`] of contents that lie in a memory map: the same
    /// checks, but the block's memory charge leaves out the bytes.
    pub fn decode_mapped(data: Bytes, file: impl Into<Arc<Path>>, offset: u64) -> Result<Block> {
        Ok(Block { data_is_mapped: true, ..Block::decode(data, file, offset)? })
    }

    /// [`Block::decode_mapped`] of a block whose every row this process
    /// has already checked ([`Block::decode`] of the same bytes succeeded):
    /// only the directory is read again, bounds-checked, not the rows'
    /// offsets and kinds. For the block cache's misses on blocks it held
    /// before: their cost no longer grows with the block's rows.
    pub(super) fn decode_mapped_checked_before(
        data: Bytes,
        file: impl Into<Arc<Path>>,
        offset: u64,
    ) -> Result<Block> {
        let block = Block::decode_with(data, file.into(), offset, Checks::DirectoryOnly)?;
        Ok(Block { data_is_mapped: true, ..block })
    }

    /// The key and value widths of a block checked before: what
    /// [`Block::check_columns`] works out, without its passes over the rows
    /// (the trailer column's length is checked again: it costs nothing,
    /// and an accessor then never reads past it, whatever the bytes).
    fn column_widths(&mut self) -> std::result::Result<(), String> {
        let n = self.rows;
        let trailers = self.buffer(BUF_TRAILERS).len();
        if trailers != 8 * n {
            return Err(format!("trailer column of {trailers} bytes for {n} rows"));
        }
        self.key_width =
            column_width(self.buffer(BUF_KEY_OFFSETS).len(), n, self.buffer(BUF_KEY_DATA).len(), "key")?;
        if self.is_key_value() {
            self.value_width = column_width(
                self.buffer(BUF_VALUE_OFFSETS).len(),
                n,
                self.buffer(BUF_VALUE_DATA).len(),
                "value",
            )?;
        }
        Ok(())
    }

    fn check_columns(&mut self) -> std::result::Result<(), String> {
        let n = self.rows;
        let kv = self.is_key_value();
        // Keys of one width are written without offsets in every block
        // (key-value blocks from format 2, table blocks from format 8).
        self.key_width =
            check_offsets(self.buffer(BUF_KEY_OFFSETS), n, self.buffer(BUF_KEY_DATA).len(), true, "key")?;
        if kv {
            self.value_width = check_offsets(
                self.buffer(BUF_VALUE_OFFSETS),
                n,
                self.buffer(BUF_VALUE_DATA).len(),
                kv,
                "value",
            )?;
        }
        let trailers = self.buffer(BUF_TRAILERS);
        if trailers.len() != 8 * n {
            return Err(format!("trailer column of {} bytes for {n} rows", trailers.len()));
        }
        if let Some(i) = (0..n).find(|&i| unpack_trailer(u64_at(trailers, 8 * i)).is_none()) {
            return Err(format!("row {i} has an unknown kind"));
        }
        Ok(())
    }

    /// Number of rows (at least one).
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Raw bytes of buffer `i` of the directory (for zero-copy column access).
    ///
    /// # Panics
    /// If `i` is not below the buffer count.
    pub fn buffer(&self, i: usize) -> &[u8] {
        &self.data[self.buffer_range(i)]
    }

    /// Where buffer `i` lies in the block.
    ///
    /// # Panics
    /// If `i` is not below the buffer count.
    fn buffer_range(&self, i: usize) -> Range<usize> {
        match self.head.get(i) {
            Some(&(start, end)) => start..end,
            None => self.more_buffers[i - DATA_BLOCK_BUFFERS].clone(),
        }
    }

    /// The whole block contents.
    #[cfg(test)]
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// The rows as a point lookup reads them.
    pub fn rows(&self) -> Rows<'_> {
        Rows {
            data: &self.data,
            len: self.rows,
            head: self.head,
            key_width: self.key_width,
            value_width: self.value_width,
            key_value: self.is_key_value(),
        }
    }

    /// User key of row `i`; see [`Rows::key`].
    pub fn key(&self, i: usize) -> &[u8] {
        self.rows().key(i)
    }

    /// User key of row `i`, sharing the block's bytes (no copy).
    pub fn key_bytes(&self, i: usize) -> Bytes {
        self.data.slice_ref(self.key(i))
    }

    /// Value of row `i` of a key-value block, sharing the block's bytes.
    pub fn value_bytes(&self, i: usize) -> Bytes {
        self.data.slice_ref(self.value(i))
    }

    /// Trailer (`seqno << 8 | kind`) of row `i`; see [`Rows::trailer`].
    pub fn trailer(&self, i: usize) -> u64 {
        self.rows().trailer(i)
    }

    /// Whether this is a key-value block (one value column) rather than a
    /// table block (three buffers per stored column).
    pub fn is_key_value(&self) -> bool {
        self.buffer_count == DATA_BLOCK_BUFFERS
    }

    /// Value of row `i` (empty for a delete) of a key-value block; empty for
    /// a table block, whose values are read with [`Block::arrays`].
    pub fn value(&self, i: usize) -> &[u8] {
        self.rows().value(i)
    }

    /// First row whose internal key is >= `(user_key, trailer)`, or `len()`.
    pub fn seek(&self, user_key: &[u8], trailer: u64) -> usize {
        self.rows().seek(user_key, trailer)
    }

    /// The first row of `rows` whose key fails `passes`; see
    /// [`Rows::first_failing`].
    pub fn first_failing(&self, rows: Range<usize>, passes: impl Fn(&[u8]) -> bool) -> usize {
        self.rows().first_failing(rows, passes)
    }

    /// Every column of the table, as Arrow arrays that point into this
    /// block's bytes (no copy unless a buffer is misaligned). Deleted rows
    /// hold nulls. Built and validated once per block; a mismatch with the
    /// layout or invalid contents is reported as an error message.
    pub fn arrays(&self, layout: &TableLayout) -> std::result::Result<&[ArrayRef], String> {
        self.arrays
            .get_or_init(|| (0..layout.columns().len()).map(|c| self.column(layout, c).cloned()).collect())
            .as_ref()
            .map(Vec::as_slice)
            .map_err(Clone::clone)
    }

    /// Column `c` of the table (its index in the schema) as an Arrow array
    /// over this block's bytes, built and validated on first use, as
    /// [`Block::arrays`] builds every column.
    pub fn column(&self, layout: &TableLayout, c: usize) -> std::result::Result<&ArrayRef, String> {
        let columns =
            self.columns.get_or_init(|| (0..layout.columns().len()).map(|_| OnceLock::new()).collect());
        let Some(slot) = columns.get(c) else {
            return Err(format!("no column {c} in a block read as {} columns", columns.len()));
        };
        slot.get_or_init(|| self.build_column(layout, c)).as_ref().map_err(Clone::clone)
    }

    /// Whether the block has the buffers `layout`'s stored columns need:
    /// checked before its zone map is read through that layout, since a
    /// zone map read through another schema version's columns rules out
    /// rows it holds.
    pub fn check_buffers(&self, layout: &TableLayout) -> std::result::Result<(), String> {
        let expected = if self.is_key_value() { DATA_BLOCK_BUFFERS } else { 3 + 3 * layout.stored().len() };
        if self.buffer_count != expected {
            return Err(format!("{} buffers, the table layout needs {expected}", self.buffer_count));
        }
        Ok(())
    }

    fn build_column(&self, layout: &TableLayout, c: usize) -> std::result::Result<ArrayRef, String> {
        let kv_block = self.is_key_value();
        self.check_buffers(layout)?;
        let Some(column) = layout.columns().get(c) else {
            return Err(format!("no column {c} in the table layout"));
        };
        let buf = |i: usize| Buffer::from(self.data.slice(self.buffer_range(i)));
        // A fixed-width column has no offsets in the block; Arrow's Binary
        // needs them, so they are made (a copy only for such blocks).
        let offsets = |i: usize, width: Option<usize>| match width {
            Some(w) => (0..=self.rows).map(|r| (r * w) as i32).collect::<Buffer>(),
            None => buf(i),
        };
        let (validity, offsets, values) = if column.source == ColumnSource::Key {
            (Buffer::from_vec(Vec::<u8>::new()), offsets(BUF_KEY_OFFSETS, self.key_width), buf(BUF_KEY_DATA))
        } else if kv_block {
            (
                Buffer::from_vec(Vec::<u8>::new()),
                offsets(BUF_VALUE_OFFSETS, self.value_width),
                buf(BUF_VALUE_DATA),
            )
        } else {
            // Stored columns' buffers follow the key, trailer and value
            // slots, three per column, in schema order.
            let Some(stored) = layout.stored().iter().position(|&s| s == c) else {
                return Err(format!("column {c} is neither the key nor stored"));
            };
            let at = 3 + 3 * stored;
            if let Some(dictionary) = self.dictionary(column, at)? {
                // Decoded into buffers of their own: Arrow reads a plain
                // column (the validity is the block's).
                let validity = self.buffer(at);
                let is_null = |r: usize| {
                    !validity.is_empty() && validity.get(r / 8).is_none_or(|b| b & (1 << (r % 8)) == 0)
                };
                let (offsets, values) =
                    dictionary.decode(self.rows, is_null).map_err(|e| format!("column {c}: {e}"))?;
                (buf(at), offsets, values)
            } else {
                match self.packed(column, at)? {
                    // Unpacked into a buffer of its own: Arrow reads plain
                    // values (the validity is the block's).
                    Some(packed) => (
                        buf(at),
                        Buffer::from_vec(Vec::<u8>::new()),
                        packed.unpack(self.buffer(at + 2), self.rows),
                    ),
                    None => (buf(at), buf(at + 1), buf(at + 2)),
                }
            }
        };
        array_from_buffers(&column.field, column.width, self.rows, validity, offsets, values)
            .map_err(|e| e.to_string())
    }

    /// Appends row `i` of a table block to `builders` (one per schema
    /// column), read straight from the column buffers ([`Block::table_cell`]):
    /// no Arrow array is built for the rest of the block (a point read of
    /// one row would otherwise build and validate every row's columns).
    /// The values themselves (UTF-8, ...) are validated when the builders
    /// finish.
    pub fn push_table_row(
        &self,
        layout: &TableLayout,
        i: usize,
        builders: &mut [ColumnBuilder],
    ) -> std::result::Result<(), String> {
        self.check_table_row(layout, i)?;
        if builders.len() != layout.columns().len() {
            return Err(format!("{} builders for {} columns", builders.len(), layout.columns().len()));
        }
        for (c, builder) in builders.iter_mut().enumerate() {
            match self.table_cell(layout, c, i)?.row_bytes(layout.columns()[c].width) {
                None => builder.push_null(),
                Some(b) => builder.push(b),
            }
        }
        Ok(())
    }

    /// Whether row `i` can be read as a row of `layout`'s table: the row
    /// exists and the block has the buffers its stored columns need.
    pub fn check_table_row(&self, layout: &TableLayout, i: usize) -> std::result::Result<(), String> {
        let expected = 3 + 3 * layout.stored().len();
        if self.buffer_count != expected || i >= self.rows {
            return Err(format!(
                "row {i} of {} rows, {} buffers, the table layout needs {expected}",
                self.rows, self.buffer_count
            ));
        }
        Ok(())
    }

    /// Reads one byte of each cache line row `i`'s values lie on, column
    /// by column: validity, offsets, fixed-width and packed values first,
    /// then the variable-width values the offsets point to. The loads of
    /// one round do not depend on each other, so the CPU overlaps their
    /// misses; read column after column, each column's loads waited for
    /// the last (a row of a cold block touches a few lines per column, its
    /// values lying column by column). As `Rows::warm_rows` for keys. The
    /// block must have passed [`Block::check_table_row`]; positions are
    /// bounds-checked all the same.
    pub fn warm_table_row(&self, layout: &TableLayout, i: usize) {
        let at_byte = |buf: &[u8], at: usize| buf.get(at).copied().unwrap_or(0);
        let mut acc = 0u8;
        for (n, &c) in layout.stored().iter().enumerate() {
            let at = 3 + 3 * n;
            let (validity, offsets, values) = (self.buffer(at), self.buffer(at + 1), self.buffer(at + 2));
            acc ^= at_byte(validity, i / 8);
            acc ^= match layout.columns()[c].width {
                Width::Fixed(w) if offsets.is_empty() => at_byte(values, i * w),
                // A packed column: its header, and about where the value lies.
                Width::Fixed(w) => {
                    at_byte(offsets, 1) ^ at_byte(values, i * values.len() / self.rows.max(1) / w * w)
                }
                Width::Bool => at_byte(values, i / 8),
                // A dictionary column: the row's code (the codes end
                // the values buffer), then the dictionary's start.
                Width::Var32 if Dictionary::is_dictionary(offsets) => {
                    let bits = usize::from(at_byte(offsets, 1));
                    let codes_at = values.len().saturating_sub((self.rows * bits).div_ceil(8));
                    at_byte(values, codes_at + i * bits / 8) ^ at_byte(offsets, 16)
                }
                Width::Var32 => at_byte(offsets, 4 * i) ^ at_byte(offsets, 4 * i + 7),
                Width::Var64 => at_byte(offsets, 8 * i) ^ at_byte(offsets, 8 * i + 15),
            };
        }
        for (n, &c) in layout.stored().iter().enumerate() {
            let at = 3 + 3 * n;
            let wide = match layout.columns()[c].width {
                Width::Var32 if Dictionary::is_dictionary(self.buffer(at + 1)) => continue,
                Width::Var32 => 4,
                Width::Var64 => 8,
                _ => continue,
            };
            let offsets = self.buffer(at + 1);
            let start = offsets.get(wide * i..wide * i + 4).map_or(0, |b| u32_at(b, 0) as usize);
            acc ^= at_byte(self.buffer(at + 2), start);
        }
        std::hint::black_box(acc);
    }

    /// Column `c` (a schema index) of row `i` of a table block, read in
    /// place: one load for a fixed-width value (unpacked from a packed
    /// column), two offsets for a variable-width one, a bit for a bool,
    /// the row's key for a column kept only there. Every position is
    /// bounds-checked; the block must have passed [`Block::check_table_row`].
    #[inline]
    pub fn table_cell(
        &self,
        layout: &TableLayout,
        col: usize,
        row: usize,
    ) -> std::result::Result<RawCell<'_>, String> {
        let (c, i) = (col, row);
        let Some(slot) = layout.stored_position(c) else {
            return if c < layout.columns().len() {
                Ok(RawCell::Bytes(self.key(i)))
            } else {
                Err(format!("no column {c} in the table layout"))
            };
        };
        let column = &layout.columns()[c];
        let at = 3 + 3 * slot;
        let (validity, offsets, values) = (self.buffer(at), self.buffer(at + 1), self.buffer(at + 2));
        if !validity.is_empty() {
            let byte = validity.get(i / 8).ok_or_else(|| format!("column {c}: short validity"))?;
            if byte & (1 << (i % 8)) == 0 {
                return Ok(RawCell::Null);
            }
        }
        // Through the same check a scan makes: a dictionary header in a
        // column that cannot hold one fails both alike.
        if let Some(dictionary) = self.dictionary(column, at)? {
            return Ok(RawCell::Bytes(dictionary.value(i).map_err(|e| format!("column {c}: {e}"))?));
        }
        let short = || format!("column {c}: row {i} past its buffers");
        Ok(match column.width {
            Width::Fixed(width) => match self.packed(column, at)? {
                Some(packed) => RawCell::Word(packed.value(values, i)),
                None => RawCell::Bytes(values.get(i * width..(i + 1) * width).ok_or_else(short)?),
            },
            Width::Bool => {
                let byte = values.get(i / 8).ok_or_else(short)?;
                RawCell::Word([(byte >> (i % 8)) & 1, 0, 0, 0, 0, 0, 0, 0])
            }
            Width::Var32 | Width::Var64 => {
                let wide = if column.width == Width::Var32 { 4 } else { 8 };
                let offset = |r: usize| -> Option<usize> {
                    let b = offsets.get(r * wide..(r + 1) * wide)?;
                    if wide == 4 {
                        usize::try_from(i32::from_le_bytes(b.try_into().ok()?)).ok()
                    } else {
                        usize::try_from(i64::from_le_bytes(b.try_into().ok()?)).ok()
                    }
                };
                let (start, end) = offset(i).zip(offset(i + 1)).ok_or_else(short)?;
                RawCell::Bytes(values.get(start..end).ok_or_else(short)?)
            }
        })
    }

    /// Bytes the packed columns take once unpacked: a packed column's
    /// offsets buffer is its header, whose first byte is the packing tag
    /// (a real offsets buffer starts with offset 0) and whose third is
    /// the value width.
    fn unpacked_bytes(&self) -> usize {
        if self.is_key_value() {
            return 0;
        }
        // Whole triples only: a directory of another shape is reported
        // when its columns are read.
        (3..self.buffer_count.saturating_sub(2))
            .step_by(3)
            .map(|at| {
                let header = self.buffer(at + 1);
                if Dictionary::is_dictionary(header) {
                    // A damaged count is caught when the column is decoded;
                    // until then it may only overcharge up to the most a
                    // block's rows can decode to.
                    Dictionary::read(header, self.buffer(at + 2), self.rows).map_or(0, |d| {
                        4 * (self.rows + 1) + d.decoded_bytes().min(i32::MAX as u64) as usize
                    })
                } else if header.len() == packed::HEADER_BYTES && header[0] != 0 {
                    self.rows * usize::from(header[2])
                } else {
                    0
                }
            })
            .sum::<usize>()
            // Keys of one width have no offsets in the block: a key column
            // read as an array (a raw `Utf8`/`Binary` key) makes them.
            + if self.key_width.is_some() { 4 * (self.rows + 1) } else { 0 }
    }

    /// The stored column at buffer `at` (its validity; offsets and values
    /// follow) when it is a dictionary column (`dictionary.rs`): a
    /// variable-width column whose offsets buffer starts with the
    /// dictionary tag, checked here against its values buffer.
    fn dictionary(
        &self,
        column: &crate::row::layout::ColumnLayout,
        at: usize,
    ) -> std::result::Result<Option<Dictionary<'_>>, String> {
        let header = self.buffer(at + 1);
        if !Dictionary::is_dictionary(header) {
            return Ok(None);
        }
        if column.width != Width::Var32 {
            return Err(format!(
                "column {}: a dictionary header in a {:?} column",
                column.index, column.width
            ));
        }
        Dictionary::read(header, self.buffer(at + 2), self.rows)
            .map(Some)
            .map_err(|e| format!("column {}: {e}", column.index))
    }

    /// The stored column at buffer `at` (its validity; offsets and values
    /// follow) when it is packed: a fixed-width column has no offsets
    /// unless its offsets buffer holds a packing header (`packed.rs`),
    /// checked here against the column and its values buffer.
    fn packed(
        &self,
        column: &crate::row::layout::ColumnLayout,
        at: usize,
    ) -> std::result::Result<Option<Packed>, String> {
        let header = self.buffer(at + 1);
        if header.is_empty() || !matches!(column.width, Width::Fixed(_)) {
            return Ok(None);
        }
        let Some(int) = IntColumn::of(column.field.data_type()) else {
            return Err(format!(
                "column {}: offsets for a fixed-width column that cannot be packed",
                column.index
            ));
        };
        Packed::read(header, int, self.rows, self.buffer(at + 2).len())
            .map(Some)
            .map_err(|e| format!("column {}: {e}", column.index))
    }

    /// `Some(newest seqno)` when every row is a put and no two rows hold
    /// the same user key; `None` otherwise. Worked out once per block.
    pub fn plain_rows(&self) -> Option<u64> {
        *self.plain_rows.get_or_init(|| self.rows().plain())
    }

    /// Memory held by this block, for weighing it in the block cache.
    pub fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + if self.data_is_mapped { 0 } else { self.data.len() }
            + self.more_buffers.len() * std::mem::size_of::<Range<usize>>()
            // Packed columns are unpacked into buffers of their own when
            // first read as arrays. Charged up front, whether a scan
            // unpacks them or only point reads use the block: the cache
            // weighs an entry once, when it is inserted, and an undercount
            // would let scans overrun its budget.
            + self.unpacked_bytes()
            // A table block's Arrow arrays share its bytes; count their
            // bookkeeping.
            + if self.is_key_value() { 0 } else { self.buffer_count * 64 }
    }
}

/// Reads the header and directory: row count, then each buffer's range,
/// aligned, in order, past the header and within the block.
fn read_directory(data: &[u8]) -> std::result::Result<(usize, Vec<Range<usize>>), String> {
    let mut buffers = Vec::new();
    let (rows, _) = read_directory_with(data, |_, r| buffers.push(r))?;
    Ok((rows, buffers))
}

/// [`read_directory`], handing each buffer's index and range to `each`
/// instead of collecting them; returns the row and buffer counts.
fn read_directory_with(
    data: &[u8],
    mut each: impl FnMut(usize, Range<usize>),
) -> std::result::Result<(usize, usize), String> {
    if data.len() < BLOCK_HEADER_FIXED_BYTES {
        return Err(format!("{} bytes is shorter than a block header", data.len()));
    }
    let rows = u32_at(data, 0) as usize;
    let count = u32_at(data, 4) as usize;
    // A key-value block has 5 buffers; a table block 3 + 3 per stored
    // column, so 3 when the key is its only column.
    if count != DATA_BLOCK_BUFFERS && (count < 3 || !count.is_multiple_of(3) || count > MAX_BUFFERS) {
        return Err(format!("{count} buffers is not a block layout"));
    }
    if rows == 0 || rows > data.len() {
        return Err(format!("impossible row count {rows}"));
    }
    let header = BLOCK_HEADER_FIXED_BYTES + count * BUFFER_ENTRY_BYTES;
    if header > data.len() {
        return Err("buffer directory runs past the block".into());
    }
    let mut end_prev = header;
    for i in 0..count {
        let at = BLOCK_HEADER_FIXED_BYTES + i * BUFFER_ENTRY_BYTES;
        let start = u32_at(data, at) as usize;
        let len = u32_at(data, at + 4) as usize;
        let end = start.checked_add(len).filter(|&e| e <= data.len());
        let Some(end) = end.filter(|_| start.is_multiple_of(BUFFER_ALIGN_BYTES) && start >= end_prev) else {
            return Err(format!("buffer {i} at {start}+{len} is misplaced"));
        };
        each(i, start..end);
        end_prev = end;
    }
    Ok((rows, count))
}

/// The sizes of a key-value block's binary column: `Some(width)` when it
/// was written without offsets (the data splits evenly into `rows` values),
/// `None` when it has `rows + 1` offsets (their values are checked by
/// [`check_offsets`]).
fn column_width(
    offsets_len: usize,
    rows: usize,
    data_len: usize,
    what: &str,
) -> std::result::Result<Option<usize>, String> {
    if offsets_len == 0 && rows > 0 {
        if !data_len.is_multiple_of(rows) {
            return Err(format!("fixed-width {what} column of {data_len} bytes for {rows} rows"));
        }
        return Ok(Some(data_len / rows));
    }
    if offsets_len != 4 * (rows + 1) {
        return Err(format!("{what} offsets of {offsets_len} bytes for {rows} rows"));
    }
    Ok(None)
}

/// Checks an Arrow offsets buffer: rows + 1 non-decreasing values from 0 to
/// the data length. In a key-value block (`fixed_allowed`) an empty offsets
/// buffer means a fixed-width column: `Some(width)` when the data splits
/// evenly into `rows` values.
fn check_offsets(
    off: &[u8],
    rows: usize,
    data_len: usize,
    fixed_allowed: bool,
    what: &str,
) -> std::result::Result<Option<usize>, String> {
    if fixed_allowed {
        if let Some(width) = column_width(off.len(), rows, data_len, what)? {
            return Ok(Some(width));
        }
    } else if off.len() != 4 * (rows + 1) {
        return Err(format!("{what} offsets of {} bytes for {rows} rows", off.len()));
    }
    // One pass with no early exit (it vectorizes; this runs on every block
    // a scan first touches): offsets that start at 0, never fall and end
    // at the data's length all lie within the data.
    let (mut prev, mut falls) = (0u32, false);
    for offset in off.chunks_exact(4) {
        let v = u32::from_le_bytes([offset[0], offset[1], offset[2], offset[3]]);
        falls |= v < prev;
        prev = v;
    }
    if falls || u32_at(off, 0) != 0 {
        return Err(format!("{what} offsets out of order or not starting at 0"));
    }
    if prev as usize != data_len {
        return Err(format!("{what} offsets end at {prev}, data is {data_len} bytes"));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
