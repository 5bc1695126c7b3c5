//! The row cache (optional, off by default): for a `(SST file, user key)`
//! pair, the newest version of the key that the file holds, so a repeated
//! point lookup skips the file's model, block cache and block search.
//!
//! Why keyed by file, as RocksDB's row cache is, and not by key alone (as
//! OmenDB's value cache was): an SST never changes, so an entry can never
//! go stale. A write or delete lands in the memtable, which every lookup
//! searches before any SST; when it is flushed or compacted it lives in a
//! *new* file, whose entries start empty, and the old file's entries are
//! simply never asked for again and age out. Invalidation is therefore
//! correct by construction instead of by racing writers against readers
//! that fill the cache from an older view. The price is that a hit still
//! walks the levels above the key's file (their bloom filters, a few tens
//! of nanoseconds each).
//!
//! An entry answers a lookup only at a snapshot that sees its version; an
//! older snapshot reads the SST as if there were no row cache.

use std::hash::{Hash, Hasher};

use bytes::Bytes;
use quick_cache::sync::Cache;
use quick_cache::{Equivalent, Weighter};

use crate::codec::internal::SeqNo;
use crate::striped::HitCounter;

/// Bytes charged per entry beyond its key and value: the cache's slot, the
/// key and value handles and their allocations' headers.
const ENTRY_OVERHEAD_BYTES: u64 = 96;

/// Expected average entry size, used only to size the cache's tables.
const EXPECTED_ENTRY_BYTES: u64 = 128;

/// An entry's key: the SST's file number (never reused) and the user key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowKey {
    file: u64,
    user_key: Bytes,
}

/// A borrowed [`RowKey`], so lookups do not allocate.
struct RowProbe<'a> {
    file: u64,
    user_key: &'a [u8],
}

// Both key forms must hash alike (quick_cache finds an entry by a probe's
// hash and then `Equivalent`).
impl Hash for RowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        RowProbe { file: self.file, user_key: &self.user_key }.hash(state);
    }
}

impl Hash for RowProbe<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.file);
        state.write(self.user_key);
    }
}

impl Equivalent<RowKey> for RowProbe<'_> {
    fn equivalent(&self, key: &RowKey) -> bool {
        self.file == key.file && self.user_key == key.user_key.as_ref()
    }
}

/// The newest version of a key in one file: its trailer (`seqno << 8 |
/// kind`) and value (empty for a delete).
#[derive(Debug, Clone)]
struct Row {
    trailer: u64,
    value: Bytes,
}

#[derive(Debug, Clone, Copy)]
struct RowWeighter;

impl Weighter<RowKey, Row> for RowWeighter {
    fn weight(&self, key: &RowKey, row: &Row) -> u64 {
        (key.user_key.len() + row.value.len()) as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// A byte-weighted cache of rows shared by every lookup of a database.
pub struct RowCache {
    cache: Cache<RowKey, Row, RowWeighter>,
    /// Striped: every lookup bumps one.
    counts: HitCounter,
}

impl std::fmt::Debug for RowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCache")
            .field("usage_bytes", &self.usage_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish_non_exhaustive()
    }
}

impl RowCache {
    /// A cache of about `capacity_bytes` (at least one byte).
    pub fn new(capacity_bytes: usize) -> RowCache {
        let capacity = capacity_bytes as u64;
        let items = (capacity / EXPECTED_ENTRY_BYTES).max(16) as usize;
        RowCache { cache: Cache::with_weighter(items, capacity, RowWeighter), counts: HitCounter::default() }
    }

    /// File `file`'s newest version of `user_key`, as `(trailer, value)`,
    /// if cached and visible at `seqno`. `None` means: read the file.
    pub fn get(&self, file: u64, user_key: &[u8], seqno: SeqNo) -> Option<(u64, Bytes)> {
        let row = self.cache.get(&RowProbe { file, user_key }).filter(|row| row.trailer >> 8 <= seqno);
        self.counts.record(row.is_some());
        row.map(|row| (row.trailer, row.value))
    }

    /// Records file `file`'s newest version of `user_key`. Only a lookup
    /// that saw every version of the file (its snapshot at or above the
    /// file's largest seqno) may call this; it is then the newest.
    pub fn insert(&self, file: u64, user_key: &[u8], trailer: u64, value: Bytes) {
        self.cache
            .insert(RowKey { file, user_key: Bytes::copy_from_slice(user_key) }, Row { trailer, value });
    }

    /// Lookups answered.
    pub fn hits(&self) -> u64 {
        self.counts.hits()
    }

    /// Lookups not answered (absent, or not visible at their snapshot).
    pub fn misses(&self) -> u64 {
        self.counts.misses()
    }

    /// Bytes held now.
    pub fn usage_bytes(&self) -> u64 {
        self.cache.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_per_file_and_visible_only_at_their_snapshot() {
        let cache = RowCache::new(1 << 20);
        assert!(cache.get(7, b"k", 100).is_none());
        cache.insert(7, b"k", 50 << 8 | 1, Bytes::from_static(b"v"));
        assert_eq!(cache.get(7, b"k", 100), Some((50 << 8 | 1, Bytes::from_static(b"v"))));
        assert_eq!(cache.get(7, b"k", 50).map(|r| r.1), Some(Bytes::from_static(b"v")));
        assert!(cache.get(7, b"k", 49).is_none(), "a snapshot older than the version reads the file");
        assert!(cache.get(8, b"k", 100).is_none(), "another file's answer is its own");
        assert!(cache.get(7, b"k2", 100).is_none());
        assert_eq!((cache.hits(), cache.misses()), (2, 4));
    }

    #[test]
    fn the_budget_is_kept() {
        let cache = RowCache::new(64 << 10);
        for i in 0..10_000u64 {
            cache.insert(1, &i.to_be_bytes(), 1 << 8 | 1, Bytes::from(vec![0u8; 100]));
        }
        assert!(cache.usage_bytes() <= 64 << 10, "{} bytes held", cache.usage_bytes());
    }
}
