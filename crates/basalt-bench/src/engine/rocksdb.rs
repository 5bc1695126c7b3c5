//! RocksDB through rust-rocksdb, tuned as seed 004 tuned it (10-bit bloom
//! filters, 16 KiB blocks, index and filter blocks in the block cache with
//! L0's pinned — partitioned, as RocksDB advises when they are cached —,
//! 256 MiB memtables, LZ4 with ZSTD at the bottom level) except
//! that the block cache is the shared budget instead of 512 MB. WAL on,
//! `sync = false`; settle flushes the memtables and waits for compactions.

use std::path::Path;

use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DB, DBCompressionType, Options, ReadOptions,
    WaitForCompactOptions, WriteBatch, WriteOptions,
};

use super::{Config, Engine, Reader, Result, Row};

/// An open RocksDB database.
pub struct RocksEngine {
    db: DB,
    // Owned here so the cache outlives the table factory that uses it.
    _cache: Cache,
}

impl RocksEngine {
    /// Creates the database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<RocksEngine> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_block_size(16 << 10);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        // With index and filter blocks in a 64 MiB cache (64 shards of
        // 1 MiB), a whole-file filter of a large SST does not fit a shard
        // and is read again on every lookup; RocksDB's advice for caching
        // them is partitioned index and filters with the top level pinned.
        table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
        table.set_partition_filters(true);
        table.set_metadata_block_size(4096);
        table.set_pin_top_level_index_and_filter(true);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(256 << 20);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.set_bottommost_compression_type(DBCompressionType::Zstd);
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        opts.increase_parallelism(i32::try_from(cores).unwrap_or(2));
        if let Some(budget) = cfg.write_buffer_budget_bytes {
            opts.set_db_write_buffer_size(budget);
            opts.set_write_buffer_size(budget / 4);
        }
        let db = DB::open(&opts, dir)?;
        Ok(RocksEngine { db, _cache: cache })
    }
}

impl Engine for RocksEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut batch = WriteBatch::default();
        for (k, v) in rows {
            batch.put(k, v);
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(false);
        Ok(self.db.write_opt(batch, &opts)?)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(RocksReader { db: &self.db }))
    }

    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.flush_wal(true)?;
        Ok(self.db.wait_for_compact(&WaitForCompactOptions::default())?)
    }

    fn has_write_buffer_budget(&self) -> bool {
        true
    }
}

struct RocksReader<'a> {
    db: &'a DB,
}

impl Reader for RocksReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.db.get_pinned(key)?.map(|v| check(&v)).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut opts = ReadOptions::default();
        if let Some(end) = end {
            opts.set_iterate_upper_bound(end.to_vec());
        }
        let mut iter = self.db.raw_iterator_opt(opts);
        iter.seek(start);
        let mut n = 0;
        while n < limit {
            let (Some(k), Some(v)) = (iter.key(), iter.value()) else { break };
            visit(k, v);
            n += 1;
            iter.next();
        }
        iter.status()?;
        Ok(n)
    }
}
