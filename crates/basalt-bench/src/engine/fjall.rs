//! fjall: the shared cache budget, default keyspace options (its
//! documentation's advice), one write batch per batch with the journal
//! flushed to the OS on commit (fjall's default), `persist(SyncAll)` and a
//! memtable flush on settle. fjall has no public write-buffer budget. The
//! database is opened as fjall's `OptimisticTxDatabase` (its optimistic
//! transactions, for the transactions workload); batches and reads go
//! through the plain database inside it, as before.

use std::path::Path;
use std::time::{Duration, Instant};

use fjall::{
    Keyspace, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, PersistMode, Readable,
};

use super::{Config, Engine, Reader, Result, Row, Update};

/// An open fjall database with one keyspace.
pub struct FjallEngine {
    tx_db: OptimisticTxDatabase,
    tx_ks: OptimisticTxKeyspace,
    ks: Keyspace,
}

impl FjallEngine {
    /// Creates the database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<FjallEngine> {
        let tx_db = OptimisticTxDatabase::builder(dir).cache_size(cfg.cache_bytes as u64).open()?;
        let tx_ks = tx_db.keyspace("kv", KeyspaceCreateOptions::default)?;
        let ks = tx_ks.inner().clone();
        Ok(FjallEngine { tx_db, tx_ks, ks })
    }
}

impl Engine for FjallEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut batch = self.tx_db.inner().batch();
        for (k, v) in rows {
            batch.insert(&self.ks, k.as_slice(), v.as_slice());
        }
        Ok(batch.commit()?)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(FjallReader { ks: &self.ks }))
    }

    fn transact(&self, keys: &[&[u8]], update: &mut Update<'_>) -> Result<bool> {
        let mut tx = self.tx_db.write_tx()?;
        let mut read = Vec::with_capacity(keys.len());
        for k in keys {
            read.push(tx.get(&self.tx_ks, k)?);
        }
        for (i, (k, old)) in keys.iter().zip(&read).enumerate() {
            tx.insert(&self.tx_ks, *k, update(i, old.as_deref()));
        }
        Ok(tx.commit()?.is_ok())
    }

    fn settle(&self) -> Result<()> {
        self.tx_db.persist(PersistMode::SyncAll)?;
        self.ks.rotate_memtable_and_wait()?;
        // fjall has no "wait for compactions": poll its counters.
        let deadline = Instant::now() + Duration::from_mins(10);
        let db = self.tx_db.inner();
        while (db.outstanding_flushes() > 0 || db.active_compactions() > 0) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

struct FjallReader<'a> {
    ks: &'a Keyspace,
}

impl Reader for FjallReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.ks.get(key)?.map(|v| check(&v)).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let iter = match end {
            Some(end) => self.ks.range(start..end),
            None => self.ks.range(start..),
        };
        let mut n = 0;
        for guard in iter.take(limit) {
            let (k, v) = guard.into_inner()?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }
}
