//! An owned cursor over one tree of a memtable. It copies entries out in
//! chunks, so it holds no borrow of the skiplist and can live inside a
//! database iterator.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::{KeyParts, MemKey, Memtable};
use crate::ids::TreeId;

/// Entries copied by a cursor's first fill, doubled by each refill up to
/// [`CHUNK_ENTRIES_MAX`]: a short scan copies a few entries (with 1 KiB
/// values, a first chunk of 64 copied 64 KiB into every scan of YCSB E
/// that met a memtable, most of it past the scan's end: a third of its
/// time), a long one amortises the O(log n) re-seek.
const CHUNK_ENTRIES_MIN: usize = 4;
const CHUNK_ENTRIES_MAX: usize = 64;

/// Walks one tree of a memtable in one direction.
pub struct MemCursor {
    mem: Arc<Memtable>,
    tree: TreeId,
    forward: bool,
    buf: VecDeque<(MemKey, Bytes)>,
    exhausted: bool,
    /// Entries the next fill copies.
    chunk: usize,
}

impl MemCursor {
    /// A cursor positioned at the first entry at or after `(user_key,
    /// trailer)` (forward) or at or before it (reverse); `None` starts at
    /// the tree's first (forward) or last (reverse) entry.
    pub fn new(mem: Arc<Memtable>, tree: TreeId, forward: bool, start: Option<(&[u8], u64)>) -> Self {
        let mut c = MemCursor {
            mem,
            tree,
            forward,
            buf: VecDeque::new(),
            exhausted: false,
            chunk: CHUNK_ENTRIES_MIN,
        };
        match start {
            Some((user_key, trailer)) => c.refill(Bound::Included(KeyParts::new(tree, user_key, trailer))),
            None => c.refill(Bound::Unbounded),
        }
        c
    }

    fn refill(&mut self, from: Bound<KeyParts<'_>>) {
        self.mem.fill(self.tree, from, self.forward, self.chunk, &mut self.buf);
        if self.buf.len() < self.chunk {
            self.exhausted = true;
        }
        self.chunk = (self.chunk * 2).min(CHUNK_ENTRIES_MAX);
    }

    /// The current entry's key. Call only when `valid()`.
    pub fn key(&self) -> Option<&MemKey> {
        self.buf.front().map(|e| &e.0)
    }

    /// The current entry's value.
    pub fn value(&self) -> Option<&Bytes> {
        self.buf.front().map(|e| &e.1)
    }

    /// Moves one entry in the cursor's direction.
    pub fn step(&mut self) {
        let Some((last, _)) = self.buf.pop_front() else { return };
        if self.buf.is_empty() && !self.exhausted {
            self.refill(Bound::Excluded(last.parts()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::{Kind, pack_trailer};

    #[test]
    fn walks_both_directions_across_chunks() {
        let m = Arc::new(Memtable::new(1));
        for i in 0..300u32 {
            let k = Bytes::from(format!("{i:05}"));
            m.insert(0, &k, pack_trailer(u64::from(i) + 1, Kind::Put), &k).expect("insert");
        }
        m.insert(1, b"x", pack_trailer(999, Kind::Put), b"").expect("insert");
        let mut fwd = MemCursor::new(m.clone(), 0, true, None);
        let mut n = 0;
        while let Some(k) = fwd.key() {
            assert_eq!(k.user_key, Bytes::from(format!("{n:05}")));
            n += 1;
            fwd.step();
        }
        assert_eq!(n, 300);
        let mut rev = MemCursor::new(m.clone(), 0, false, Some((b"00150", u64::MAX)));
        let mut seen = Vec::new();
        while let Some(k) = rev.key() {
            seen.push(k.user_key.clone());
            rev.step();
        }
        assert_eq!(seen.len(), 150);
        assert_eq!(seen[0], Bytes::from_static(b"00149"));
    }
}
