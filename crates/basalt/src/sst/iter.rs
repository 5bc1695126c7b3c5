//! An owned, bidirectional cursor over the entries of one SST. It holds the
//! reader and the current block, so stepping within a block is an index
//! increment and crossing a block boundary is one cache lookup.

use std::sync::Arc;

use super::block::Block;
use super::reader::{Readahead, SstReader};
use crate::error::Result;

/// A cursor over an SST's entries in internal-key order. When it is valid,
/// `pos < block.len()`. A failed move leaves it invalid and returns the error.
#[derive(Debug)]
pub struct SstIter {
    reader: Arc<SstReader>,
    /// The current block and its index; `None` when the cursor is invalid.
    block: Option<(usize, Arc<Block>)>,
    pos: usize,
    /// For a pass in order that reads each block once (compaction):
    /// blocks come from reads ahead, not the map or the block cache.
    ahead: Option<Readahead>,
}

impl SstIter {
    /// An unpositioned (invalid) cursor over `reader`.
    pub fn new(reader: Arc<SstReader>) -> SstIter {
        SstIter { reader, block: None, pos: 0, ahead: None }
    }

    /// A cursor for one pass in order over every block (compaction): see
    /// [`SstReader::read_block_ahead`].
    pub fn reading_ahead(reader: Arc<SstReader>) -> SstIter {
        SstIter { reader, block: None, pos: 0, ahead: Some(Readahead::default()) }
    }

    /// The SST this cursor reads.
    pub fn reader(&self) -> &Arc<SstReader> {
        &self.reader
    }

    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.block.is_some()
    }

    /// Makes block `b` current, reusing it if it already is. On error the
    /// cursor becomes invalid.
    fn load(&mut self, b: usize) -> Result<Arc<Block>> {
        if let Some((cur, block)) = &self.block
            && *cur == b
        {
            return Ok(Arc::clone(block));
        }
        self.block = None;
        let block = match &mut self.ahead {
            Some(ahead) => self.reader.read_block_ahead(b, ahead)?,
            None => self.reader.read_block(b)?,
        };
        self.block = Some((b, Arc::clone(&block)));
        Ok(block)
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
        self.pos = self.load(b)?.len() - 1;
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
        let block = self.load(b)?;
        let pos = block.seek(user_key, trailer);
        let len = block.len();
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
        let Some((b, block)) = &self.block else {
            return Ok(());
        };
        if self.pos + 1 < block.len() {
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
        let Some((b, block)) = &self.block else {
            return Ok(());
        };
        if self.pos + count < block.len() {
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
        self.block.as_ref().map_or(&[], |(_, block)| block.key(self.pos))
    }

    /// Trailer of the current entry; 0 when invalid.
    pub fn trailer(&self) -> u64 {
        self.block.as_ref().map_or(0, |(_, block)| block.trailer(self.pos))
    }

    /// Value of the current entry; empty when invalid.
    #[cfg(any(test, feature = "inspect"))]
    pub fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |(_, block)| block.value(self.pos))
    }

    /// User key of the current entry, sharing the block's bytes; empty
    /// when invalid.
    pub fn key_bytes(&self) -> bytes::Bytes {
        self.block.as_ref().map_or_else(bytes::Bytes::new, |(_, block)| block.key_bytes(self.pos))
    }

    /// Value of the current entry, sharing the block's bytes; empty when
    /// invalid.
    pub fn value_bytes(&self) -> bytes::Bytes {
        self.block.as_ref().map_or_else(bytes::Bytes::new, |(_, block)| block.value_bytes(self.pos))
    }

    /// The current block and position, for callers that read columns
    /// directly; `None` when invalid.
    pub fn block_index(&self) -> Option<usize> {
        self.block.as_ref().map(|(i, _)| *i)
    }

    /// The current block and the row index in it.
    pub fn current(&self) -> Option<(&Arc<Block>, usize)> {
        self.block.as_ref().map(|(_, block)| (block, self.pos))
    }
}
