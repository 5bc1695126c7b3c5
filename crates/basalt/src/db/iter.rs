//! Range iteration: a merge of cursors over the memtables and the SSTs of
//! one tree. For each user key the newest version visible at the read seqno
//! decides; deleted keys are skipped.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use super::ddl::TreeShared;
use super::{DbInner, SuperVersion};
use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::codec::key::prefix_successor;
use crate::error::Result;
use crate::ids::TreeId;
use crate::memtable::MemCursor;
use crate::sst::iter::SstIter;

/// Order of iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

/// A range of user keys with owned bounds.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// Copies the bounds of a caller's range.
pub(crate) fn owned_range<K: AsRef<[u8]>>(range: &impl RangeBounds<K>) -> KeyRange {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of keys starting with `prefix`.
pub(crate) fn prefix_range(prefix: &[u8]) -> KeyRange {
    let end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(prefix.to_vec()), end)
}

/// One source of versions, walking in the iterator's direction.
enum Cursor {
    Mem(MemCursor),
    Sst(SstIter),
}

impl Cursor {
    fn current(&self) -> Option<(&[u8], u64)> {
        match self {
            Cursor::Mem(c) => c.key().map(|k| (k.user_key.as_ref(), k.trailer)),
            Cursor::Sst(c) => c.valid().then(|| (c.user_key(), c.trailer())),
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Cursor::Mem(c) => c.value().map_or(&[], |v| v.as_ref()),
            Cursor::Sst(c) => c.value(),
        }
    }

    fn step(&mut self, forward: bool) -> Result<()> {
        match self {
            Cursor::Mem(c) => {
                c.step();
                Ok(())
            }
            Cursor::Sst(c) if forward => c.next(),
            Cursor::Sst(c) => c.prev(),
        }
    }
}

/// Iterator over `(key, value)` pairs of a range, at one seqno. It holds the
/// memtables and SSTs it reads, so flushes and deletions do not disturb it.
pub struct DbIterator {
    /// Keeps the memtables and SSTs being read alive.
    pin: Option<Arc<SuperVersion>>,
    /// Keeps the database (and its directory lock) alive while iterating,
    /// as snapshots do.
    db: Arc<DbInner>,
    /// The keyspace handle's shared state, so the keyspace cannot be
    /// dropped while it is iterated.
    _tree: Option<Arc<TreeShared>>,
    cursors: Vec<Cursor>,
    forward: bool,
    seqno: SeqNo,
    range: KeyRange,
    /// Set after the end or an error: the iterator yields nothing more.
    done: bool,
    /// An error met while positioning, reported by the first `next`.
    pending_error: Option<crate::Error>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("seqno", &self.seqno)
            .field("forward", &self.forward)
            .field("range", &self.range)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// Builds an iterator over `range` of `tree`.
pub(crate) fn new(
    inner: &Arc<DbInner>,
    tree: TreeId,
    range: KeyRange,
    direction: Direction,
    snapshot: Option<SeqNo>,
) -> DbIterator {
    let (seqno, sv) = inner.read_view(snapshot);
    let forward = direction == Direction::Forward;
    let mut it = DbIterator {
        pin: None,
        db: inner.clone(),
        _tree: None,
        cursors: Vec::new(),
        forward,
        seqno,
        range,
        done: false,
        pending_error: None,
    };
    if let Err(e) = inner.check_open().and_then(|()| it.open_cursors(inner, &sv, tree)) {
        it.pending_error = Some(e);
    }
    it.pin = Some(sv);
    it
}

impl DbIterator {
    /// The iterator, keeping a keyspace's handle state alive.
    pub(super) fn holding(self, tree: Arc<TreeShared>) -> Self {
        DbIterator { _tree: Some(tree), ..self }
    }

    fn open_cursors(&mut self, inner: &DbInner, sv: &SuperVersion, tree: TreeId) -> Result<()> {
        // Forward starts at the newest version of the lower bound; reverse
        // at the oldest version of the upper bound. Excluded bounds are
        // skipped by the range check in `next`.
        let start: Option<(Vec<u8>, u64)> = if self.forward {
            match &self.range.0 {
                Bound::Included(k) | Bound::Excluded(k) => Some((k.clone(), u64::MAX)),
                Bound::Unbounded => None,
            }
        } else {
            match &self.range.1 {
                Bound::Included(k) | Bound::Excluded(k) => Some((k.clone(), 0)),
                Bound::Unbounded => None,
            }
        };
        let start_ref = start.as_ref().map(|(k, t)| (k.as_slice(), *t));
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            self.cursors.push(Cursor::Mem(MemCursor::new(mem.clone(), tree, self.forward, start_ref)));
        }
        let Some(tree_version) = sv.version.tree(tree) else {
            return Err(crate::Error::InvalidArgument(format!("unknown tree {tree}")));
        };
        for (_, file) in tree_version.all_files() {
            if !self.file_overlaps(&file.smallest.user_key, &file.largest.user_key) {
                continue;
            }
            let reader = inner.sst_readers.get(tree, file, &inner.block_cache)?;
            let mut c = SstIter::new(reader);
            match (start_ref, self.forward) {
                (Some((k, t)), true) => c.seek(k, t)?,
                (Some((k, t)), false) => c.seek_for_prev(k, t)?,
                (None, true) => c.seek_to_first()?,
                (None, false) => c.seek_to_last()?,
            }
            self.cursors.push(Cursor::Sst(c));
        }
        Ok(())
    }

    fn file_overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        let below = match &self.range.1 {
            Bound::Included(k) => smallest > k.as_slice(),
            Bound::Excluded(k) => smallest >= k.as_slice(),
            Bound::Unbounded => false,
        };
        let above = match &self.range.0 {
            Bound::Included(k) => largest < k.as_slice(),
            Bound::Excluded(k) => largest <= k.as_slice(),
            Bound::Unbounded => false,
        };
        !below && !above
    }

    /// Whether `key` is past the far end of the range (iteration is over).
    fn past_end(&self, key: &[u8]) -> bool {
        if self.forward {
            match &self.range.1 {
                Bound::Included(k) => key > k.as_slice(),
                Bound::Excluded(k) => key >= k.as_slice(),
                Bound::Unbounded => false,
            }
        } else {
            match &self.range.0 {
                Bound::Included(k) => key < k.as_slice(),
                Bound::Excluded(k) => key <= k.as_slice(),
                Bound::Unbounded => false,
            }
        }
    }

    /// Whether `key` is the excluded start bound (skipped, not the end).
    fn at_excluded_start(&self, key: &[u8]) -> bool {
        let start = if self.forward { &self.range.0 } else { &self.range.1 };
        matches!(start, Bound::Excluded(k) if k.as_slice() == key)
    }

    /// The next user key in iteration order among all cursors.
    fn next_user_key(&self) -> Option<Bytes> {
        let mut best: Option<&[u8]> = None;
        for c in &self.cursors {
            if let Some((k, _)) = c.current() {
                let better = best.is_none_or(|b| if self.forward { k < b } else { k > b });
                if better {
                    best = Some(k);
                }
            }
        }
        best.map(Bytes::copy_from_slice)
    }

    /// Consumes every version of `key` from all cursors; returns the newest
    /// one visible at the read seqno as (trailer, value).
    fn take_versions(&mut self, key: &[u8]) -> Result<Option<(u64, Bytes)>> {
        let mut best: Option<(u64, Bytes)> = None;
        for c in &mut self.cursors {
            while let Some((k, trailer)) = c.current() {
                if k != key {
                    break;
                }
                let seqno = trailer >> 8;
                if seqno <= self.seqno && best.as_ref().is_none_or(|(t, _)| (*t >> 8) < seqno) {
                    best = Some((trailer, Bytes::copy_from_slice(c.value())));
                }
                c.step(self.forward)?;
            }
        }
        Ok(best)
    }

    fn advance(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        while let Some(key) = self.next_user_key() {
            if self.past_end(&key) {
                return Ok(None);
            }
            let newest = self.take_versions(&key)?;
            if self.at_excluded_start(&key) {
                continue;
            }
            if let Some((trailer, value)) = newest
                && matches!(unpack_trailer(trailer), Some((_, Kind::Put)))
            {
                return Ok(Some((key, value)));
            }
        }
        Ok(None)
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending_error.take() {
            self.done = true;
            return Some(Err(e));
        }
        if let Err(e) = self.db.check_open() {
            self.done = true;
            return Some(Err(e));
        }
        match self.advance() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
