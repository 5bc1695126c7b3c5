//! The shared block cache: decoded (checksummed, decompressed) SST blocks
//! keyed by `(file number, block offset)` and weighed by their bytes.
//!
//! Blocks are decoded before they are inserted, so a hit costs no checksum
//! or decompression work, and the byte budget counts what is really held in
//! memory. Concurrent misses on one key load it once; the others wait.

use std::sync::Arc;

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::error::Result;
use crate::sst::block::Block;
use crate::striped::HitCounter;

/// Cache key: the SST's file number and the block's offset in it. File
/// numbers are never reused, so a key never names two different blocks.
pub type BlockKey = (u64, u64);

/// Expected average block size, used only to size the cache's tables.
const EXPECTED_BLOCK_BYTES: u64 = 16 << 10;

/// Memory of a cache entry besides its block: the key, the `Arc`'s
/// counts and pointer, and the cache's own slot (an estimate).
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// The share of the budget a scan's blocks may fill (see
/// [`BlockCache::get_or_load_without_eviction`]).
const SCAN_FILL_SHARE: f64 = 0.9;

#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<BlockKey, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &BlockKey, block: &Arc<Block>) -> u64 {
        // Never zero (zero-weight items would never be evicted): a mapped
        // block holds little but its directory, so the entry's own memory
        // counts too.
        (block.approximate_bytes() + ENTRY_OVERHEAD_BYTES) as u64
    }
}

/// A sharded, byte-weighted cache of decoded blocks shared by every SST
/// reader of a database.
pub struct BlockCache {
    cache: Cache<BlockKey, Arc<Block>, BlockWeighter>,
    capacity_bytes: u64,
    /// Striped: every lookup bumps one.
    counts: HitCounter,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity_bytes)
            .field("usage_bytes", &self.usage_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish_non_exhaustive()
    }
}

impl BlockCache {
    /// A cache holding up to about `capacity_bytes` of blocks. A capacity of
    /// zero caches nothing: every lookup loads.
    pub fn new(capacity_bytes: usize) -> BlockCache {
        let capacity = capacity_bytes as u64;
        let items = (capacity / EXPECTED_BLOCK_BYTES).max(16) as usize;
        BlockCache {
            cache: Cache::with_weighter(items, capacity, BlockWeighter),
            capacity_bytes: capacity,
            counts: HitCounter::default(),
        }
    }

    /// The cached block for `key`, or the one `load` returns, which is then
    /// cached. A failed load caches nothing and returns its error.
    pub fn get_or_load(&self, key: BlockKey, load: impl FnOnce() -> Result<Block>) -> Result<Arc<Block>> {
        // The plain lookup is much cheaper than get_or_insert_with's
        // placeholder protocol, and hits are the common case.
        if let Some(block) = self.cache.get(&key) {
            self.counts.record(true);
            return Ok(block);
        }
        let mut loaded = false;
        let block = self.cache.get_or_insert_with(&key, || {
            loaded = true;
            load().map(Arc::new)
        })?;
        self.counts.record(!loaded);
        Ok(block)
    }

    /// The cached block for `key`, or the one `load` returns, which is
    /// cached only if the cache holds less than [`SCAN_FILL_SHARE`] of its
    /// budget: a scan's blocks fill free room and never evict. (Concurrent
    /// misses on one key may each load it: scans rarely share blocks.)
    pub fn get_or_load_without_eviction(
        &self,
        key: BlockKey,
        load: impl FnOnce() -> Result<Block>,
    ) -> Result<Arc<Block>> {
        if let Some(block) = self.cache.get(&key) {
            self.counts.record(true);
            return Ok(block);
        }
        let block = Arc::new(load()?);
        self.counts.record(false);
        let weight = BlockWeighter.weight(&key, &block);
        // Below the budget by a margin: the cache is split into shards of
        // equal budgets, and a full shard would evict.
        if (self.cache.weight() + weight) as f64 <= self.capacity_bytes as f64 * SCAN_FILL_SHARE {
            self.cache.insert(key, block.clone());
        }
        Ok(block)
    }

    /// The cached block for `key`, if any; counts as a hit or a miss.
    #[cfg(test)]
    pub fn get(&self, key: BlockKey) -> Option<Arc<Block>> {
        let block = self.cache.get(&key);
        self.counts.record(block.is_some());
        block
    }

    /// Drops every block of `file_number` (an SST that was deleted). It
    /// visits the whole cache, which is fine at the rate SSTs are deleted;
    /// skipping it would be correct too, as the blocks would age out.
    pub fn evict_file(&self, file_number: u64) {
        self.cache.retain(|&(file, _), _| file != file_number);
    }

    /// Lookups served from the cache.
    pub fn hits(&self) -> u64 {
        self.counts.hits()
    }

    /// Lookups that had to load.
    pub fn misses(&self) -> u64 {
        self.counts.misses()
    }

    /// Bytes of blocks held now.
    pub fn usage_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    #[cfg(test)]
    /// Blocks held now.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when no block is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::error::Error;
    use crate::sst::block::BlockBuilder;

    fn block(value_bytes: usize) -> Block {
        let mut b = BlockBuilder::new();
        b.add(b"k", 1 << 8 | 1, &vec![7u8; value_bytes]);
        Block::decode(b.finish(), Path::new("c"), 0).expect("block")
    }

    #[test]
    fn hits_and_misses_are_counted_and_loads_happen_once() {
        let cache = BlockCache::new(1 << 20);
        let mut loads = 0;
        for _ in 0..3 {
            let b = cache
                .get_or_load((1, 0), || {
                    loads += 1;
                    Ok(block(100))
                })
                .expect("loads");
            assert_eq!(b.value(0).len(), 100);
        }
        assert_eq!((loads, cache.hits(), cache.misses()), (1, 2, 1));
        assert!(cache.usage_bytes() >= 100);
        assert!(cache.get((1, 1)).is_none());
        assert_eq!(cache.misses(), 2);
    }

    #[test]
    fn failed_loads_are_not_cached() {
        let cache = BlockCache::new(1 << 20);
        let err = cache.get_or_load((1, 0), || Err(Error::corruption("f", 0, "bad"))).expect_err("fails");
        assert!(err.is_corruption());
        assert!(cache.is_empty());
        assert!(cache.get_or_load((1, 0), || Ok(block(1))).is_ok());
    }

    #[test]
    fn usage_stays_near_capacity_and_files_can_be_evicted() {
        let cache = BlockCache::new(256 << 10);
        for i in 0..200u64 {
            cache.get_or_load((i % 2, i * 4096), || Ok(block(4000))).expect("loads");
        }
        assert!(cache.usage_bytes() <= cache.capacity_bytes() * 11 / 10, "{cache:?}");
        assert!(!cache.is_empty());
        cache.evict_file(0);
        cache.evict_file(1);
        assert_eq!(cache.len(), 0);
    }

    /// Issue 65: a scan's blocks fill an empty cache but never push out
    /// what it holds, however many it reads; its hits still count.
    #[test]
    fn scanned_blocks_fill_free_room_and_never_evict() {
        let cache = BlockCache::new(256 << 10);
        for i in 0..200u64 {
            cache.get_or_load_without_eviction((1, i * 4096), || Ok(block(4000))).expect("loads");
        }
        let filled = cache.len();
        assert!(filled > 20 && cache.usage_bytes() <= cache.capacity_bytes(), "{cache:?}");
        // The first blocks stayed: a second pass finds them.
        let before = cache.hits();
        for i in 0..10u64 {
            cache.get_or_load_without_eviction((1, i * 4096), || Ok(block(4000))).expect("loads");
        }
        assert_eq!(cache.hits() - before, 10);
        // Blocks point reads cached stay through any scan.
        let cache = BlockCache::new(256 << 10);
        for i in 0..30u64 {
            cache.get_or_load((2, i * 4096), || Ok(block(4000))).expect("loads");
        }
        assert_eq!(cache.len(), 30);
        for i in 0..500u64 {
            cache.get_or_load_without_eviction((3, i * 4096), || Ok(block(4000))).expect("loads");
        }
        for i in 0..30u64 {
            assert!(
                cache.get((2, i * 4096)).is_some(),
                "block {i} of the point reads was evicted: {cache:?}"
            );
        }
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let cache = BlockCache::new(0);
        for _ in 0..2 {
            cache.get_or_load((1, 0), || Ok(block(10))).expect("loads");
        }
        assert_eq!(cache.misses(), 2);
        assert_eq!(cache.usage_bytes(), 0);
    }
}
