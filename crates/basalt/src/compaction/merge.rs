//! Merges SST cursors into one stream in internal-key order (user key
//! ascending, newest first), with a binary heap over the cursors' heads.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::codec::internal::compare;
use crate::error::Result;
use crate::sst::SstIter;

struct Head {
    cursor: usize,
    key: Vec<u8>,
    trailer: u64,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so the smallest key is on top;
        // ties (impossible between files of one tree) go to the lower index.
        compare(&other.key, other.trailer, &self.key, self.trailer).then(other.cursor.cmp(&self.cursor))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// A forward merge of SST cursors.
pub struct MergedSsts {
    cursors: Vec<SstIter>,
    heap: BinaryHeap<Head>,
}

impl MergedSsts {
    /// Positions every cursor at its first entry.
    pub fn new(mut cursors: Vec<SstIter>) -> Result<MergedSsts> {
        let mut heap = BinaryHeap::with_capacity(cursors.len());
        for (i, c) in cursors.iter_mut().enumerate() {
            c.seek_to_first()?;
            if c.valid() {
                heap.push(Head { cursor: i, key: c.user_key().to_vec(), trailer: c.trailer() });
            }
        }
        Ok(MergedSsts { cursors, heap })
    }

    /// The smallest entry, as (user key, trailer, value), if any.
    pub fn peek(&self) -> Option<(&[u8], u64, &[u8])> {
        let h = self.heap.peek()?;
        Some((&h.key, h.trailer, self.cursors[h.cursor].value()))
    }

    /// The cursor holding the smallest entry (for column access).
    pub fn peek_cursor(&self) -> Option<&SstIter> {
        self.heap.peek().map(|h| &self.cursors[h.cursor])
    }

    /// Moves past the smallest entry.
    pub fn advance(&mut self) -> Result<()> {
        let Some(mut head) = self.heap.pop() else { return Ok(()) };
        let c = &mut self.cursors[head.cursor];
        c.next()?;
        if c.valid() {
            head.key.clear();
            head.key.extend_from_slice(c.user_key());
            head.trailer = c.trailer();
            self.heap.push(head);
        }
        Ok(())
    }
}
