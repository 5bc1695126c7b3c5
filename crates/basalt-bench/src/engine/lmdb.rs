//! LMDB through heed: one environment with a 64 GiB map (address space
//! only), `NO_SYNC` so that a commit hands its pages to the OS without an
//! fsync (the durability every engine gets here), `force_sync` on settle.
//! LMDB has no cache of its own: it reads through the OS page cache.

use std::ops::Bound;
use std::path::Path;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, RoTxn, WithTls};

use super::{Config, Engine, Reader, Result, Row, Update};

/// The settings, for the report.
pub const OPTIONS: &str = "map size 64 GiB, NO_SYNC (force_sync on settle), read transactions with TLS; \
     no cache knob (reads go through the OS page cache via mmap)";

/// The LMDB library version.
pub fn version() -> String {
    let v = heed::lmdb_version();
    format!("LMDB {}.{}.{} (heed {})", v.major, v.minor, v.patch, env!("BENCH_VERSION_HEED"))
}

/// An open LMDB environment with one database.
pub struct LmdbEngine {
    env: Env<WithTls>,
    db: Database<'static, Bytes, Bytes>,
}

impl LmdbEngine {
    /// Creates the environment in `dir`.
    pub fn open(dir: &Path, _cfg: &Config) -> Result<LmdbEngine> {
        let mut options = EnvOpenOptions::new();
        options.map_size(64 << 30).max_readers(126);
        #[expect(unsafe_code, reason = "heed's flags and open are unsafe fns")]
        // SAFETY: the directory is new and private to this process, so no
        // other handle maps the same file; NO_SYNC only weakens durability
        // on a machine crash, which the harness accepts for every engine.
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(dir)?
        };
        let wtxn = env.write_txn()?;
        let db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener.create_database(wtxn, None).map(CommitOrAbort::<_, ()>::Commit)
            })?
            .unwrap_commit();
        Ok(LmdbEngine { env, db })
    }
}

impl Engine for LmdbEngine {
    fn transact(&self, keys: &[&[u8]], update: &mut Update<'_>) -> Result<bool> {
        // LMDB's one write transaction at a time: never a conflict.
        let mut wtxn = self.env.write_txn()?;
        let read: Vec<Option<Vec<u8>>> =
            keys.iter().map(|k| Ok(self.db.get(&wtxn, k)?.map(<[u8]>::to_vec))).collect::<Result<_>>()?;
        for (i, (k, old)) in keys.iter().zip(&read).enumerate() {
            self.db.put(&mut wtxn, k, &update(i, old.as_deref()))?;
        }
        wtxn.commit()?;
        Ok(true)
    }

    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut wtxn = self.env.write_txn()?;
        for (k, v) in rows {
            self.db.put(&mut wtxn, k, v)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(LmdbReader { txn: self.env.read_txn()?, db: self.db }))
    }

    fn settle(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }
}

struct LmdbReader<'a> {
    txn: RoTxn<'a, WithTls>,
    db: Database<'static, Bytes, Bytes>,
}

impl Reader for LmdbReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.db.get(&self.txn, key)?.map(check).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        // LMDB rejects empty keys, even as a bound.
        let from = if start.is_empty() { Bound::Unbounded } else { Bound::Included(start) };
        let range: (Bound<&[u8]>, Bound<&[u8]>) = (from, end.map_or(Bound::Unbounded, Bound::Excluded));
        let mut n = 0;
        for kv in self.db.range(&self.txn, &range)?.take(limit) {
            let (k, v) = kv?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }
}
