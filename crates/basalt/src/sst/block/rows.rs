//! A block's rows as a point lookup reads them, borrowed: from a cached
//! block, or where the block lies in a memory map.

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use super::{CACHE_LINE_BYTES, HEADER_BYTES, align_up, column_width, read_directory_with, u32_at, u64_at};
use crate::codec::internal::compare_user_keys;
use crate::sst::format::{
    BUF_KEY_DATA, BUF_KEY_OFFSETS, BUF_TRAILERS, BUF_VALUE_DATA, BUF_VALUE_OFFSETS, DATA_BLOCK_BUFFERS,
};

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
    pub(super) data: &'a [u8],
    pub(super) len: usize,
    pub(super) head: [(usize, usize); DATA_BLOCK_BUFFERS],
    pub(super) key_width: Option<usize>,
    pub(super) value_width: Option<usize>,
    pub(super) key_value: bool,
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

    /// `Some(newest seqno)` when every row is a put and no two rows hold
    /// the same user key; `None` otherwise. Rows sort by user key, so
    /// distinct means no two neighbours are equal. Runs once per block on a
    /// scan's first touch: the trailer column is folded in one pass and a
    /// fixed-width key column compared slice by slice, with no per-row
    /// offset reads or kind decoding (the per-row version took a quarter
    /// of a first table scan).
    pub fn plain(&self) -> Option<u64> {
        let put = crate::codec::internal::Kind::Put as u64;
        let (newest, other_kinds) = self
            .buffer(BUF_TRAILERS)
            .chunks_exact(8)
            .map(|t| u64::from_le_bytes(t.try_into().unwrap_or_default()))
            .fold((0, 0), |(newest, other), t| (newest.max(t >> 8), other | ((t & 0xff) ^ put)));
        if other_kinds != 0 || self.buffer(BUF_TRAILERS).len() != 8 * self.len {
            return None;
        }
        let repeated = match self.key_width {
            Some(w) if w > 0 => {
                let keys = self.buffer(BUF_KEY_DATA);
                let keys = &keys[..(w * self.len).min(keys.len())];
                keys.chunks_exact(w).zip(keys[w.min(keys.len())..].chunks_exact(w)).any(|(a, b)| a == b)
            }
            // Every key empty: more than one row repeats it.
            Some(_) => self.len > 1,
            None if self.len < 2 => false,
            None => {
                let (offsets, keys) = (self.buffer(BUF_KEY_OFFSETS), self.buffer(BUF_KEY_DATA));
                let key = |i: usize| {
                    keys.get(u32_at(offsets, 4 * i) as usize..u32_at(offsets, 4 * (i + 1)) as usize)
                        .unwrap_or_default()
                };
                // Neighbouring keys of a table (encoded primary keys) mostly
                // differ in their last bytes: comparing the last eight as a
                // number settles most pairs without a call to `memcmp`.
                let tail = |k: &[u8]| k.last_chunk::<8>().map(|t| u64::from_ne_bytes(*t));
                let mut prev = key(0);
                (1..self.len).any(|i| {
                    let cur = key(i);
                    let same = cur.len() == prev.len() && tail(cur) == tail(prev) && cur == prev;
                    prev = cur;
                    same
                })
            }
        };
        (!repeated).then_some(newest)
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
    /// changes of commit c23e6a8: docs/BENCHMARKS-history.md, "Read path and learned
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
                // The first line of each row's value: a wider value is
                // read by the caller from its start, and touching all of
                // it for every row of the window (16 lines a row for 1 KiB
                // values) took a fifth of a YCSB C lookup.
                Some(w) if w > CACHE_LINE_BYTES => {
                    let values = self.buffer(BUF_VALUE_DATA);
                    acc ^= (start..end).filter_map(|i| values.get(i * w)).fold(0, |a, b| a ^ b);
                }
                Some(w) => touch(self.buffer(BUF_VALUE_DATA), start * w, end * w),
                None => touch(self.buffer(BUF_VALUE_OFFSETS), 4 * start, 4 * end + 4),
            }
        }
        std::hint::black_box(acc);
    }

    /// The first row of `rows` whose key fails `passes`, or `rows.end`:
    /// keys ascend in a block, so for a bound (a key below another source's,
    /// below a range's end) the rows that pass come first, and a binary
    /// search finds where they stop.
    pub fn first_failing(&self, rows: Range<usize>, passes: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (rows.start, rows.end.min(self.len));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if passes(self.key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
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

/// A key-value block read where it lies in a memory map, held by an
/// iterator: the block's bytes as a slice of the map (one reference count
/// for the block, none per row, no block-cache lookup) and where its
/// columns lie, taken from [`Rows`] the reader checked.
#[derive(Debug)]
pub struct MappedRows {
    bytes: Bytes,
    len: usize,
    head: [(usize, usize); DATA_BLOCK_BUFFERS],
    key_width: Option<usize>,
    value_width: Option<usize>,
}

impl MappedRows {
    /// `rows`, which lie in `map`, held with a share of the map.
    ///
    /// # Panics
    /// If `rows` do not lie in `map` (the reader makes them from it).
    pub fn new(map: &Bytes, rows: &Rows<'_>) -> MappedRows {
        MappedRows {
            bytes: map.slice_ref(rows.data),
            len: rows.len,
            head: rows.head,
            key_width: rows.key_width,
            value_width: rows.value_width,
        }
    }

    /// The rows, borrowed.
    pub fn rows(&self) -> Rows<'_> {
        Rows {
            data: &self.bytes,
            len: self.len,
            head: self.head,
            key_width: self.key_width,
            value_width: self.value_width,
            key_value: true,
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// User key of row `i`, sharing the map.
    pub fn key_bytes(&self, i: usize) -> Bytes {
        self.bytes.slice_ref(self.rows().key(i))
    }

    /// Value of row `i`, sharing the map.
    pub fn value_bytes(&self, i: usize) -> Bytes {
        self.bytes.slice_ref(self.rows().value(i))
    }
}
