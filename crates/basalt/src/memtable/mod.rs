//! The memtable: recent writes of every tree, in a concurrent skiplist keyed
//! by (tree, user key, seqno descending). One writer (the group-commit
//! leader) inserts while any number of readers search without locks.

mod cursor;

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

pub use cursor::MemCursor;

use crate::codec::internal::{SeqNo, key_prefix, seek_trailer};
use crate::ids::TreeId;

/// Bytes charged per entry beyond its key and value: the skiplist node with
/// its tower, the key struct and the value handle.
pub const ENTRY_OVERHEAD_BYTES: usize = 96;

/// A skiplist key: tree, user key, trailer (`seqno << 8 | kind`).
#[derive(Debug, Clone)]
pub struct MemKey {
    /// The tree written.
    pub tree: TreeId,
    /// The user key's first 8 bytes as a big-endian number ([`key_prefix`](crate::codec::internal::key_prefix)),
    /// kept in the node: most comparisons of a skiplist search end on it,
    /// without following `user_key` to its bytes (in a profile of 1M
    /// random 8-byte-key inserts, `memcmp` fell from 20% to 5%; the node
    /// visits' own misses remain and the load time moved within noise).
    prefix: u64,
    /// The user key.
    pub user_key: Bytes,
    /// `seqno << 8 | kind`.
    pub trailer: u64,
}

/// A borrowed view of a key, so lookups need not allocate a `MemKey`.
pub(crate) trait KeyView {
    fn parts(&self) -> (TreeId, u64, &[u8], u64);
}

impl KeyView for MemKey {
    fn parts(&self) -> (TreeId, u64, &[u8], u64) {
        (self.tree, self.prefix, &self.user_key, self.trailer)
    }
}

impl MemKey {
    /// The key of one version.
    pub fn new(tree: TreeId, user_key: Bytes, trailer: u64) -> Self {
        MemKey { tree, prefix: key_prefix(&user_key), user_key, trailer }
    }
}

/// A probe key for searches.
pub(crate) struct Probe<'a> {
    tree: TreeId,
    prefix: u64,
    user_key: &'a [u8],
    trailer: u64,
}

impl<'a> Probe<'a> {
    pub(crate) fn new(tree: TreeId, user_key: &'a [u8], trailer: u64) -> Self {
        Probe { tree, prefix: key_prefix(user_key), user_key, trailer }
    }
}

impl KeyView for Probe<'_> {
    fn parts(&self) -> (TreeId, u64, &[u8], u64) {
        (self.tree, self.prefix, self.user_key, self.trailer)
    }
}

impl Ord for dyn KeyView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        let (at, ap, ak, atr) = self.parts();
        let (bt, bp, bk, btr) = other.parts();
        at.cmp(&bt).then(ap.cmp(&bp)).then_with(|| ak.cmp(bk)).then_with(|| btr.cmp(&atr))
    }
}

impl PartialOrd for dyn KeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn KeyView + '_ {}

impl<'a> Borrow<dyn KeyView + 'a> for MemKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self as &dyn KeyView).cmp(other as &dyn KeyView)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for MemKey {}

/// Recent writes, searchable while they are inserted.
#[derive(Debug)]
pub struct Memtable {
    map: SkipMap<MemKey, Bytes>,
    bytes: AtomicUsize,
    /// The WAL that holds this memtable's writes.
    wal_number: u64,
    /// Largest seqno inserted (0 when empty).
    max_seqno: AtomicU64,
}

impl Memtable {
    /// An empty memtable whose writes go to WAL `wal_number`.
    pub fn new(wal_number: u64) -> Self {
        Memtable { map: SkipMap::new(), bytes: AtomicUsize::new(0), wal_number, max_seqno: AtomicU64::new(0) }
    }

    /// Number of the WAL holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Inserts one version. Only the group-commit leader (or recovery) calls
    /// this, so inserts never race each other.
    pub fn insert(&self, tree: TreeId, user_key: Bytes, trailer: u64, value: Bytes) {
        let charge = user_key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        self.map.insert(MemKey::new(tree, user_key, trailer), value);
        self.bytes.fetch_add(charge, AtomicOrdering::Relaxed);
        self.max_seqno.fetch_max(trailer >> 8, AtomicOrdering::Relaxed);
    }

    /// The newest version of `user_key` with seqno <= `seqno`:
    /// `(trailer, value)`, or `None` if the memtable has no such version.
    pub fn get(&self, tree: TreeId, user_key: &[u8], seqno: SeqNo) -> Option<(u64, Bytes)> {
        // A search pins an epoch (a fence); after a flush of a read-mostly
        // database the active memtable is empty, and a counter says so.
        if self.map.is_empty() {
            return None;
        }
        let probe = Probe::new(tree, user_key, seek_trailer(seqno));
        let entry = self.map.lower_bound(Bound::Included(&probe as &dyn KeyView))?;
        let key = entry.key();
        (key.tree == tree && key.user_key.as_ref() == user_key).then(|| (key.trailer, entry.value().clone()))
    }

    /// Bytes charged to this memtable.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Largest seqno inserted.
    pub fn max_seqno(&self) -> SeqNo {
        self.max_seqno.load(AtomicOrdering::Relaxed)
    }

    /// Whether any entry belongs to `tree` (one seek).
    pub fn holds_tree(&self, tree: TreeId) -> bool {
        let tree_start = Probe::new(tree, &[], u64::MAX);
        self.map
            .lower_bound(Bound::Included(&tree_start as &dyn KeyView))
            .is_some_and(|e| e.key().tree == tree)
    }

    /// Entries in the memtable, every tree's.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Every entry in order (tree, user key, newest first), for flushing.
    pub fn entries(&self) -> impl Iterator<Item = (MemKey, Bytes)> + '_ {
        self.map.iter().map(|e| (e.key().clone(), e.value().clone()))
    }

    /// Copies up to `max` entries of `tree` after `from` (forward) or before
    /// it (reverse) into `out`, for cursors that must not borrow the map.
    pub(crate) fn fill(
        &self,
        tree: TreeId,
        from: Bound<&dyn KeyView>,
        forward: bool,
        max: usize,
        out: &mut std::collections::VecDeque<(MemKey, Bytes)>,
    ) {
        let tree_start = Probe::new(tree, &[], u64::MAX);
        if forward {
            let from = match from {
                Bound::Unbounded => Bound::Included(&tree_start as &dyn KeyView),
                b => b,
            };
            for e in self.map.range::<dyn KeyView, _>((from, Bound::Unbounded)).take(max) {
                if e.key().tree != tree {
                    break;
                }
                out.push_back((e.key().clone(), e.value().clone()));
            }
        } else {
            let next_tree = Probe::new(tree.saturating_add(1), &[], u64::MAX);
            let to = match from {
                Bound::Unbounded => Bound::Excluded(&next_tree as &dyn KeyView),
                b => b,
            };
            for e in self.map.range::<dyn KeyView, _>((Bound::Unbounded, to)).rev().take(max) {
                if e.key().tree != tree {
                    break;
                }
                out.push_back((e.key().clone(), e.value().clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::{Kind, pack_trailer};

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn get_sees_newest_version_at_snapshot() {
        let m = Memtable::new(1);
        m.insert(0, b("k"), pack_trailer(1, Kind::Put), b("v1"));
        m.insert(0, b("k"), pack_trailer(5, Kind::Delete), b(""));
        m.insert(0, b("k"), pack_trailer(9, Kind::Put), b("v9"));
        m.insert(1, b("k"), pack_trailer(3, Kind::Put), b("other tree"));
        assert_eq!(m.get(0, b"k", 0), None);
        assert_eq!(m.get(0, b"k", 4).map(|e| e.1), Some(b("v1")));
        assert_eq!(m.get(0, b"k", 5).map(|e| e.0 & 0xff), Some(0));
        assert_eq!(m.get(0, b"k", 100).map(|e| e.1), Some(b("v9")));
        assert_eq!(m.get(1, b"k", 2), None);
        assert_eq!(m.get(0, b"j", 100), None);
        assert_eq!(m.get(2, b"k", 100), None);
        assert_eq!(m.max_seqno(), 9);
        assert!(m.approximate_bytes() > 0);
    }
}
