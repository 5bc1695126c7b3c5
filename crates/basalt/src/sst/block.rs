//! The columnar block: rows of (user key, trailer, value) stored column by
//! column in Arrow layout behind a generic buffer directory. Data blocks and
//! the fence-key index block share it.
//!
//! [`Block::decode`] checks the directory and every offset once, so that the
//! accessors afterwards only slice within bounds they have already checked.

use std::cmp::Ordering;
use std::ops::Range;
use std::path::Path;

use bytes::Bytes;

use super::format::{
    BLOCK_BYTES_MAX, BLOCK_HEADER_FIXED_BYTES, BUF_KEY_DATA, BUF_KEY_OFFSETS, BUF_TRAILERS, BUF_VALUE_DATA,
    BUF_VALUE_OFFSETS, BUFFER_ALIGN_BYTES, BUFFER_ENTRY_BYTES, DATA_BLOCK_BUFFERS,
};
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef};
use arrow_buffer::Buffer;

use crate::codec::internal::{Kind, compare_user_keys, unpack_trailer};
use crate::error::{Error, Result};
use crate::row::layout::{
    COLUMNS_MAX, ColumnBuilder, ColumnSource, TableLayout, array_from_buffers, builders_for, decode_row,
};

/// Most buffers a block may have: 3 + 3 per stored column of the widest
/// table (a bound on what a damaged header can make us allocate).
const MAX_BUFFERS: usize = 3 + 3 * COLUMNS_MAX;

/// Bytes of the header (fixed part plus directory) of a v1 block.
const HEADER_BYTES: usize = BLOCK_HEADER_FIXED_BYTES + DATA_BLOCK_BUFFERS * BUFFER_ENTRY_BYTES;

fn align_up(n: usize) -> usize {
    n.div_ceil(BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES
}

/// Builds one block in memory, one column at a time.
#[derive(Debug)]
pub struct BlockBuilder {
    /// i32 LE offsets into `key_data`, starting with 0.
    key_offsets: Vec<u8>,
    key_data: Vec<u8>,
    trailers: Vec<u8>,
    value_offsets: Vec<u8>,
    value_data: Vec<u8>,
    rows: usize,
    /// For a table tree: the layout and one builder per column; the row
    /// bytes are split into Arrow columns instead of one value column.
    table: Option<(Arc<TableLayout>, Vec<ColumnBuilder>)>,
    /// Zones of the stored columns of the last finished table block.
    last_zones: Option<Vec<crate::row::zone::Zone>>,
}

impl Default for BlockBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        BlockBuilder {
            key_offsets: 0i32.to_le_bytes().to_vec(),
            key_data: Vec::new(),
            trailers: Vec::new(),
            value_offsets: 0i32.to_le_bytes().to_vec(),
            value_data: Vec::new(),
            rows: 0,
            table: None,
            last_zones: None,
        }
    }

    /// A builder for a table tree's data blocks: each stored column of the
    /// layout gets three buffers (validity, offsets, values).
    pub fn for_table(layout: Arc<TableLayout>) -> Self {
        let builders = builders_for(&layout);
        BlockBuilder { table: Some((layout, builders)), ..BlockBuilder::new() }
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Rows added since the last [`BlockBuilder::finish`].
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.rows
    }

    /// The size [`BlockBuilder::finish`] would return now: exact for table
    /// blocks and for key-value blocks of variable-width columns, an upper
    /// bound where a column turns out to be fixed-width.
    pub fn encoded_bytes(&self) -> usize {
        match &self.table {
            None => Self::encoded_bytes_of(self.rows, self.key_data.len(), self.value_data.len()),
            // Close enough for cutting blocks: column buffers plus padding.
            Some((_, cols)) => {
                Self::encoded_bytes_of(self.rows, self.key_data.len(), 0)
                    + cols
                        .iter()
                        .map(|c| c.bytes() + 3 * (BUFFER_ENTRY_BYTES + BUFFER_ALIGN_BYTES))
                        .sum::<usize>()
            }
        }
    }

    fn encoded_bytes_of(rows: usize, key_bytes: usize, value_bytes: usize) -> usize {
        let offsets = 4 * (rows + 1);
        HEADER_BYTES + align_up(offsets) + align_up(key_bytes) + 8 * rows + align_up(offsets) + value_bytes
    }

    /// Whether a row with this key and value keeps the block within
    /// [`BLOCK_BYTES_MAX`], so that every offset fits an i32.
    pub fn fits(&self, key_len: usize, value_len: usize) -> bool {
        if key_len > BLOCK_BYTES_MAX || value_len > BLOCK_BYTES_MAX {
            return false;
        }
        let keys = self.key_data.len().saturating_add(key_len);
        let values = self.value_data.len().saturating_add(value_len);
        Self::encoded_bytes_of(self.rows + 1, keys, values) <= BLOCK_BYTES_MAX
    }

    /// Appends a row of a key-value (or index) block. The caller keeps rows
    /// in internal-key order and checks [`BlockBuilder::fits`] first.
    pub fn add(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) {
        debug_assert!(self.fits(user_key.len(), value.len()));
        debug_assert!(self.table.is_none(), "table blocks take rows through add_row");
        self.value_data.extend_from_slice(value);
        self.value_offsets.extend_from_slice(&(self.value_data.len() as i32).to_le_bytes());
        self.push_key(user_key, trailer);
    }

    /// Appends a row: for a table block `value` is the row bytes of a put
    /// (`table::layout`), split into the column builders; malformed row
    /// bytes are an error (the caller abandons the SST).
    pub fn add_row(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<()> {
        let Some((layout, cols)) = &mut self.table else {
            self.add(user_key, trailer, value);
            return Ok(());
        };
        let row = (unpack_trailer(trailer).map(|(_, k)| k) == Some(Kind::Put)).then_some(value);
        decode_row(layout, row, cols)?;
        self.push_key(user_key, trailer);
        Ok(())
    }

    /// Appends a row of a table block copied from row `i` of another
    /// block's arrays (compaction).
    pub fn add_from_arrays(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        arrays: &[ArrayRef],
        i: usize,
    ) -> Result<()> {
        let Some((layout, cols)) = &mut self.table else {
            return Err(Error::InvalidArgument("a key-value block takes no table rows".into()));
        };
        let put = unpack_trailer(trailer).map(|(_, k)| k) == Some(Kind::Put);
        for &c in layout.stored() {
            let array = arrays.get(c).ok_or_else(|| Error::InvalidArgument("missing column".into()))?;
            if put && array.is_valid(i) {
                cols[c].push_from_array(array, i)?;
            } else {
                cols[c].push_null();
            }
        }
        self.push_key(user_key, trailer);
        Ok(())
    }

    /// The zones of the block last returned by `finish` (table blocks).
    pub fn take_zones(&mut self) -> Option<Vec<crate::row::zone::Zone>> {
        self.last_zones.take()
    }

    fn push_key(&mut self, user_key: &[u8], trailer: u64) {
        self.key_data.extend_from_slice(user_key);
        self.key_offsets.extend_from_slice(&(self.key_data.len() as i32).to_le_bytes());
        self.trailers.extend_from_slice(&trailer.to_le_bytes());
        self.rows += 1;
    }

    /// Encodes the block and resets the builder for the next one.
    pub fn finish(&mut self) -> Vec<u8> {
        let out = match &mut self.table {
            None => {
                // A column whose values all have one width is written
                // without its offsets (an empty offsets buffer): a lookup
                // then finds row i's bytes at i * width, one dependent cache
                // miss fewer than through the offsets.
                let key_offsets = fixed_width(&self.key_offsets).map_or(&self.key_offsets[..], |_| &[]);
                let value_offsets = fixed_width(&self.value_offsets).map_or(&self.value_offsets[..], |_| &[]);
                let out = encode_buffers(
                    self.rows as u32,
                    &[key_offsets, &self.key_data, &self.trailers, value_offsets, &self.value_data],
                );
                debug_assert!(out.len() <= self.encoded_bytes());
                out
            }
            Some((layout, cols)) => {
                let zones = layout.stored().iter().map(|&i| crate::row::zone::zone_of(&cols[i])).collect();
                self.last_zones = Some(zones);
                let mut owned: Vec<Vec<u8>> = Vec::new();
                for &i in layout.stored() {
                    owned.extend(cols[i].take_buffers());
                }
                let mut buffers: Vec<&[u8]> = vec![&self.key_offsets, &self.key_data, &self.trailers];
                buffers.extend(owned.iter().map(Vec::as_slice));
                encode_buffers(self.rows as u32, &buffers)
            }
        };
        let table = self.table.take();
        let zones = self.last_zones.take();
        *self = BlockBuilder::new();
        if let Some((layout, _)) = table {
            *self = BlockBuilder::for_table(layout);
        }
        self.last_zones = zones;
        out
    }
}

/// If every value of an offsets column (i32 LE, starting with 0, at least
/// one row) has the same width, that width.
fn fixed_width(offsets: &[u8]) -> Option<usize> {
    let rows = offsets.len() / 4 - 1;
    let total = u32_at(offsets, 4 * rows) as usize;
    let width = total.checked_div(rows)?;
    (0..=rows).all(|i| u32_at(offsets, 4 * i) as usize == i * width).then_some(width)
}

/// Lays out a block: header, directory, then each buffer at an aligned
/// offset with zero padding between them.
fn encode_buffers(rows: u32, buffers: &[&[u8]]) -> Vec<u8> {
    let header = BLOCK_HEADER_FIXED_BYTES + buffers.len() * BUFFER_ENTRY_BYTES;
    let mut out = Vec::with_capacity(header + buffers.iter().map(|b| align_up(b.len())).sum::<usize>());
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&(buffers.len() as u32).to_le_bytes());
    let mut at = align_up(header);
    for b in buffers {
        out.extend_from_slice(&(at as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        at = align_up(at + b.len());
    }
    for b in buffers {
        out.resize(align_up(out.len()), 0);
        out.extend_from_slice(b);
    }
    out
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
    /// The table columns as Arrow arrays over this block's bytes, built on
    /// first use.
    arrays: OnceLock<std::result::Result<Vec<ArrayRef>, String>>,
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
        let data = data.into();
        let file = file.into();
        let corrupt = |what: String| Error::corruption(&*file, offset, format!("block: {what}"));
        let (rows, buffers) = read_directory(&data).map_err(corrupt)?;
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
            arrays: OnceLock::new(),
            data_is_mapped: false,
            file: file.clone(),
            file_offset: offset,
        };
        block.check_columns().map_err(corrupt)?;
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

    fn check_columns(&mut self) -> std::result::Result<(), String> {
        let n = self.rows;
        let kv = self.is_key_value();
        self.key_width =
            check_offsets(self.buffer(BUF_KEY_OFFSETS), n, self.buffer(BUF_KEY_DATA).len(), kv, "key")?;
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

    /// Every column of the table, as Arrow arrays that point into this
    /// block's bytes (no copy unless a buffer is misaligned). Deleted rows
    /// hold nulls. Built and validated once per block; a mismatch with the
    /// layout or invalid contents is reported as an error message.
    pub fn arrays(&self, layout: &TableLayout) -> std::result::Result<&[ArrayRef], String> {
        self.arrays
            .get_or_init(|| self.build_arrays(layout))
            .as_ref()
            .map(Vec::as_slice)
            .map_err(Clone::clone)
    }

    fn build_arrays(&self, layout: &TableLayout) -> std::result::Result<Vec<ArrayRef>, String> {
        let kv_block = self.is_key_value();
        let expected = if kv_block { DATA_BLOCK_BUFFERS } else { 3 + 3 * layout.stored().len() };
        if self.buffer_count != expected {
            return Err(format!("{} buffers, the table layout needs {expected}", self.buffer_count));
        }
        let buf = |i: usize| Buffer::from(self.data.slice(self.buffer_range(i)));
        // A fixed-width column has no offsets in the block; Arrow's Binary
        // needs them, so they are made (a copy only for such blocks).
        let offsets = |i: usize, width: Option<usize>| match width {
            Some(w) => (0..=self.rows).map(|r| (r * w) as i32).collect::<Buffer>(),
            None => buf(i),
        };
        let mut out = Vec::with_capacity(layout.columns().len());
        let mut next_stored = 0;
        for c in layout.columns() {
            let (validity, offsets, values) = if c.source == ColumnSource::Key {
                (
                    Buffer::from_vec(Vec::<u8>::new()),
                    offsets(BUF_KEY_OFFSETS, self.key_width),
                    buf(BUF_KEY_DATA),
                )
            } else if kv_block {
                (
                    Buffer::from_vec(Vec::<u8>::new()),
                    offsets(BUF_VALUE_OFFSETS, self.value_width),
                    buf(BUF_VALUE_DATA),
                )
            } else {
                let at = 3 + 3 * next_stored;
                next_stored += 1;
                (buf(at), buf(at + 1), buf(at + 2))
            };
            let array = array_from_buffers(&c.field, c.width, self.rows, validity, offsets, values)
                .map_err(|e| e.to_string())?;
            out.push(array);
        }
        Ok(out)
    }

    /// Memory held by this block, for weighing it in the block cache.
    pub fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + if self.data_is_mapped { 0 } else { self.data.len() }
            + self.more_buffers.len() * std::mem::size_of::<Range<usize>>()
            // A table block's Arrow arrays share its bytes; count their
            // bookkeeping.
            + if self.is_key_value() { 0 } else { self.buffer_count * 64 }
    }
}

/// What locates every row of a key-value block with fixed-width keys and
/// values: the writer places the buffers by these alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedShape {
    /// Rows in the block.
    pub rows: usize,
    /// Bytes of every key.
    pub key_width: usize,
    /// Bytes of every value.
    pub value_width: usize,
}

/// A block's rows as a point lookup reads them: the bytes, borrowed, and
/// where the key, trailer and value columns lie. A cached [`Block`] gives
/// one ([`Block::rows`]); so does a block read where it lies in a memory
/// map, after it was checked once ([`Rows::parse`]), with no allocation
/// and no reference count to update.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    data: &'a [u8],
    len: usize,
    head: [(usize, usize); DATA_BLOCK_BUFFERS],
    key_width: Option<usize>,
    value_width: Option<usize>,
    key_value: bool,
}

impl<'a> Rows<'a> {
    /// The rows of a key-value block's contents that passed
    /// [`Block::decode`] before. Repeats only the checks that keep every
    /// access in bounds (the directory, the column sizes); `None` for a
    /// table block. An error is a message for `Error::Corruption`.
    pub fn parse(data: &'a [u8]) -> std::result::Result<Option<Rows<'a>>, String> {
        let mut head = [(0, 0); DATA_BLOCK_BUFFERS];
        let (rows, count) = read_directory_with(data, |i, r| {
            if let Some(slot) = head.get_mut(i) {
                *slot = (r.start, r.end);
            }
        })?;
        if count != DATA_BLOCK_BUFFERS {
            return Ok(None);
        }
        let len = |i: usize| head[i].1 - head[i].0;
        let key_width = column_width(len(BUF_KEY_OFFSETS), rows, len(BUF_KEY_DATA), "key")?;
        let value_width = column_width(len(BUF_VALUE_OFFSETS), rows, len(BUF_VALUE_DATA), "value")?;
        if len(BUF_TRAILERS) != 8 * rows {
            return Err(format!("trailer column of {} bytes for {rows} rows", len(BUF_TRAILERS)));
        }
        Ok(Some(Rows { data, len: rows, head, key_width, value_width, key_value: true }))
    }

    /// The rows of a key-value block of `shape`, found where the block
    /// writer puts them, without reading the block's header: for a block
    /// whose shape was taken from it by [`Rows::fixed_shape`] when it was
    /// checked. `None` if the shape does not fit in `data`.
    pub fn with_shape(data: &'a [u8], shape: FixedShape) -> Option<Rows<'a>> {
        let FixedShape { rows, key_width, value_width } = shape;
        let mut lens = [0; DATA_BLOCK_BUFFERS];
        lens[BUF_KEY_DATA] = rows.checked_mul(key_width)?;
        lens[BUF_TRAILERS] = rows.checked_mul(8)?;
        lens[BUF_VALUE_DATA] = rows.checked_mul(value_width)?;
        let mut head = [(0, 0); DATA_BLOCK_BUFFERS];
        let mut at = align_up(HEADER_BYTES);
        for (slot, len) in head.iter_mut().zip(lens) {
            let end = at.checked_add(len)?;
            *slot = (at, end);
            at = align_up(end);
        }
        (head[DATA_BLOCK_BUFFERS - 1].1 <= data.len() && rows > 0).then_some(Rows {
            data,
            len: rows,
            head,
            key_width: Some(key_width),
            value_width: Some(value_width),
            key_value: true,
        })
    }

    /// The block's shape, when its key and value columns each have one
    /// width and [`Rows::with_shape`] finds exactly the buffers its
    /// directory names.
    pub fn fixed_shape(&self) -> Option<FixedShape> {
        let shape = FixedShape { rows: self.len, key_width: self.key_width?, value_width: self.value_width? };
        let same = Rows::with_shape(self.data, shape).is_some_and(|r| r.head == self.head);
        (self.key_value && same).then_some(shape)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Buffer `i` (one of the first five).
    fn buffer(&self, i: usize) -> &'a [u8] {
        let (start, end) = self.head[i];
        &self.data[start..end]
    }

    /// Row `i` of a binary column. Out-of-range offsets, which only bytes
    /// changed after they were checked could hold, read as empty.
    fn binary(&self, offsets: usize, data: usize, width: Option<usize>, i: usize) -> &'a [u8] {
        let range = if let Some(w) = width {
            i * w..(i + 1) * w
        } else {
            let off = self.buffer(offsets);
            u32_at(off, 4 * i) as usize..u32_at(off, 4 * (i + 1)) as usize
        };
        self.buffer(data).get(range).unwrap_or_default()
    }

    /// User key of row `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn key(&self, i: usize) -> &'a [u8] {
        self.binary(BUF_KEY_OFFSETS, BUF_KEY_DATA, self.key_width, i)
    }

    /// Trailer (`seqno << 8 | kind`) of row `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn trailer(&self, i: usize) -> u64 {
        u64_at(self.buffer(BUF_TRAILERS), 8 * i)
    }

    /// Value of row `i` (empty for a delete) of a key-value block; empty for
    /// a table block, whose values are read with [`Block::arrays`].
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn value(&self, i: usize) -> &'a [u8] {
        if !self.key_value {
            return &[];
        }
        self.binary(BUF_VALUE_OFFSETS, BUF_VALUE_DATA, self.value_width, i)
    }

    /// First row whose internal key is >= `(user_key, trailer)`, or `len()`.
    pub fn seek(&self, user_key: &[u8], trailer: u64) -> usize {
        self.seek_in(0..self.len, user_key, trailer)
    }

    /// Within rows `range`, the offset (from `range.start`) of the first row
    /// whose internal key is >= `(user_key, trailer)`, or `range.len()`.
    pub fn seek_in(&self, range: Range<usize>, user_key: &[u8], trailer: u64) -> usize {
        let (start, mut lo, mut hi) = (range.start, range.start, range.end.min(self.len));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.is_before(mid, user_key, trailer) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - start
    }

    /// Reads one byte of every cache line that a search of rows `range`
    /// and the read of its answer may touch: trailers, key bytes (through
    /// the key offsets unless fixed-width), and the values of a fixed-width
    /// value column or else its offsets. The loads do not depend on each other,
    /// so the CPU overlaps their misses, where the binary search that
    /// follows would take them one after another (measured with the other
    /// changes of commit c23e6a8: docs/BENCHMARKS.md, "Read path and learned
    /// index"). Safe Rust's stand-in for prefetch instructions; only
    /// worth it for a short range of a block that may be cold.
    pub fn warm_rows(&self, range: Range<usize>) {
        let end = range.end.min(self.len);
        if range.start >= end {
            return;
        }
        let mut acc = 0u8;
        let mut touch = |buf: &[u8], from: usize, to: usize| {
            let to = to.min(buf.len());
            if from < to {
                acc ^= (from..to).step_by(CACHE_LINE_BYTES).fold(buf[to - 1], |a, at| a ^ buf[at]);
            }
        };
        touch(self.buffer(BUF_TRAILERS), 8 * range.start, 8 * end);
        let (start, key_data) = (range.start, self.buffer(BUF_KEY_DATA));
        if let Some(w) = self.key_width {
            touch(key_data, start * w, end * w);
        } else {
            let offsets = self.buffer(BUF_KEY_OFFSETS);
            touch(offsets, 4 * start, 4 * end + 4);
            touch(key_data, u32_at(offsets, 4 * start) as usize, u32_at(offsets, 4 * end) as usize);
        }
        if self.key_value {
            match self.value_width {
                Some(w) => touch(self.buffer(BUF_VALUE_DATA), start * w, end * w),
                None => touch(self.buffer(BUF_VALUE_OFFSETS), 4 * start, 4 * end + 4),
            }
        }
        std::hint::black_box(acc);
    }

    /// Whether row `i` sorts before `(user_key, trailer)`. The trailer
    /// column is read only when the user keys are equal: in a search over
    /// distinct keys that saves a cache miss per step.
    fn is_before(&self, i: usize, user_key: &[u8], trailer: u64) -> bool {
        match compare_user_keys(self.key(i), user_key) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => self.trailer(i) > trailer,
        }
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
    let mut prev = 0usize;
    for i in 0..=rows {
        let v = u32_at(off, 4 * i) as usize;
        if (i == 0 && v != 0) || v < prev || v > data_len {
            return Err(format!("{what} offset {i} is {v}, out of order or range"));
        }
        prev = v;
    }
    if prev != data_len {
        return Err(format!("{what} offsets end at {prev}, data is {data_len} bytes"));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::{Kind, compare, pack_trailer};

    fn build(rows: &[(&[u8], u64, &[u8])]) -> Vec<u8> {
        let mut b = BlockBuilder::new();
        for (k, t, v) in rows {
            b.add(k, *t, v);
        }
        assert_eq!(b.len(), rows.len());
        b.finish()
    }

    fn sample() -> Vec<(Vec<u8>, u64, Vec<u8>)> {
        let mut rows = Vec::new();
        for i in 0..50u64 {
            let key = format!("key{i:03}").into_bytes();
            rows.push((key.clone(), pack_trailer(100 + i, Kind::Put), vec![i as u8; i as usize]));
            rows.push((key, pack_trailer(10 + i, Kind::Delete), Vec::new()));
        }
        rows
    }

    fn build_sample() -> Vec<u8> {
        let rows = sample();
        let refs: Vec<(&[u8], u64, &[u8])> =
            rows.iter().map(|(k, t, v)| (k.as_slice(), *t, v.as_slice())).collect();
        build(&refs)
    }

    #[test]
    fn rows_round_trip_and_buffers_are_aligned() {
        let rows = sample();
        let block = Block::decode(build_sample(), Path::new("b"), 0).expect("decodes");
        assert_eq!(block.len(), rows.len());
        for (i, (k, t, v)) in rows.iter().enumerate() {
            assert_eq!((block.key(i), block.trailer(i), block.value(i)), (&k[..], *t, &v[..]));
        }
        for i in 0..DATA_BLOCK_BUFFERS {
            assert_eq!(block.buffer_range(i).start % BUFFER_ALIGN_BYTES, 0);
        }
        // The sample's keys all have 6 bytes: written without offsets.
        assert!(block.buffer(BUF_KEY_OFFSETS).is_empty());
        assert_eq!(block.buffer(BUF_VALUE_OFFSETS).len(), 4 * (rows.len() + 1));
        assert!(block.approximate_bytes() > block.bytes().len());
    }

    #[test]
    fn fixed_and_variable_width_columns_round_trip() {
        let key =
            |i: usize, fixed: bool| if fixed { format!("k{i:04}") } else { format!("k{i}") }.into_bytes();
        let value = |i: usize, fixed: bool| if fixed { vec![i as u8; 16] } else { vec![i as u8; i % 7] };
        for (fixed_keys, fixed_values) in [(true, true), (true, false), (false, true), (false, false)] {
            let rows: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..300)
                .map(|i| (key(i, fixed_keys), pack_trailer(i as u64 + 1, Kind::Put), value(i, fixed_values)))
                .collect();
            let mut sorted = rows.clone();
            sorted.sort_by(|a, b| compare(&a.0, a.1, &b.0, b.1));
            let refs: Vec<(&[u8], u64, &[u8])> =
                sorted.iter().map(|(k, t, v)| (&k[..], *t, &v[..])).collect();
            let block = Block::decode(build(&refs), Path::new("b"), 0).expect("decodes");
            assert_eq!(block.buffer(BUF_KEY_OFFSETS).is_empty(), fixed_keys);
            assert_eq!(block.buffer(BUF_VALUE_OFFSETS).is_empty(), fixed_values);
            for (i, (k, t, v)) in sorted.iter().enumerate() {
                assert_eq!((block.key(i), block.trailer(i), block.value(i)), (&k[..], *t, &v[..]));
                assert_eq!(block.seek(k, *t), i);
                block.rows().warm_rows(i.saturating_sub(9)..i + 9);
            }
        }
    }

    #[test]
    fn a_fixed_width_column_that_does_not_divide_is_corruption() {
        let rows: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..3u64)
            .map(|i| (vec![b'a' + i as u8; 4], pack_trailer(i + 1, Kind::Put), vec![1; 8]))
            .collect();
        let refs: Vec<(&[u8], u64, &[u8])> = rows.iter().map(|(k, t, v)| (&k[..], *t, &v[..])).collect();
        let mut bytes = build(&refs);
        // Shorten the key data buffer's recorded length (directory entry 1)
        // by one byte: 11 bytes do not split into 3 keys.
        let len_at = BLOCK_HEADER_FIXED_BYTES + BUFFER_ENTRY_BYTES + 4;
        let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().expect("4 bytes"));
        bytes[len_at..len_at + 4].copy_from_slice(&(len - 1).to_le_bytes());
        let err = Block::decode(bytes, Path::new("b"), 0).expect_err("corrupt");
        assert!(err.to_string().contains("fixed-width key column"), "{err}");
    }

    #[test]
    fn seek_finds_first_entry_at_or_after_target() {
        let rows = sample();
        let block = Block::decode(build_sample(), Path::new("b"), 0).expect("decodes");
        let targets = [
            (&b"key000"[..], u64::MAX),
            (b"key000", 0),
            (b"key010", pack_trailer(110, Kind::Put)),
            (b"key010", pack_trailer(50, Kind::Put)),
            (b"key0105", 0),
            (b"a", 0),
            (b"z", 0),
        ];
        for (k, t) in targets {
            let want = rows.iter().position(|(rk, rt, _)| compare(rk, *rt, k, t).is_ge());
            assert_eq!(block.seek(k, t), want.unwrap_or(rows.len()), "{k:?} {t}");
        }
    }

    #[test]
    fn single_empty_row_block_decodes() {
        let bytes = build(&[(b"", pack_trailer(0, Kind::Delete), b"")]);
        let block = Block::decode(bytes, Path::new("b"), 0).expect("decodes");
        assert_eq!((block.key(0), block.value(0)), (&b""[..], &b""[..]));
    }

    #[test]
    fn damaged_structure_is_corruption_never_a_panic() {
        let good = build_sample();
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                // Flips in key or value bytes leave a well-formed block; any
                // other outcome must be a Corruption naming the block offset.
                match Block::decode(bad, Path::new("b"), 4096) {
                    Ok(block) => {
                        for r in 0..block.len() {
                            let _ = (block.key(r), block.trailer(r), block.value(r));
                        }
                    }
                    Err(err) => assert!(matches!(err, Error::Corruption { offset: 4096, .. })),
                }
            }
        }
        for len in 0..good.len() {
            assert!(Block::decode(good[..len].to_vec(), Path::new("b"), 0).is_err(), "len {len}");
        }
        assert!(Block::decode(Vec::new(), Path::new("b"), 0).is_err());
    }

    #[test]
    fn fits_guards_the_i32_limit() {
        let b = BlockBuilder::new();
        assert!(b.fits(10, 10));
        assert!(!b.fits(BLOCK_BYTES_MAX, 0));
        assert!(!b.fits(usize::MAX, usize::MAX));
    }
}
