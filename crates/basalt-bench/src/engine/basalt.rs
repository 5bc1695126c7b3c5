//! Basalt: default options except the block cache (the shared budget) and
//! the write-buffer budget when one is asked for.

use std::path::Path;

use basalt::{Db, Options, WriteBatch, WriteOptions};

use super::{Config, Engine, Reader, Result, Row};

fn db_options(cfg: &Config) -> Options {
    let mut options = Options { block_cache_bytes: cfg.cache_bytes, ..Options::default() };
    if let Some(budget) = cfg.write_buffer_budget_bytes {
        options.write_buffer_bytes_max = budget;
    }
    options
}

/// The settings, for the report.
pub fn options(cfg: &Config) -> String {
    let o = db_options(cfg);
    format!(
        "block cache {} MiB, {} KiB blocks, {}-bit bloom, {} MiB memtables, write-buffer budget {} MiB, \
         compression {:?}, sync=false",
        o.block_cache_bytes >> 20,
        o.block_bytes_target >> 10,
        o.bloom_bits_per_key,
        o.memtable_bytes_max >> 20,
        o.write_buffer_bytes_max >> 20,
        o.compression,
    )
}

/// An open Basalt database.
pub struct BasaltEngine {
    db: Db,
}

impl BasaltEngine {
    /// Opens a database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<BasaltEngine> {
        Ok(BasaltEngine { db: Db::open(dir, db_options(cfg))? })
    }
}

impl Engine for BasaltEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in rows {
            batch.put(k, v);
        }
        Ok(self.db.write_opt(batch, &WriteOptions { sync: false })?)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(BasaltReader { db: &self.db }))
    }

    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_background_work()?;
        Ok(self.db.sync_wal()?)
    }

    fn has_write_buffer_budget(&self) -> bool {
        true
    }
}

struct BasaltReader<'a> {
    db: &'a Db,
}

impl Reader for BasaltReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.db.get(key)?.map(|v| check(&v)).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let iter = match end {
            Some(end) => self.db.iter(start..end),
            None => self.db.iter(start..),
        };
        let mut n = 0;
        for kv in iter.take(limit) {
            let (k, v) = kv?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }
}
