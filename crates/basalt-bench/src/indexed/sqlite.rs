//! SQLite's indexed store: a rowid table keyed by `id` (`INTEGER PRIMARY
//! KEY`), `CREATE INDEX` before the load for each index of the set
//! (`(score)`, `(name, score)`, `(region, score)`: the second is the
//! covering index SQLite's docs advise for a query of `name` that returns
//! `score`), the same connection settings as the key-value adapter
//! (WAL journal, `synchronous=NORMAL`, the shared cache budget,
//! `mmap_size`), statements prepared once and cached, one transaction per
//! insert batch, and reads batched in one read transaction
//! (`begin_reads`/`end_reads`), as the other engines read one state.

use std::path::Path;

use rusqlite::{Connection, params};

use super::{IndexSet, IndexedStore, Query, Rec, RowRef};
use crate::engine::{Config, Result};

pub const OPTIONS: &str = "journal_mode=WAL, synchronous=NORMAL, cache_size = the shared budget, mmap_size 2 GiB, \
                           INTEGER PRIMARY KEY table, CREATE INDEX on (score), (name, score), (region, score) \
                           before the load, prepared statements cached, one transaction per batch, reads batched \
                           in one read transaction";

pub struct SqliteStore {
    conn: Connection,
}

impl SqliteStore {
    pub fn open(dir: &Path, cfg: &Config, indexes: IndexSet) -> Result<SqliteStore> {
        let conn = Connection::open(dir.join("bench.sqlite"))?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "cache_size", -((cfg.cache_bytes >> 10) as i64))?;
        conn.pragma_update(None, "mmap_size", crate::engine::SQLITE_MMAP_BYTES)?;
        conn.set_prepared_statement_cache_capacity(32);
        conn.execute_batch(
            "CREATE TABLE rec (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL, \
             region TEXT NOT NULL, payload BLOB NOT NULL)",
        )?;
        if indexes.score {
            conn.execute_batch("CREATE INDEX by_score ON rec (score)")?;
        }
        if indexes.name {
            conn.execute_batch("CREATE INDEX by_name ON rec (name, score)")?;
        }
        if indexes.region {
            conn.execute_batch("CREATE INDEX by_region ON rec (region, score)")?;
        }
        Ok(SqliteStore { conn })
    }
}

/// The `WHERE` clause of `q` (parameters `?1`, `?2`).
fn condition(q: &Query) -> &'static str {
    match q {
        Query::ScoreEq(_) => "score = ?1",
        Query::ScoreRange(..) => "score >= ?1 AND score < ?2",
        Query::NameEq(_) => "name = ?1",
        Query::RegionEq(_) => "region = ?1",
    }
}

/// Runs `sql` with `q`'s parameters, handing each row to `row`.
fn run(
    conn: &Connection,
    sql: &str,
    q: &Query,
    mut row: impl FnMut(&rusqlite::Row<'_>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = match q {
        Query::ScoreEq(v) => stmt.query(params![v])?,
        Query::ScoreRange(lo, hi) => stmt.query(params![lo, hi])?,
        Query::NameEq(v) | Query::RegionEq(v) => stmt.query(params![v])?,
    };
    while let Some(r) = rows.next()? {
        row(r)?;
    }
    Ok(())
}

impl IndexedStore for SqliteStore {
    fn insert(&self, recs: &[Rec]) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT OR REPLACE INTO rec (id, name, score, region, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for r in recs {
                stmt.execute(params![r.id, r.name, r.score, r.region, r.payload])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn settle(&self) -> Result<()> {
        self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn begin_reads(&mut self) -> Result<()> {
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(())
    }

    fn end_reads(&mut self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<bool> {
        let mut stmt =
            self.conn.prepare_cached("SELECT id, name, score, region, payload FROM rec WHERE id = ?1")?;
        let mut rows = stmt.query(params![id])?;
        let Some(r) = rows.next()? else { return Ok(false) };
        visit(RowRef {
            id: r.get(0)?,
            name: Some(r.get_ref(1)?.as_str()?),
            score: r.get(2)?,
            region: Some(r.get_ref(3)?.as_str()?),
            payload: Some(r.get_ref(4)?.as_blob()?),
        });
        Ok(true)
    }

    fn query(&mut self, q: &Query, covering: bool, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<usize> {
        let mut n = 0;
        let (cols, string) = match (covering, q) {
            (false, _) => ("id, score, name, region, payload", None),
            (true, Query::NameEq(_)) => ("id, score, name", Some(false)),
            (true, Query::RegionEq(_)) => ("id, score, region", Some(true)),
            (true, _) => ("id, score", None),
        };
        let sql = format!("SELECT {cols} FROM rec WHERE {}", condition(q));
        run(&self.conn, &sql, q, |r| {
            let text = |i| -> Result<&str> { Ok(r.get_ref(i)?.as_str()?) };
            let row = match (covering, string) {
                (false, _) => RowRef {
                    id: r.get(0)?,
                    score: r.get(1)?,
                    name: Some(text(2)?),
                    region: Some(text(3)?),
                    payload: Some(r.get_ref(4)?.as_blob()?),
                },
                (true, Some(region)) => RowRef {
                    id: r.get(0)?,
                    score: r.get(1)?,
                    name: (!region).then(|| text(2)).transpose()?,
                    region: region.then(|| text(2)).transpose()?,
                    payload: None,
                },
                (true, None) => {
                    RowRef { id: r.get(0)?, score: r.get(1)?, name: None, region: None, payload: None }
                }
            };
            visit(row);
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    fn count(&mut self, q: &Query) -> Result<u64> {
        let mut n = 0u64;
        run(&self.conn, &format!("SELECT COUNT(*) FROM rec WHERE {}", condition(q)), q, |r| {
            n = r.get::<_, i64>(0)? as u64;
            Ok(())
        })?;
        Ok(n)
    }

    fn rows_read(&self) -> Option<u64> {
        // SQLite counts full-scan steps and VM steps per statement, not
        // rows or index entries read.
        None
    }
}
