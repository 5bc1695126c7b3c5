//! redb: the shared cache budget, one write transaction per batch committed
//! with `Durability::None` (not fsynced; redb's closest match to "handed to
//! the OS"), and an `Immediate` commit on settle, which makes everything
//! before it durable.

use std::path::Path;

use redb::{Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Config, Engine, Reader, Result, Row, Update};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

/// An open redb database.
pub struct RedbEngine {
    db: Database,
}

impl RedbEngine {
    /// Creates the database file in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<RedbEngine> {
        let db = Database::builder().set_cache_size(cfg.cache_bytes).create(dir.join("bench.redb"))?;
        let txn = db.begin_write()?;
        txn.open_table(TABLE)?;
        txn.commit()?;
        Ok(RedbEngine { db })
    }

    fn commit(&self, rows: &[Row], durability: Durability) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(durability)?;
        {
            let mut table = txn.open_table(TABLE)?;
            for (k, v) in rows {
                table.insert(k.as_slice(), v.as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }
}

impl Engine for RedbEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        self.commit(rows, Durability::None)
    }

    fn transact(&self, keys: &[&[u8]], update: &mut Update<'_>) -> Result<bool> {
        // redb's one write transaction at a time: never a conflict.
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        {
            let mut table = txn.open_table(TABLE)?;
            let mut read = Vec::with_capacity(keys.len());
            for k in keys {
                read.push(table.get(*k)?.map(|v| v.value().to_vec()));
            }
            for (i, (k, old)) in keys.iter().zip(&read).enumerate() {
                table.insert(*k, update(i, old.as_deref()).as_slice())?;
            }
        }
        txn.commit()?;
        Ok(true)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        let txn = self.db.begin_read()?;
        Ok(Box::new(RedbReader { table: txn.open_table(TABLE)? }))
    }

    fn settle(&self) -> Result<()> {
        self.commit(&[], Durability::Immediate)
    }
}

struct RedbReader {
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl Reader for RedbReader {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.table.get(key)?.map(|v| check(v.value())).is_some())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let iter = match end {
            Some(end) => self.table.range(start..end)?,
            None => self.table.range(start..)?,
        };
        let mut n = 0;
        for kv in iter.take(limit) {
            let (k, v) = kv?;
            visit(k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }
}
