//! An owned, bidirectional cursor over the entries of one SST. It holds the
//! reader and the current block, so stepping within a block is an index
//! increment. Crossing into a block of a memory-mapped file that the reader
//! may read in place (an uncompressed key-value block, checked once per
//! process) takes the block's bytes as a slice of the map, with no cache
//! lookup; other blocks come through the block cache.

use std::sync::Arc;

use super::block::{Block, MappedRows, Rows};
use super::reader::{Readahead, SstReader};
use crate::error::Result;

/// A cursor over an SST's entries in internal-key order. When it is valid,
/// `pos < block.len()`. A failed move leaves it invalid and returns the error.
#[derive(Debug)]
pub struct SstIter {
    reader: Arc<SstReader>,
    /// The current block and its index; `None` when the cursor is invalid.
    block: Option<(usize, Held)>,
    pos: usize,
    /// For a pass in order that reads each block once (compaction):
    /// blocks come from reads ahead, not the map or the block cache.
    ahead: Option<Readahead>,
    blocks: Blocks,
    /// The block after the current one, loaded to look at its first key
    /// ([`SstIter::next_block_starts_other_key`]); made current without
    /// another read when the cursor gets there.
    peeked: Option<(usize, Held)>,
}

/// Where a cursor takes the blocks it steps through from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// The block cache, each block an `Arc<Block>` (what table scans need:
    /// they read a block's columns as Arrow arrays).
    Cached,
    /// Where they lie in the file's map when the reader allows it (see
    /// [`SstReader::mapped_rows`]), else the block cache: for key-value
    /// reads.
    InPlace,
    /// As `Cached`, but a block not in the cache enters it only while the
    /// cache has room: for a table scan, which reads each block once and
    /// would otherwise push out every block point reads use (and, on a
    /// table larger than the cache, every block it read before it came
    /// back to it). RocksDB's `fill_cache = false`, except that an empty
    /// cache still fills.
    Scanned,
}

/// A block as the cursor holds it.
#[derive(Debug)]
enum Held {
    /// From the block cache (or read ahead).
    Cached(Arc<Block>),
    /// Read where it lies in the file's map.
    Mapped(MappedRows),
}

impl Held {
    fn rows(&self) -> Rows<'_> {
        match self {
            Held::Cached(block) => block.rows(),
            Held::Mapped(rows) => rows.rows(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Held::Cached(block) => block.len(),
            Held::Mapped(rows) => rows.len(),
        }
    }
}

impl SstIter {
    /// An unpositioned (invalid) cursor over `reader`, taking its blocks
    /// from `blocks`.
    pub fn new(reader: Arc<SstReader>, blocks: Blocks) -> SstIter {
        SstIter { reader, block: None, pos: 0, ahead: None, blocks, peeked: None }
    }

    /// A cursor for one pass in order over every block (compaction): see
    /// [`SstReader::read_block_ahead`].
    pub fn reading_ahead(reader: Arc<SstReader>) -> SstIter {
        SstIter {
            reader,
            block: None,
            pos: 0,
            ahead: Some(Readahead::default()),
            blocks: Blocks::Cached,
            peeked: None,
        }
    }

    /// The SST this cursor reads.
    pub fn reader(&self) -> &Arc<SstReader> {
        &self.reader
    }

    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.block.is_some()
    }

    /// Makes block `b` current, reusing it if it already is, and returns
    /// its row count. On error the cursor becomes invalid.
    fn load(&mut self, b: usize) -> Result<usize> {
        if let Some((cur, held)) = &self.block
            && *cur == b
        {
            return Ok(held.len());
        }
        self.block = None;
        if let Some((next, _)) = &self.peeked
            && *next == b
            && let Some((_, held)) = self.peeked.take()
        {
            let len = held.len();
            self.block = Some((b, held));
            return Ok(len);
        }
        let held = self.read(b)?;
        let len = held.len();
        self.block = Some((b, held));
        Ok(len)
    }

    /// Block `b`, read as this cursor reads blocks.
    fn read(&mut self, b: usize) -> Result<Held> {
        Ok(match &mut self.ahead {
            Some(ahead) => Held::Cached(self.reader.read_block_ahead(b, ahead)?),
            None if self.blocks == Blocks::InPlace => match self.reader.mapped_rows(b)? {
                Some(rows) => Held::Mapped(rows),
                None => Held::Cached(self.reader.read_block(b)?),
            },
            None if self.blocks == Blocks::Scanned => Held::Cached(self.reader.read_block_scanned(b)?),
            None => Held::Cached(self.reader.read_block(b)?),
        })
    }

    /// Whether the block after the current one starts with another user
    /// key than the current block's last row: then no later entry of this
    /// file holds that key. `None` on the file's last block (the file
    /// holds no later entry), or when invalid. Reads the next block, which
    /// the cursor then enters without reading it again.
    pub fn next_block_starts_other_key(&mut self) -> Result<Option<bool>> {
        let Some((b, held)) = &self.block else { return Ok(None) };
        let (b, last) = (*b, held.len() - 1);
        if b + 1 >= self.reader.block_count() {
            return Ok(None);
        }
        if self.peeked.as_ref().is_none_or(|(next, _)| *next != b + 1) {
            let next = self.read(b + 1)?;
            self.peeked = Some((b + 1, next));
        }
        let first = self.peeked.as_ref().map(|(_, next)| next.rows().key(0));
        let last = self.block.as_ref().map(|(_, held)| held.rows().key(last));
        Ok(Some(first != last))
    }

    /// Moves to the first entry of block `b`, or past the end if there is none.
    fn enter_forward(&mut self, b: usize) -> Result<()> {
        if b >= self.reader.block_count() {
            self.block = None;
            return Ok(());
        }
        self.load(b)?;
        self.pos = 0;
        Ok(())
    }

    /// Moves to the last entry of block `b`, or before the start if `None`.
    fn enter_backward_or_invalid(&mut self, b: Option<usize>) -> Result<()> {
        let Some(b) = b else {
            self.block = None;
            return Ok(());
        };
        self.pos = self.load(b)? - 1;
        Ok(())
    }

    /// Moves to the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.enter_forward(0)
    }

    /// Moves to the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
        let last = self.reader.block_count().checked_sub(1);
        self.enter_backward_or_invalid(last)
    }

    /// Moves to the first entry >= `(user_key, trailer)`, or past the end.
    pub fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        let Some(b) = self.reader.find_block(user_key, trailer) else {
            self.block = None;
            return Ok(());
        };
        let len = self.load(b)?;
        let pos = self.block.as_ref().map_or(len, |(_, held)| held.rows().seek(user_key, trailer));
        self.pos = pos;
        if pos == len {
            // Only if the fence is above the block's last entry.
            self.enter_forward(b + 1)?;
        }
        Ok(())
    }

    /// Moves to the last entry <= `(user_key, trailer)`, or before the start.
    pub fn seek_for_prev(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        self.seek(user_key, trailer)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if self.user_key() != user_key || self.trailer() != trailer {
            self.prev()?;
        }
        Ok(())
    }

    /// Moves to the next entry, or past the end. A no-op when invalid.
    pub fn next(&mut self) -> Result<()> {
        let Some((b, held)) = &self.block else {
            return Ok(());
        };
        if self.pos + 1 < held.len() {
            self.pos += 1;
            return Ok(());
        }
        let b = *b;
        self.enter_forward(b + 1)
    }

    /// Moves forward past `count` entries of the current block: to a later
    /// row of it, or, when that reaches the block's end, to the next
    /// block's first entry — what `count` calls of [`SstIter::next`] do,
    /// without a step per row. A no-op when invalid.
    pub fn skip_in_block(&mut self, count: usize) -> Result<()> {
        let Some((b, held)) = &self.block else {
            return Ok(());
        };
        if self.pos + count < held.len() {
            self.pos += count;
            return Ok(());
        }
        let b = *b;
        self.enter_forward(b + 1)
    }

    /// Moves to the previous entry, or before the start. A no-op when invalid.
    pub fn prev(&mut self) -> Result<()> {
        let Some((b, _)) = &self.block else {
            return Ok(());
        };
        if self.pos > 0 {
            self.pos -= 1;
            return Ok(());
        }
        let before = b.checked_sub(1);
        self.enter_backward_or_invalid(before)
    }

    /// User key of the current entry; empty when invalid.
    pub fn user_key(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |(_, held)| held.rows().key(self.pos))
    }

    /// Trailer of the current entry; 0 when invalid.
    pub fn trailer(&self) -> u64 {
        self.block.as_ref().map_or(0, |(_, held)| held.rows().trailer(self.pos))
    }

    /// Value of the current entry (of a key-value block); empty when
    /// invalid.
    pub fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |(_, held)| held.rows().value(self.pos))
    }

    /// User key of the current entry, sharing the block's bytes; empty
    /// when invalid.
    pub fn key_bytes(&self) -> bytes::Bytes {
        match &self.block {
            Some((_, Held::Cached(block))) => block.key_bytes(self.pos),
            Some((_, Held::Mapped(rows))) => rows.key_bytes(self.pos),
            None => bytes::Bytes::new(),
        }
    }

    /// Value of the current entry, sharing the block's bytes; empty when
    /// invalid.
    pub fn value_bytes(&self) -> bytes::Bytes {
        match &self.block {
            Some((_, Held::Cached(block))) => block.value_bytes(self.pos),
            Some((_, Held::Mapped(rows))) => rows.value_bytes(self.pos),
            None => bytes::Bytes::new(),
        }
    }

    /// The current block's index; `None` when invalid.
    pub fn block_index(&self) -> Option<usize> {
        self.block.as_ref().map(|(i, _)| *i)
    }

    /// The current block's rows and the row index in them; `None` when
    /// invalid.
    pub fn rows(&self) -> Option<(Rows<'_>, usize)> {
        self.block.as_ref().map(|(_, held)| (held.rows(), self.pos))
    }

    /// `Some(newest seqno)` when every row of the current block is a put of
    /// its own key ([`Rows::plain`], worked out once per block and file);
    /// `None`
    /// otherwise or when invalid.
    pub fn plain_rows(&self) -> Option<u64> {
        match &self.block {
            Some((b, Held::Cached(block))) => self.reader.plain_rows_cached(*b, block),
            Some((b, Held::Mapped(rows))) => self.reader.plain_rows_in_place(*b, &rows.rows()),
            None => None,
        }
    }

    /// The current block as the block cache holds it, and the row index in
    /// it: always there for a valid cursor of [`Blocks::Cached`], [`Blocks::Scanned`] or reading
    /// ahead; `None` when invalid or on a block read in place.
    pub fn current(&self) -> Option<(&Arc<Block>, usize)> {
        match &self.block {
            Some((_, Held::Cached(block))) => Some((block, self.pos)),
            _ => None,
        }
    }
}
