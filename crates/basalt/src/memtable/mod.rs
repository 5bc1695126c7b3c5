//! The memtable: recent writes of every tree, in a skiplist keyed by
//! (tree, user key, seqno descending) whose nodes hold their keys and
//! values in an arena (`skiplist.rs`). One writer (the group-commit leader,
//! or recovery) inserts while any number of readers search without locks.

mod cursor;
mod skiplist;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

pub use cursor::MemCursor;

use crate::codec::internal::{SeqNo, seek_trailer};
use crate::error::Result;
use crate::ids::TreeId;
use crate::range_del::{RangeTombstone, TombstoneSet};
use skiplist::{Inserter, KeyParts, SkipList};

/// Bytes charged per entry beyond its key and value, as an estimate before
/// the insert (a write group's room in the write buffer): a node's 32-byte
/// header, its tower (8 bytes a level; 2 levels on average, up to 24) and
/// its padding to 8 bytes — about 52 bytes on average. The charge after
/// the insert is the node's exact size.
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

/// An entry's key, owned: what a cursor hands out.
#[derive(Debug, Clone)]
pub struct MemKey {
    /// The tree written.
    pub tree: TreeId,
    /// The user key.
    pub user_key: Bytes,
    /// `seqno << 8 | kind`.
    pub trailer: u64,
}

impl MemKey {
    fn parts(&self) -> KeyParts<'_> {
        KeyParts::new(self.tree, &self.user_key, self.trailer)
    }
}

/// An entry borrowed from the memtable.
#[derive(Debug, Clone, Copy)]
pub struct MemEntry<'a> {
    /// The tree written.
    pub tree: TreeId,
    /// The user key.
    pub user_key: &'a [u8],
    /// `seqno << 8 | kind`.
    pub trailer: u64,
    /// The value (a table's row bytes; empty for deletes).
    pub value: &'a [u8],
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable")
            .field("wal_number", &self.wal_number)
            .field("entries", &self.len())
            .field("bytes", &self.approximate_bytes())
            .field("max_seqno", &self.max_seqno())
            .finish_non_exhaustive()
    }
}

/// Recent writes, searchable while they are inserted.
pub struct Memtable {
    list: SkipList,
    /// The WAL that holds this memtable's writes.
    wal_number: u64,
    /// Largest seqno inserted (0 when empty).
    max_seqno: AtomicU64,
    /// Range tombstones taken, by tree; few, so kept beside the list.
    range_dels: Mutex<RangeDels>,
    /// Whether `range_dels` holds any: a read checks this flag alone.
    has_range_dels: AtomicBool,
    /// Bytes charged for the range tombstones (their bounds and
    /// `ENTRY_OVERHEAD_BYTES` each), so that a memtable taking only range
    /// deletes still fills and is flushed.
    range_del_bytes: std::sync::atomic::AtomicUsize,
}

/// A memtable's range tombstones of each tree, with their set for search
/// built on first use after a change (as RocksDB caches a memtable's
/// fragmented tombstones).
#[derive(Debug, Default)]
struct RangeDels {
    by_tree: BTreeMap<TreeId, (Vec<RangeTombstone>, Option<Arc<TombstoneSet>>)>,
}

/// The memtable's writer: inserts through it never race (it holds the
/// skiplist's writer lock). Dropping it publishes the largest seqno.
pub struct MemInserter<'a> {
    inserter: Inserter<'a>,
    max_seqno: &'a AtomicU64,
    range_dels: (&'a Mutex<RangeDels>, &'a AtomicBool, &'a std::sync::atomic::AtomicUsize),
    newest: SeqNo,
}

impl MemInserter<'_> {
    /// Inserts one version (key and value are copied). No two inserts
    /// may have the same tree, key and trailer (seqnos are unique): the
    /// list would keep both, and a cursor stepping past one would skip
    /// the other.
    pub fn insert(&mut self, tree: TreeId, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<()> {
        self.inserter.insert(tree, user_key, trailer, value)?;
        self.newest = self.newest.max(trailer >> 8);
        Ok(())
    }

    /// Takes a range tombstone of `tree`. Readers that load the seqno
    /// published after it (release, after this returns) find it.
    pub fn insert_range_delete(&mut self, tree: TreeId, tombstone: RangeTombstone) {
        self.newest = self.newest.max(tombstone.seqno);
        let bytes =
            ENTRY_OVERHEAD_BYTES + tombstone.start.len() + tombstone.end.as_ref().map_or(0, Bytes::len);
        self.range_dels.2.fetch_add(bytes, AtomicOrdering::Relaxed);
        let mut dels = self.range_dels.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (list, set) = dels.by_tree.entry(tree).or_default();
        list.push(tombstone);
        *set = None;
        self.range_dels.1.store(true, AtomicOrdering::Release);
    }
}

impl Drop for MemInserter<'_> {
    fn drop(&mut self) {
        self.max_seqno.fetch_max(self.newest, AtomicOrdering::Relaxed);
    }
}

impl Memtable {
    /// An empty memtable whose writes go to WAL `wal_number`.
    pub fn new(wal_number: u64) -> Self {
        Memtable {
            list: SkipList::new(),
            wal_number,
            max_seqno: AtomicU64::new(0),
            range_dels: Mutex::default(),
            has_range_dels: AtomicBool::new(false),
            range_del_bytes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Number of the WAL holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// The writer, for a batch of inserts.
    pub fn inserter(&self) -> MemInserter<'_> {
        MemInserter {
            inserter: self.list.inserter(),
            max_seqno: &self.max_seqno,
            range_dels: (&self.range_dels, &self.has_range_dels, &self.range_del_bytes),
            newest: 0,
        }
    }

    /// Inserts one version.
    #[cfg(test)]
    pub fn insert(&self, tree: TreeId, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<()> {
        self.inserter().insert(tree, user_key, trailer, value)
    }

    /// The newest version of `user_key` with seqno <= `seqno`:
    /// `(trailer, value)`, or `None` if the memtable has no such version.
    pub fn get(&self, tree: TreeId, user_key: &[u8], seqno: SeqNo) -> Option<(u64, &[u8])> {
        // After a flush of a read-mostly database the active memtable is
        // empty, and a counter says so without a search.
        if self.list.len() == 0 {
            return None;
        }
        let probe = KeyParts::new(tree, user_key, seek_trailer(seqno));
        let e = self.list.seek(&probe, true)?;
        (e.tree == tree && e.user_key == user_key).then_some((e.trailer, e.value))
    }

    /// Bytes charged to this memtable: its nodes (headers, towers, keys and
    /// values). The arena maps more: each chunk's unused tail (a chunk is
    /// left when the next entry does not fit; with entries of half a
    /// megabyte the maps were up to twice the charge). The tails are never
    /// written, so they take address space, not resident memory.
    pub fn approximate_bytes(&self) -> usize {
        self.list.node_bytes() + self.range_del_bytes.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted (no entry and no range tombstone).
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0 && !self.has_range_dels()
    }

    /// Whether any range tombstone was taken.
    pub fn has_range_dels(&self) -> bool {
        self.has_range_dels.load(AtomicOrdering::Acquire)
    }

    /// The range tombstones of `tree`, if there are any.
    pub fn range_tombstones(&self, tree: TreeId) -> Option<Arc<TombstoneSet>> {
        if !self.has_range_dels() {
            return None;
        }
        let mut dels = self.range_dels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (list, set) = dels.by_tree.get_mut(&tree)?;
        Some(set.get_or_insert_with(|| Arc::new(TombstoneSet::new(list.clone()))).clone())
    }

    /// Every range tombstone taken, by tree (for the flush).
    pub fn all_range_tombstones(&self) -> Vec<(TreeId, RangeTombstone)> {
        if !self.has_range_dels() {
            return Vec::new();
        }
        let dels = self.range_dels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        dels.by_tree
            .iter()
            .flat_map(|(&tree, (list, _))| list.iter().map(move |t| (tree, t.clone())))
            .collect()
    }

    /// Largest seqno inserted.
    pub fn max_seqno(&self) -> SeqNo {
        self.max_seqno.load(AtomicOrdering::Relaxed)
    }

    /// Whether any entry belongs to `tree` (one seek).
    pub fn holds_tree(&self, tree: TreeId) -> bool {
        self.list.seek(&tree_start(tree), true).is_some_and(|e| e.tree == tree)
    }

    /// Entries in the memtable, every tree's.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Every entry in order (tree, user key, newest first), for flushing.
    pub fn entries(&self) -> impl Iterator<Item = MemEntry<'_>> + '_ {
        self.list.iter_from(None, true).map(|e| MemEntry {
            tree: e.tree,
            user_key: e.user_key,
            trailer: e.trailer,
            value: e.value,
        })
    }

    /// The entries of several memtables in one order (a flush of all of
    /// them into one file). Their seqnos never overlap, so no two entries
    /// are equal.
    pub fn merged_entries<'a>(mems: &[&'a Memtable]) -> Box<dyn Iterator<Item = MemEntry<'a>> + 'a> {
        // The common case, one memtable, needs no comparisons.
        if let [only] = mems {
            return Box::new(only.entries());
        }
        let mut sources: Vec<_> = mems.iter().map(|m| m.entries().peekable()).collect();
        Box::new(std::iter::from_fn(move || {
            let mut first: Option<(usize, KeyParts<'a>)> = None;
            for (i, source) in sources.iter_mut().enumerate() {
                let Some(e) = source.peek() else { continue };
                let key = KeyParts::new(e.tree, e.user_key, e.trailer);
                if first.as_ref().is_none_or(|(_, best)| key.cmp(best) == std::cmp::Ordering::Less) {
                    first = Some((i, key));
                }
            }
            first.and_then(|(i, _)| sources[i].next())
        }))
    }

    /// Copies up to `max` entries of `tree` from `from` on (forward) or
    /// back (reverse) into `out`, for cursors that must not borrow the
    /// memtable. The entries' keys and values share one buffer.
    fn fill(
        &self,
        tree: TreeId,
        from: Bound<KeyParts<'_>>,
        forward: bool,
        max: usize,
        out: &mut std::collections::VecDeque<(MemKey, Bytes)>,
    ) {
        let mut picked = Vec::with_capacity(max);
        if forward {
            let start = tree_start(tree);
            let (key, inclusive) = match from {
                Bound::Unbounded => (start, true),
                Bound::Included(k) => (k, true),
                Bound::Excluded(k) => (k, false),
            };
            picked
                .extend(self.list.iter_from(Some(&key), inclusive).take(max).take_while(|e| e.tree == tree));
        } else {
            let mut at = match from {
                Bound::Unbounded => self.list.seek_back(&tree_start(tree.saturating_add(1)), false),
                Bound::Included(k) => self.list.seek_back(&k, true),
                Bound::Excluded(k) => self.list.seek_back(&k, false),
            };
            while let Some(e) = at.filter(|e| e.tree == tree && picked.len() < max) {
                picked.push(e);
                at = self.list.seek_back(&KeyParts::new(e.tree, e.user_key, e.trailer), false);
            }
        }
        let mut buf = Vec::with_capacity(picked.iter().map(|e| e.user_key.len() + e.value.len()).sum());
        for e in &picked {
            buf.extend_from_slice(e.user_key);
            buf.extend_from_slice(e.value);
        }
        let buf = Bytes::from(buf);
        let mut at = 0;
        for e in picked {
            let key_end = at + e.user_key.len();
            let value_end = key_end + e.value.len();
            let key = MemKey { tree, user_key: buf.slice(at..key_end), trailer: e.trailer };
            out.push_back((key, buf.slice(key_end..value_end)));
            at = value_end;
        }
    }
}

/// The smallest key of `tree`: the empty user key at the newest seqno.
fn tree_start(tree: TreeId) -> KeyParts<'static> {
    KeyParts::new(tree, &[], u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::{Kind, pack_trailer};

    #[test]
    fn get_sees_newest_version_at_snapshot() {
        let m = Memtable::new(1);
        m.insert(0, b"k", pack_trailer(1, Kind::Put), b"v1").expect("insert");
        m.insert(0, b"k", pack_trailer(5, Kind::Delete), b"").expect("insert");
        m.insert(0, b"k", pack_trailer(9, Kind::Put), b"v9").expect("insert");
        m.insert(1, b"k", pack_trailer(3, Kind::Put), b"other tree").expect("insert");
        assert_eq!(m.get(0, b"k", 0), None);
        assert_eq!(m.get(0, b"k", 4).map(|e| e.1), Some(&b"v1"[..]));
        assert_eq!(m.get(0, b"k", 5).map(|e| e.0 & 0xff), Some(0));
        assert_eq!(m.get(0, b"k", 100).map(|e| e.1), Some(&b"v9"[..]));
        assert_eq!(m.get(1, b"k", 2), None);
        assert_eq!(m.get(0, b"j", 100), None);
        assert_eq!(m.get(2, b"k", 100), None);
        assert_eq!(m.max_seqno(), 9);
        assert!(m.approximate_bytes() > 0);
    }
}
