//! LevelDB through the `leveldb` crate (C++ LevelDB 1.22 built from source;
//! build with `CXX=clang++`: its `CMake` check for `-Wthread-safety` fails
//! with GCC): an LRU block cache of the shared budget, no compression (the
//! binding's default) and `sync = false`. The binding exposes no filter policy, so
//! LevelDB runs without bloom filters here; docs/BENCHMARKS.md says so.

use std::path::Path;

use leveldb::batch::{Batch, Writebatch};
use leveldb::compaction::Compaction;
use leveldb::database::Database;
use leveldb::database::cache::Cache;
use leveldb::iterator::{Iterable, LevelDBIterator};
use leveldb::kv::KV;
use leveldb::options::{Options, ReadOptions, WriteOptions};

use super::{Config, Engine, Reader, Result, Row};

/// A byte-string key for the binding's key trait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BytesKey(Vec<u8>);

impl db_key::Key for BytesKey {
    fn from_u8(key: &[u8]) -> Self {
        BytesKey(key.to_vec())
    }

    fn as_slice<T, F: Fn(&[u8]) -> T>(&self, f: F) -> T {
        f(&self.0)
    }
}

/// An open LevelDB database.
pub struct LevelEngine {
    db: Database<BytesKey>,
}

impl LevelEngine {
    /// Creates the database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<LevelEngine> {
        let mut options = Options::new();
        options.create_if_missing = true;
        options.cache = Some(Cache::new(cfg.cache_bytes));
        Ok(LevelEngine { db: Database::open(dir, options)? })
    }
}

impl Engine for LevelEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut batch = Writebatch::new();
        for (k, v) in rows {
            batch.put(BytesKey(k.clone()), v);
        }
        Ok(self.db.write(WriteOptions::new(), &batch)?)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(LevelReader { db: &self.db }))
    }

    fn settle(&self) -> Result<()> {
        // An empty synced batch makes every write before it durable.
        let mut sync = WriteOptions::new();
        sync.sync = true;
        self.db.write(sync, &Writebatch::new())?;
        // LevelDB has no flush call: a full-range compaction writes the
        // memtable out and leaves the tree settled.
        let (first, last) = (BytesKey(Vec::new()), BytesKey(vec![0xff; 64]));
        self.db.compact(&first, &last);
        Ok(())
    }
}

struct LevelReader<'a> {
    db: &'a Database<BytesKey>,
}

impl Reader for LevelReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.db.get_bytes(ReadOptions::new(), BytesKey(key.to_vec()))?.map(|v| check(&v)).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let from = BytesKey(start.to_vec());
        let mut n = 0;
        for (k, v) in self.db.iter(ReadOptions::new()).from(&from).take(limit) {
            if end.is_some_and(|e| k.0.as_slice() >= e) {
                break;
            }
            visit(&k.0, &v);
            n += 1;
        }
        Ok(n)
    }
}
