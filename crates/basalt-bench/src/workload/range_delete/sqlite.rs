//! SQLite's store: table `t (id INTEGER PRIMARY KEY, qty, price,
//! payload)` with the other adapters' connection settings (WAL journal,
//! `synchronous=NORMAL`, the shared cache budget, `mmap_size`), statements
//! prepared once and cached. The range is deleted by one `DELETE FROM t
//! WHERE id >= ?1 AND id < ?2` in its own (autocommit) transaction; settle
//! is a WAL checkpoint, compaction a checkpoint, `VACUUM` (SQLite keeps a
//! deleted row's pages in the file, on its free list, until then) and a
//! checkpoint again.

use std::path::Path;

use rusqlite::{Connection, params};

use super::{PAYLOAD_BYTES, RangeStore, Rec, RowView, TombstoneStats};
use crate::engine::{Config, Result};

/// The settings, for the report.
pub fn options(cfg: &Config) -> String {
    format!(
        "journal_mode=WAL, synchronous=NORMAL, cache_size {} MiB, mmap_size {} MiB; table t (id INTEGER PRIMARY \
         KEY, qty INTEGER, price REAL, payload BLOB({PAYLOAD_BYTES})); one transaction per load batch; delete: \
         DELETE FROM t WHERE id >= ?1 AND id < ?2 (autocommit); prepared statements cached; settle: \
         wal_checkpoint(TRUNCATE); compaction: wal_checkpoint(TRUNCATE) + VACUUM + wal_checkpoint(TRUNCATE)",
        cfg.cache_bytes >> 20,
        crate::engine::SQLITE_MMAP_BYTES >> 20
    )
}

pub struct SqliteStore {
    conn: Connection,
}

impl SqliteStore {
    pub fn open(dir: &Path, cfg: &Config) -> Result<SqliteStore> {
        let conn = crate::engine::sqlite_connect_wal(&dir.join("range-delete.sqlite"), cfg)?;
        conn.execute_batch(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL, price REAL NOT NULL, \
             payload BLOB NOT NULL)",
        )?;
        Ok(SqliteStore { conn })
    }

    fn checkpoint(&self) -> Result<()> {
        // Copy the WAL into the database file, fsync it, empty the WAL.
        self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// Row `row` of a `SELECT id, qty, price, payload`, borrowed.
fn view<'r>(row: &'r rusqlite::Row<'_>) -> Result<RowView<'r>> {
    Ok(RowView { id: row.get(0)?, qty: row.get(1)?, price: row.get(2)?, payload: row.get_ref(3)?.as_blob()? })
}

impl RangeStore for SqliteStore {
    fn load(&mut self, rows: &[Rec]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt =
                tx.prepare_cached("INSERT INTO t (id, qty, price, payload) VALUES (?1, ?2, ?3, ?4)")?;
            for r in rows {
                stmt.execute(params![r.id, r.qty, r.price, r.payload])?;
            }
        }
        Ok(tx.commit()?)
    }

    fn settle(&mut self) -> Result<()> {
        self.checkpoint()
    }

    fn delete(&mut self, lo: i64, hi: i64) -> Result<()> {
        let mut stmt = self.conn.prepare_cached("DELETE FROM t WHERE id >= ?1 AND id < ?2")?;
        let n = stmt.execute([lo, hi])?;
        if n as i64 == hi - lo {
            Ok(())
        } else {
            Err(format!("range-delete: DELETE of [{lo}, {hi}) removed {n} rows").into())
        }
    }

    fn count(&mut self, lo: i64, hi: i64) -> Result<u64> {
        let mut stmt = self.conn.prepare_cached("SELECT count(*) FROM t WHERE id >= ?1 AND id < ?2")?;
        let n: i64 = stmt.query_row([lo, hi], |r| r.get(0))?;
        Ok(n as u64)
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached("SELECT id, qty, price, payload FROM t WHERE id = ?1")?;
        let mut rows = stmt.query([id])?;
        let Some(row) = rows.next()? else { return Ok(false) };
        visit(view(row)?);
        Ok(true)
    }

    fn scan(&mut self, lo: i64, hi: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<u64> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, qty, price, payload FROM t WHERE id >= ?1 AND id < ?2 ORDER BY id")?;
        let mut rows = stmt.query([lo, hi])?;
        let mut n = 0;
        while let Some(row) = rows.next()? {
            visit(view(row)?);
            n += 1;
        }
        Ok(n)
    }

    fn compact(&mut self) -> Result<()> {
        self.checkpoint()?;
        self.conn.execute_batch("VACUUM")?;
        self.checkpoint()
    }

    fn tombstones(&self) -> Option<TombstoneStats> {
        None
    }
}
