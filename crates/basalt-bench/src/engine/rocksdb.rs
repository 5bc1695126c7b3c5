//! RocksDB through rust-rocksdb, set up as RocksDB's own tuning guides
//! advise for this workload — small random (incompressible) values read by
//! point lookups and short scans — rather than as seed 004 set it (16 KiB
//! blocks, LZ4/ZSTD, 256 MiB memtables, index and filters in the cache):
//! - "Setup Options and Basic Tuning" (github.com/facebook/rocksdb/wiki):
//!   a block cache, 10-bit bloom filters, `max_background_jobs` from the
//!   cores (through `increase_parallelism`), `bytes_per_sync` 1 MiB,
//!   default 64 MiB memtables, leveled compaction with dynamic level sizes
//!   (the default); index and filter blocks held by the table readers (the
//!   default, as LevelDB and Basalt hold theirs) — putting them in the
//!   64 MiB cache, even partitioned with the top level pinned, made
//!   lookups at 10M keys 1.35× slower (127K against 171K lookups/s), since
//!   data blocks then evict them;
//! - "Data Block Hash Index" and `OptimizeForPointLookup`: a hash index in
//!   each data block and a whole-key bloom filter over the memtable;
//! - default 4 KiB blocks, and no compression: the values are random
//!   bytes, so compressing them costs writes and saves nothing.
//!
//! WAL on, `sync = false`; settle flushes the memtables, syncs the WAL and
//! waits for compactions.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, DataBlockIndexType, Options, ReadOptions,
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
    /// Opens (or creates) the database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<RocksEngine> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        table.set_data_block_hash_ratio(0.75);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(DBCompressionType::None);
        opts.set_bytes_per_sync(1 << 20);
        opts.set_memtable_whole_key_filtering(true);
        opts.set_memtable_prefix_bloom_ratio(0.02);
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
