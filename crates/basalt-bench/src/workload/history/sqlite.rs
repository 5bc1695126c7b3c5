//! SQLite's history store, as a user builds one today: table `t` (`id
//! INTEGER PRIMARY KEY`) and, with history on, an append-only
//! `t_history (seq INTEGER PRIMARY KEY AUTOINCREMENT, op, id, version,
//! fields…, ts)` with an index on `(id, seq)`, kept by `AFTER INSERT`,
//! `AFTER UPDATE` and `AFTER DELETE` triggers. The triggers come after
//! the load, which `t_history` is seeded with (one `insert` per row, as
//! if the triggers had been there from the start), so a read as of any
//! point finds every row. The connection settings are the other adapters'
//! (WAL journal, `synchronous=NORMAL`, the shared cache budget,
//! `mmap_size`); one statement per update, in its own (autocommit)
//! transaction; statements prepared once and cached.

use std::path::Path;

use rusqlite::{Connection, params};

use super::{FIELDS, HistoryStore, Rec, RowView, Visit};
use crate::engine::{Config, Result};

/// The settings, for the report.
pub fn options(cfg: &Config) -> String {
    format!(
        "journal_mode=WAL, synchronous=NORMAL, cache_size {} MiB, mmap_size {} MiB; table t (id INTEGER PRIMARY \
         KEY, version, {FIELDS} BLOB fields); history on: t_history (seq INTEGER PRIMARY KEY AUTOINCREMENT, op, \
         id, version, fields, ts) + index (id, seq), kept by AFTER INSERT/UPDATE/DELETE triggers made after the \
         load and seeded with it; one UPDATE per transaction (autocommit); prepared statements cached; \
         compaction: wal_checkpoint(TRUNCATE)",
        cfg.cache_bytes >> 20,
        crate::engine::SQLITE_MMAP_BYTES >> 20
    )
}

/// The trigger's commit time: Unix milliseconds.
const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// `t_history`, its index and the triggers that keep it.
fn history_ddl() -> String {
    let cols = (0..FIELDS).map(|f| format!("field{f}")).collect::<Vec<_>>();
    let (list, new) =
        (cols.join(", "), cols.iter().map(|c| format!("NEW.{c}")).collect::<Vec<_>>().join(", "));
    let blobs = cols.iter().map(|c| format!("{c} BLOB")).collect::<Vec<_>>().join(", ");
    let log = |op: &str| {
        format!(
            "CREATE TRIGGER t_{op} AFTER {op} ON t BEGIN INSERT INTO t_history (op, id, version, {list}, ts) \
             VALUES ('{op}', NEW.id, NEW.version, {new}, {NOW_MS}); END;"
        )
    };
    format!(
        "CREATE TABLE t_history (seq INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT NOT NULL, id INTEGER NOT NULL, \
         version INTEGER, {blobs}, ts INTEGER NOT NULL);
         CREATE INDEX t_history_by_id ON t_history (id, seq);
         INSERT INTO t_history (op, id, version, {list}, ts) SELECT 'insert', id, version, {list}, {NOW_MS} \
         FROM t ORDER BY id;
         {}
         {}
         CREATE TRIGGER t_delete AFTER DELETE ON t BEGIN INSERT INTO t_history (op, id, ts) \
         VALUES ('delete', OLD.id, {NOW_MS}); END;",
        log("insert"),
        log("update"),
    )
}

pub struct SqliteStore {
    conn: Connection,
    /// The `seq` as-of reads read at.
    as_of: i64,
}

impl SqliteStore {
    pub fn open(dir: &Path, cfg: &Config) -> Result<SqliteStore> {
        let conn = crate::engine::sqlite_connect_wal(&dir.join("history.sqlite"), cfg)?;
        let blobs: Vec<String> = (0..FIELDS).map(|f| format!("field{f} BLOB NOT NULL")).collect();
        conn.execute_batch(&format!(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, version INTEGER NOT NULL, {})",
            blobs.join(", ")
        ))?;
        Ok(SqliteStore { conn, as_of: 0 })
    }
}

/// The `FIELDS` blobs of `row` from column `first` on, borrowed.
fn fields<'r>(row: &'r rusqlite::Row<'_>, first: usize) -> Result<[&'r [u8]; FIELDS]> {
    let mut out = [&[][..]; FIELDS];
    for (f, o) in out.iter_mut().enumerate() {
        *o = row.get_ref(first + f)?.as_blob()?;
    }
    Ok(out)
}

/// Runs a query of one row (`version, field0…` from column `first`, after
/// an `op` column when `first` is 2) and hands it to `visit`.
fn get_one(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
    first: usize,
    visit: &mut dyn FnMut(RowView<'_>),
) -> Result<bool> {
    let mut rows = stmt.query(params)?;
    let Some(row) = rows.next()? else { return Ok(false) };
    if first == 2 && row.get_ref(0)?.as_str()? == "delete" {
        return Ok(false);
    }
    visit(RowView { version: row.get(first - 1)?, fields: fields(row, first)? });
    Ok(true)
}

/// Hands every row of a `t_history` query (`seq, op, id, ts, version,
/// field0…`) to `visit`; returns how many.
fn visit_rows(mut rows: rusqlite::Rows<'_>, visit: &mut Visit<'_>) -> Result<usize> {
    let mut n = 0;
    while let Some(row) = rows.next()? {
        let _ts: i64 = row.get(3)?;
        let view = if row.get_ref(1)?.as_str()? == "delete" {
            None
        } else {
            Some(RowView { version: row.get(4)?, fields: fields(row, 5)? })
        };
        visit(row.get::<_, i64>(0)? as u64, row.get(2)?, view);
        n += 1;
    }
    Ok(n)
}

/// The columns a history or feed query reads, in [`visit_rows`]'s order.
const HISTORY_COLUMNS: &str = "seq, op, id, ts, version, field0, field1, field2, field3";
const _: () = assert!(FIELDS == 4, "the statements here name four fields");

impl HistoryStore for SqliteStore {
    fn load(&mut self, rows: &[Rec]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO t (id, version, field0, field1, field2, field3) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for r in rows {
                let f = &r.fields;
                stmt.execute(params![r.id, r.version, f[0], f[1], f[2], f[3]])?;
            }
        }
        Ok(tx.commit()?)
    }

    fn settle(&mut self) -> Result<()> {
        self.compact()
    }

    fn keep_history(&mut self) -> Result<u64> {
        let tx = self.conn.transaction()?;
        tx.execute_batch(&history_ddl())?;
        tx.commit()?;
        self.point()
    }

    fn update(&mut self, rec: &Rec) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(
            "UPDATE t SET version = ?2, field0 = ?3, field1 = ?4, field2 = ?5, field3 = ?6 WHERE id = ?1",
        )?;
        let f = &rec.fields;
        match stmt.execute(params![rec.id, rec.version, f[0], f[1], f[2], f[3]])? {
            1 => Ok(()),
            n => Err(format!("history: an update of item {} changed {n} rows", rec.id).into()),
        }
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT version, field0, field1, field2, field3 FROM t WHERE id = ?1")?;
        get_one(&mut stmt, [id], 1, visit)
    }

    fn point(&mut self) -> Result<u64> {
        let seq: i64 = self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM t_history")?
            .query_row([], |r| r.get(0))?;
        Ok(seq as u64)
    }

    fn read_as_of(&mut self, point: u64) -> Result<u64> {
        self.as_of = point as i64;
        Ok(point)
    }

    fn get_as_of(&mut self, id: i64, visit: &mut dyn FnMut(RowView<'_>)) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT op, version, field0, field1, field2, field3 FROM t_history WHERE id = ?1 AND seq <= ?2 \
             ORDER BY seq DESC LIMIT 1",
        )?;
        get_one(&mut stmt, [id, self.as_of], 2, visit)
    }

    fn history(&mut self, id: i64, visit: &mut Visit<'_>) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {HISTORY_COLUMNS} FROM t_history WHERE id = ?1 ORDER BY seq DESC"
        ))?;
        visit_rows(stmt.query([id])?, visit)
    }

    fn changes(&mut self, since: u64, limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {HISTORY_COLUMNS} FROM t_history WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))?;
        visit_rows(stmt.query([since as i64, limit as i64])?, visit)
    }

    fn compact(&mut self) -> Result<()> {
        // Copy the WAL into the database file and fsync it.
        self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}
