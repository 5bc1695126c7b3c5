//! SQLite through rusqlite (bundled): WAL journal, `synchronous=NORMAL` (no
//! fsync per commit in WAL mode), statements prepared once per connection
//! and reused (`prepare_cached`), one transaction per batch, an `INTEGER
//! PRIMARY KEY` table for 8-byte integer keys, and for byte-string keys a
//! `WITHOUT ROWID` table when rows are small and a rowid table with a
//! unique key index when they are not (SQLite's docs: a `WITHOUT ROWID`
//! row should stay under about 1/20 of a page; YCSB's 1 KB rows in one
//! spilled to overflow pages and grew the file 5×). One writer connection; readers take connections
//! from a pool, one per thread, each with the same page-cache budget and
//! memory-mapped reads (`mmap_size`, which SQLite's docs advise for
//! read-heavy use: a page is read from the map instead of copied into the
//! page cache). A reader is one read transaction (`BEGIN` when it is
//! taken, `COMMIT` when it is dropped), as LMDB's and redb's readers are:
//! its lookups share one transaction instead of each being its own.

use std::path::{Path, PathBuf};

use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};

use super::{Config, Engine, Reader, Result, Row, Update};

/// Locks `m`, ignoring poisoning: the harness stops at the first error.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The SQLite library version.
pub fn version() -> String {
    format!("SQLite {} (rusqlite {})", rusqlite::version(), env!("BENCH_VERSION_RUSQLITE"))
}

/// The settings, for the report.
pub fn options(cfg: &Config) -> String {
    format!(
        "journal_mode=WAL, synchronous=NORMAL, cache_size {} MiB per connection, mmap_size {} MiB, {} table, \
         prepared statements cached, one transaction per batch, one read transaction per reader",
        cfg.cache_bytes >> 20,
        MMAP_BYTES >> 20,
        table_layout(cfg)
    )
}

/// SQLite's default page size.
const PAGE_BYTES: usize = 4096;

/// Whether byte-string keys go into a `WITHOUT ROWID` table: rows under
/// 1/20 of a page (SQLite's rule of thumb in "Clustered Indexes and the
/// WITHOUT ROWID Optimization").
fn without_rowid(cfg: &Config) -> bool {
    !cfg.int_keys && cfg.value_bytes < PAGE_BYTES / 20
}

fn table_layout(cfg: &Config) -> &'static str {
    if cfg.int_keys {
        "INTEGER PRIMARY KEY"
    } else if without_rowid(cfg) {
        "WITHOUT ROWID"
    } else {
        "rowid table with a unique BLOB key index (rows over 1/20 of a page)"
    }
}

/// `mmap_size`: the bundled build's largest (`SQLITE_MAX_MMAP_SIZE`,
/// 0x7fff0000 on Linux), so the whole file is mapped at every scale here.
pub const MMAP_BYTES: i64 = 0x7fff_0000;

/// An open SQLite database.
pub struct SqliteEngine {
    path: PathBuf,
    cfg: Config,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl SqliteEngine {
    /// Creates the database file in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<SqliteEngine> {
        let path = dir.join("bench.sqlite");
        let writer = connect(&path, cfg)?;
        writer.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
        let table = if cfg.int_keys {
            "CREATE TABLE IF NOT EXISTS kv (k INTEGER PRIMARY KEY, v BLOB NOT NULL)"
        } else if without_rowid(cfg) {
            "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
        } else {
            "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL)"
        };
        writer.execute_batch(table)?;
        Ok(SqliteEngine { path, cfg: *cfg, writer: Mutex::new(writer), readers: Mutex::new(Vec::new()) })
    }
}

/// A connection with the harness's settings in the WAL journal: what the
/// workloads with SQLite stores of their own open.
pub fn connect_wal(path: &Path, cfg: &Config) -> Result<Connection> {
    let conn = connect(path, cfg)?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
    Ok(conn)
}

fn connect(path: &Path, cfg: &Config) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Negative: a size in KiB rather than in pages.
    conn.pragma_update(None, "cache_size", -((cfg.cache_bytes >> 10) as i64))?;
    conn.busy_timeout(std::time::Duration::from_mins(1))?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

/// An 8-byte big-endian key as an `i64` in the same order (sign bit
/// flipped); the empty key (a scan from the start) is the smallest.
fn int_key(key: &[u8]) -> Result<i64> {
    if key.is_empty() {
        return Ok(i64::MIN);
    }
    let bytes: [u8; 8] = key.try_into().map_err(|_| "SQLite integer keys must be 8 bytes")?;
    Ok((u64::from_be_bytes(bytes) ^ (1 << 63)) as i64)
}

fn int_key_bytes(k: i64) -> [u8; 8] {
    ((k as u64) ^ (1 << 63)).to_be_bytes()
}

impl Engine for SqliteEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?;
            for (k, v) in rows {
                if self.cfg.int_keys {
                    stmt.execute(params![int_key(k)?, v])?;
                } else {
                    stmt.execute(params![k, v])?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn transact(&self, keys: &[&[u8]], update: &mut Update<'_>) -> Result<bool> {
        // BEGIN IMMEDIATE: the write lock from the start, as SQLite's docs
        // advise for a read-then-write transaction (a deferred one can fail
        // with SQLITE_BUSY when it upgrades).
        let mut conn = lock(&self.writer);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut get = tx.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
            let mut put = tx.prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?;
            let mut read = Vec::with_capacity(keys.len());
            for k in keys {
                let old: Option<Vec<u8>> = if self.cfg.int_keys {
                    get.query_row(params![int_key(k)?], |r| r.get(0)).optional()?
                } else {
                    get.query_row(params![k], |r| r.get(0)).optional()?
                };
                read.push(old);
            }
            for (i, (k, old)) in keys.iter().zip(&read).enumerate() {
                let new = update(i, old.as_deref());
                if self.cfg.int_keys {
                    put.execute(params![int_key(k)?, new])?;
                } else {
                    put.execute(params![k, new])?;
                }
            }
        }
        tx.commit()?;
        Ok(true)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        let conn = match lock(&self.readers).pop() {
            Some(c) => c,
            None => connect(&self.path, &self.cfg)?,
        };
        // A deferred BEGIN takes no lock: the read transaction starts at
        // the first lookup and lasts until the reader is dropped.
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Box::new(SqliteReader { engine: self, conn: Some(conn) }))
    }

    fn settle(&self) -> Result<()> {
        // Copy the WAL into the database file and fsync it.
        let conn = lock(&self.writer);
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

struct SqliteReader<'a> {
    engine: &'a SqliteEngine,
    conn: Option<Connection>,
}

impl Drop for SqliteReader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // A connection whose transaction does not end is not reused
            // (it would pin an old snapshot and block checkpoints).
            if conn.prepare_cached("COMMIT").and_then(|mut s| s.execute([])).is_ok() {
                lock(&self.engine.readers).push(conn);
            }
        }
    }
}

impl Reader for SqliteReader<'_> {
    fn get(&mut self, key: &[u8], check: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let conn = self.conn.as_ref().ok_or("reader closed")?;
        let mut stmt = conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let mut rows =
            if self.engine.cfg.int_keys { stmt.query([int_key(key)?])? } else { stmt.query([key])? };
        let found =
            rows.next()?.map(|row| row.get_ref(0).map(|v| v.as_blob().map(&mut *check))).transpose()?;
        match found {
            Some(r) => r.map(|()| true).map_err(Into::into),
            None => Ok(false),
        }
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let conn = self.conn.as_ref().ok_or("reader closed")?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let int = self.engine.cfg.int_keys;
        let mut stmt = match end {
            Some(_) => {
                conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT ?3")?
            }
            None => conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?3")?,
        };
        let mut rows = match (int, end) {
            (true, Some(end)) => stmt.query(params![int_key(start)?, int_key(end)?, limit])?,
            (true, None) => stmt.query(params![int_key(start)?, rusqlite::types::Null, limit])?,
            (false, Some(end)) => stmt.query(params![start, end, limit])?,
            (false, None) => stmt.query(params![start, rusqlite::types::Null, limit])?,
        };
        let mut n = 0;
        while let Some(row) = rows.next()? {
            let v = row.get_ref(1)?.as_blob()?;
            if int {
                visit(&int_key_bytes(row.get::<_, i64>(0)?), v);
            } else {
                visit(row.get_ref(0)?.as_blob()?, v);
            }
            n += 1;
        }
        Ok(n)
    }
}
