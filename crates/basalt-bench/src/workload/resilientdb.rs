//! Seed 000 (ResilientDB's composite-key secondary indexes) done honestly:
//! a release build, real indexes, and what each query read counted by the
//! engine itself. Records as in [`crate::indexed`]; per job:
//!
//! 1. **Upkeep**: the records loaded into a store with no index, with one
//!    (`by_name`) and with all three, in batches of [`BATCH_ROWS`]:
//!    `insert_rows_per_s` under distribution `<k>-indexes`.
//! 2. **Primary-key gets** with no index and with three: `get_ops_per_s`, and
//!    each get's latency (`get_p50_us`, `get_p99_us`, `get_p999_us`).
//! 3. **Queries** on the three-index store (and, for Basalt, the same
//!    queries by filtered scans of the index-less store, engine
//!    `basalt-scan`): equality returning 1, 10 and 1,000 rows, ranges of
//!    10 and 1,000, covering equality of 10 and 1,000, and counts of
//!    1,000. Each line carries `query`, `result_rows` and, where the
//!    engine counts them, `rows_read` per query (Basalt's
//!    `Stats::index_entries_read + table_rows_read`); distribution is
//!    `<query>-<result_rows>`. Every answer is checked: its row count, and
//!    for the first queries of each kind (untimed) every field of every
//!    row against the generator; timed answers check the row count and
//!    the predicate on every row.

use std::path::Path;
use std::time::Instant;

use rand::Rng;

use super::{Job, Sink, rate};
use crate::datagen;
use crate::engine::{Kind, Result};
use crate::indexed::{
    self, IndexSet, IndexedStore, NAME_ROWS, PAYLOAD_BYTES, Query, REGION_ROWS, Records, RowRef,
};
use crate::measure::Latencies;

/// Records per insert batch.
pub const BATCH_ROWS: u64 = 1000;
/// Queries timed per kind returning up to 10 rows, and returning 1,000.
const SMALL_QUERIES: u64 = 2000;
const LARGE_QUERIES: u64 = 200;
/// Queries per kind answered by full scans (each reads every record).
const SCAN_QUERIES: u64 = 3;
/// Queries of each kind checked field by field before the timed ones.
const VERIFIED_QUERIES: u64 = 20;

/// Gets whose rows are checked field by field before the timed ones.
const VERIFIED_GETS: u64 = 2000;

/// A kind of query.
#[derive(Debug, Clone, Copy)]
struct QueryKind {
    /// `eq`, `range`, `covering` or `count`.
    query: &'static str,
    result_rows: u64,
}

const KINDS: [QueryKind; 8] = [
    QueryKind { query: "eq", result_rows: 1 },
    QueryKind { query: "eq", result_rows: NAME_ROWS },
    QueryKind { query: "eq", result_rows: REGION_ROWS },
    QueryKind { query: "range", result_rows: 10 },
    QueryKind { query: "range", result_rows: 1000 },
    QueryKind { query: "covering", result_rows: NAME_ROWS },
    QueryKind { query: "covering", result_rows: REGION_ROWS },
    QueryKind { query: "count", result_rows: REGION_ROWS },
];

impl QueryKind {
    /// A random query of this kind over `n` records.
    fn pick(self, rng: &mut impl Rng, n: u64) -> Query {
        match (self.query, self.result_rows) {
            ("eq", 1) => Query::ScoreEq(rng.random_range(0..n) as i64),
            ("range", k) => {
                let lo = rng.random_range(0..=n - k) as i64;
                Query::ScoreRange(lo, lo + k as i64)
            }
            (_, NAME_ROWS) => Query::NameEq(Records::name_value(rng.random_range(0..n / NAME_ROWS))),
            _ => Query::RegionEq(Records::region_value(rng.random_range(0..n / REGION_ROWS))),
        }
    }

    fn covering(self) -> bool {
        self.query == "covering"
    }
}

/// Runs the workload for `job`'s engine in `dir`.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    if !indexed::supports(job.engine) {
        return Err(format!("the resilientdb workload has no store for {}", job.engine.name()).into());
    }
    let recs = Records::new(job.scale, job.seed, PAYLOAD_BYTES)?;
    let cfg = job.config(true);
    for set in [IndexSet::NONE, IndexSet::NAME, IndexSet::ALL] {
        let label = format!("{}-indexes", set.count());
        let store_dir = dir.join(&label);
        let mut store = indexed::open(job.engine, &store_dir, &cfg, set)?;
        let took = load(store.as_ref(), &recs)?;
        sink.put_in("resilientdb", &label, 1, "insert_rows_per_s", rate(recs.count(), took), "rows/s");
        store.settle()?;
        if set != IndexSet::NAME {
            gets(job, store.as_mut(), &recs, &label, sink)?;
        }
        if set == IndexSet::ALL {
            queries(job, store.as_mut(), &recs, None, sink)?;
        } else if set == IndexSet::NONE && job.engine == Kind::Basalt {
            queries(job, store.as_mut(), &recs, Some("basalt-scan"), sink)?;
        }
        drop(store);
        std::fs::remove_dir_all(&store_dir)?;
    }
    Ok(())
}

/// Loads every record; returns the time spent in inserts.
fn load(store: &dyn IndexedStore, recs: &Records) -> Result<std::time::Duration> {
    let mut took = std::time::Duration::ZERO;
    let mut batch = Vec::with_capacity(BATCH_ROWS as usize);
    let mut id = 0;
    while id < recs.count() {
        batch.clear();
        batch.extend((id..(id + BATCH_ROWS).min(recs.count())).map(|i| recs.record(i)));
        let t = Instant::now();
        store.insert(&batch)?;
        took += t.elapsed();
        id += batch.len() as u64;
    }
    Ok(took)
}

/// Whether `row` holds record `row.id`'s fields (those it carries).
fn row_is_right(recs: &Records, row: &RowRef<'_>, payload: &mut Vec<u8>) -> bool {
    let Ok(id) = u64::try_from(row.id) else { return false };
    if id >= recs.count() || row.score != recs.score(id) {
        return false;
    }
    if row.name.is_some_and(|n| n != recs.name(id)) || row.region.is_some_and(|r| r != recs.region(id)) {
        return false;
    }
    if let Some(p) = row.payload {
        recs.payload(id, payload);
        return p == payload.as_slice();
    }
    true
}

fn gets(job: &Job, store: &mut dyn IndexedStore, recs: &Records, label: &str, sink: &mut Sink) -> Result<()> {
    let mut rng = datagen::rng(job.seed, 3);
    let mut bad = 0u64;
    let mut scratch = Vec::new();
    store.begin_reads()?;
    // Untimed: every field of the rows of the first gets, as the queries
    // check theirs.
    for _ in 0..VERIFIED_GETS.min(job.ops) {
        let id = rng.random_range(0..recs.count());
        let found = store.get(id as i64, &mut |row| {
            bad += u64::from(
                row.id != id as i64 || !row_is_right(recs, &row, &mut scratch) || row.payload.is_none(),
            );
        })?;
        bad += u64::from(!found);
    }
    // Timed: the row's key and score, and that its other columns came.
    let mut lat = Latencies::new(1);
    let t = Instant::now();
    for _ in 0..job.ops {
        let id = rng.random_range(0..recs.count());
        let start = Instant::now();
        let found = store.get(id as i64, &mut |row| {
            bad += u64::from(
                row.id != id as i64
                    || row.score != recs.score(id)
                    || row.name.is_none()
                    || row.region.is_none()
                    || row.payload.is_none(),
            );
        })?;
        lat.record(start.elapsed());
        bad += u64::from(!found);
    }
    let took = t.elapsed();
    store.end_reads()?;
    if bad > 0 {
        return Err(format!("resilientdb: {bad} wrong or missing rows in gets").into());
    }
    sink.put_in("resilientdb", label, 1, "get_ops_per_s", rate(job.ops, took), "ops/s");
    for (metric, p) in [("get_p50_us", 50.0), ("get_p99_us", 99.0), ("get_p999_us", 99.9)] {
        sink.put_in("resilientdb", label, 1, metric, lat.percentile_us(p), "us");
    }
    Ok(())
}

/// Runs every kind of query; `engine` overrides the engine name of the
/// result lines (the scan baseline).
fn queries(
    job: &Job,
    store: &mut dyn IndexedStore,
    recs: &Records,
    engine: Option<&str>,
    sink: &mut Sink,
) -> Result<()> {
    let mut rng = datagen::rng(job.seed, 4);
    let n = recs.count();
    let mut scratch = Vec::new();
    for kind in KINDS {
        let expected = kind.result_rows.min(n);
        let timed = match (engine, kind.result_rows) {
            (Some(_), _) => SCAN_QUERIES,
            (None, r) if r >= 1000 => LARGE_QUERIES,
            (None, _) => SMALL_QUERIES,
        };
        let what = format!("{} {} ({} records)", kind.query, kind.result_rows, n);
        store.begin_reads()?;
        // Untimed: every field of every row.
        for _ in 0..VERIFIED_QUERIES.min(timed) {
            let q = kind.pick(&mut rng, n);
            if kind.query == "count" {
                let got = store.count(&q)?;
                if got != expected {
                    return Err(format!("resilientdb {what}: count {got}, expected {expected}").into());
                }
                continue;
            }
            let mut bad = 0u64;
            let mut ids = std::collections::HashSet::new();
            let got = store.query(&q, kind.covering(), &mut |row| {
                let fields = row_is_right(recs, &row, &mut scratch);
                let matches = q.matches(row.score, row.name, row.region);
                bad += u64::from(!fields || !matches || !ids.insert(row.id));
            })?;
            if bad > 0 || got as u64 != expected {
                return Err(
                    format!("resilientdb {what}: {got} rows, {bad} wrong, expected {expected}").into()
                );
            }
        }
        let mut lat = Latencies::new(1);
        let read_before = store.rows_read();
        let mut bad = 0u64;
        let t = Instant::now();
        for _ in 0..timed {
            let q = kind.pick(&mut rng, n);
            let start = Instant::now();
            let got = if kind.query == "count" {
                store.count(&q)?
            } else {
                let mut wrong = 0u64;
                let got = store.query(&q, kind.covering(), &mut |row| {
                    wrong += u64::from(!q.matches(row.score, row.name, row.region));
                })?;
                bad += wrong;
                got as u64
            };
            lat.record(start.elapsed());
            bad += u64::from(got != expected);
        }
        let took = t.elapsed();
        let rows_read = match (read_before, store.rows_read()) {
            (Some(before), Some(after)) => Some((after - before) as f64 / timed as f64),
            _ => None,
        };
        store.end_reads()?;
        if bad > 0 {
            return Err(
                format!("resilientdb {what}: {bad} wrong answers or rows in the timed queries").into()
            );
        }
        let mut put = |metric: &str, value: f64, unit: &str| {
            sink.put_query(engine, kind.query, expected, rows_read, metric, value, unit);
        };
        put("query_p50_us", lat.percentile_us(50.0), "us");
        put("query_p99_us", lat.percentile_us(99.0), "us");
        put("query_p999_us", lat.percentile_us(99.9), "us");
        put("queries_per_s", rate(timed, took), "ops/s");
    }
    Ok(())
}

/// The marbledb workload's equality search with an index: `n` records of
/// `value_bytes` (the marbledb values), indexed on the searched field,
/// `region` holding it. Returns the median latency of `queries` equality
/// queries in microseconds, each checked against `expected(category)`.
pub fn indexed_search(
    job: &Job,
    dir: &Path,
    value: &dyn Fn(u64, &mut Vec<u8>) -> u64,
    categories: u64,
    queries: u64,
) -> Result<f64> {
    let cfg = job.config(true);
    let mut store = indexed::open(job.engine, dir, &cfg, IndexSet::REGION)?;
    let category_name = |c: u64| format!("category-{c:03}");
    let mut counts = vec![0u64; categories as usize];
    let mut batch = Vec::with_capacity(BATCH_ROWS as usize);
    let mut id = 0;
    while id < job.scale {
        batch.clear();
        for i in id..(id + BATCH_ROWS).min(job.scale) {
            let mut payload = Vec::new();
            let c = value(i, &mut payload);
            counts[c as usize] += 1;
            batch.push(indexed::Rec {
                id: i as i64,
                name: String::new(),
                score: i as i64,
                region: category_name(c),
                payload,
            });
        }
        store.insert(&batch)?;
        id += batch.len() as u64;
    }
    store.settle()?;
    let mut us = Vec::new();
    store.begin_reads()?;
    for target in 0..queries.min(categories) {
        let want = category_name(target);
        let q = Query::RegionEq(want.clone());
        let mut bad = 0u64;
        let t = Instant::now();
        let got = store.query(&q, false, &mut |row| {
            bad += u64::from(row.region != Some(want.as_str()) || row.payload.is_none());
        })?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
        if bad > 0 || got as u64 != counts[target as usize] {
            return Err(format!(
                "marbledb indexed search: {got} rows ({bad} wrong) for category {target}, expected {}",
                counts[target as usize]
            )
            .into());
        }
    }
    store.end_reads()?;
    drop(store);
    std::fs::remove_dir_all(dir)?;
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexed::Rec;

    fn job(engine: Kind) -> Job {
        let mut job = super::super::tests::job(super::super::Workload::Resilientdb, 3_000, &[]);
        job.engine = engine;
        job.ops = 2_000;
        job
    }

    #[test]
    fn every_store_answers_every_query_right() {
        for engine in [Kind::Basalt, Kind::Sqlite] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut sink = Sink::new(&job(engine));
            run(&job(engine), dir.path(), &mut sink).unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
            let lines = |engine: &str, query: &str| {
                sink.records
                    .iter()
                    .filter(|r| r.engine == engine && r.query.as_deref() == Some(query))
                    .count()
            };
            // Each kind of query: p50, p99, p99.9 and queries per second.
            assert_eq!(lines(engine.name(), "eq"), 12, "{}", engine.name());
            assert_eq!(lines(engine.name(), "count"), 4, "{}", engine.name());
            if engine == Kind::Basalt {
                assert_eq!(lines("basalt-scan", "range"), 8);
                let eq10 = sink
                    .records
                    .iter()
                    .find(|r| r.engine == "basalt" && r.distribution == "eq-10" && r.metric == "query_p50_us")
                    .expect("eq-10");
                // 10 index entries and the 10 rows they name.
                assert_eq!(eq10.rows_read, Some(20.0));
            }
        }
    }

    /// A store that loses one row of every answer.
    struct Lossy(Box<dyn IndexedStore>);

    impl IndexedStore for Lossy {
        fn insert(&self, recs: &[Rec]) -> Result<()> {
            self.0.insert(recs)
        }
        fn settle(&self) -> Result<()> {
            self.0.settle()
        }
        fn begin_reads(&mut self) -> Result<()> {
            self.0.begin_reads()
        }
        fn end_reads(&mut self) -> Result<()> {
            self.0.end_reads()
        }
        fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<bool> {
            self.0.get(id, visit)
        }
        fn query(&mut self, q: &Query, covering: bool, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<usize> {
            let mut first = true;
            let n = self.0.query(q, covering, &mut |row| {
                if !std::mem::take(&mut first) {
                    visit(row);
                }
            })?;
            Ok(n.saturating_sub(1))
        }
        fn count(&mut self, q: &Query) -> Result<u64> {
            self.0.count(q)
        }
        fn rows_read(&self) -> Option<u64> {
            self.0.rows_read()
        }
    }

    #[test]
    fn a_lost_row_fails_the_queries() {
        let j = job(Kind::Basalt);
        let dir = tempfile::tempdir().expect("tempdir");
        let recs = Records::new(j.scale, j.seed, PAYLOAD_BYTES).expect("records");
        let store = indexed::open(Kind::Basalt, dir.path(), &j.config(true), IndexSet::ALL).expect("open");
        let mut lossy = Lossy(store);
        load(&lossy, &recs).expect("load");
        let err =
            queries(&j, &mut lossy, &recs, None, &mut Sink::new(&j)).expect_err("a lost row").to_string();
        assert!(err.contains("expected 1"), "{err}");
    }
}
