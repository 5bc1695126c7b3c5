//! Stores of records with secondary indexes: seed 000's scenario. Each
//! record has a primary key `id`, an integer field `score`, two string
//! fields `name` and `region` and a payload. The indexes are `by_score`
//! on `(score)`, `by_name` on `(name)` carrying `score` (Basalt's
//! `include`; SQLite gets the same answer from a `(name, score)` index,
//! the covering index its docs advise) and the composite `by_region` on
//! `(region, score)`. Basalt keeps its indexes itself; SQLite with
//! `CREATE INDEX`; an engine without indexes reads with a filtered scan.
//!
//! The fields are spread by permutations of `0..n` so that the rows of one
//! value lie all over the primary-key order, as real data does: `score` is
//! unique, `name` shared by 10 records, `region` by 1,000.

mod basalt;
mod sqlite;

use std::path::Path;

use crate::datagen::ValuePool;
use crate::engine::{Config, Kind, Result};

/// Records per `name` value.
pub const NAME_ROWS: u64 = 10;
/// Records per `region` value.
pub const REGION_ROWS: u64 = 1000;
/// Payload bytes per record.
pub const PAYLOAD_BYTES: usize = 100;

/// One record.
#[derive(Debug, Clone, PartialEq)]
pub struct Rec {
    pub id: i64,
    pub name: String,
    pub score: i64,
    pub region: String,
    pub payload: Vec<u8>,
}

/// The permutations' multipliers as fractions of `n` (golden-ratio-like
/// constants: consecutive ids land far apart, so a block of neighbouring
/// records spans the whole range of each field and no zone map can narrow
/// a scan for free).
const SCORE_FRACTION: f64 = 0.618_033_988_7;
const NAME_FRACTION: f64 = 0.754_877_666_2;
const REGION_FRACTION: f64 = 0.569_840_291_0;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The smallest multiplier at or above `fraction * n` coprime with `n`:
/// `i -> i * m mod n` is then a permutation of `0..n`.
fn multiplier(fraction: f64, n: u64) -> u64 {
    let mut m = ((n as f64 * fraction) as u64).max(1);
    while gcd(m, n) != 1 {
        m += 1;
    }
    m
}

fn permute(i: u64, mul: u64, n: u64) -> u64 {
    ((u128::from(i) * u128::from(mul)) % u128::from(n)) as u64
}

/// The fields of records `0..n`.
#[derive(Debug, Clone)]
pub struct Records {
    n: u64,
    /// The multipliers of `score`, `name` and `region`.
    muls: [u64; 3],
    pool: ValuePool,
    payload_bytes: usize,
}

impl Records {
    /// Records `0..n`; `n` must be a multiple of [`REGION_ROWS`].
    pub fn new(n: u64, seed: u64, payload_bytes: usize) -> Result<Records> {
        if n == 0 || !n.is_multiple_of(REGION_ROWS) {
            return Err(format!(
                "the resilientdb workload needs a multiple of {REGION_ROWS} records, not {n}"
            )
            .into());
        }
        let muls = [SCORE_FRACTION, NAME_FRACTION, REGION_FRACTION].map(|f| multiplier(f, n));
        Ok(Records { n, muls, pool: ValuePool::new(seed), payload_bytes })
    }

    /// How many records (never zero).
    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn score(&self, id: u64) -> i64 {
        permute(id, self.muls[0], self.n) as i64
    }

    pub fn name(&self, id: u64) -> String {
        format!("user-{:09}", permute(id, self.muls[1], self.n) / NAME_ROWS)
    }

    pub fn region(&self, id: u64) -> String {
        format!("region-{:06}", permute(id, self.muls[2], self.n) / REGION_ROWS)
    }

    /// The `k`-th name value (`k < n / 10`).
    pub fn name_value(k: u64) -> String {
        format!("user-{k:09}")
    }

    /// The `k`-th region value (`k < n / 1000`).
    pub fn region_value(k: u64) -> String {
        format!("region-{k:06}")
    }

    pub fn payload(&self, id: u64, out: &mut Vec<u8>) {
        self.pool.fill(id, 0, self.payload_bytes, out);
    }

    pub fn record(&self, id: u64) -> Rec {
        let mut payload = Vec::new();
        self.payload(id, &mut payload);
        Rec { id: id as i64, name: self.name(id), score: self.score(id), region: self.region(id), payload }
    }
}

/// Which secondary indexes a store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSet {
    pub score: bool,
    pub name: bool,
    pub region: bool,
}

impl IndexSet {
    pub const NONE: IndexSet = IndexSet { score: false, name: false, region: false };
    pub const NAME: IndexSet = IndexSet { score: false, name: true, region: false };
    pub const REGION: IndexSet = IndexSet { score: false, name: false, region: true };
    pub const ALL: IndexSet = IndexSet { score: true, name: true, region: true };

    pub fn count(self) -> usize {
        usize::from(self.score) + usize::from(self.name) + usize::from(self.region)
    }
}

/// A query: which records it selects.
#[derive(Debug, Clone)]
pub enum Query {
    /// `score = v`.
    ScoreEq(i64),
    /// `lo <= score < hi`.
    ScoreRange(i64, i64),
    /// `name = v`.
    NameEq(String),
    /// `region = v`.
    RegionEq(String),
}

impl Query {
    /// Whether record `r` (only the fields a query reads) matches.
    pub fn matches(&self, score: i64, name: Option<&str>, region: Option<&str>) -> bool {
        match self {
            Query::ScoreEq(v) => score == *v,
            Query::ScoreRange(lo, hi) => (*lo..*hi).contains(&score),
            Query::NameEq(v) => name == Some(v.as_str()),
            Query::RegionEq(v) => region == Some(v.as_str()),
        }
    }
}

/// One row of an answer; covering queries leave the payload and the
/// string field they do not select out.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub id: i64,
    pub score: i64,
    pub name: Option<&'a str>,
    pub region: Option<&'a str>,
    pub payload: Option<&'a [u8]>,
}

/// An open store.
pub trait IndexedStore {
    /// Writes `recs` as one atomic batch (one transaction), without fsync.
    fn insert(&self, recs: &[Rec]) -> Result<()>;

    /// Makes everything durable and waits for background work.
    fn settle(&self) -> Result<()>;

    /// Starts a batch of reads (SQLite: a read transaction, as the other
    /// engines' readers read one state).
    fn begin_reads(&mut self) -> Result<()>;

    /// Ends the batch of reads.
    fn end_reads(&mut self) -> Result<()>;

    /// The record `id`, whole.
    fn get(&mut self, id: i64, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<bool>;

    /// Visits the records `q` selects: whole, or (`covering`) only `id`,
    /// `score` and the string field `q` reads. Returns how many.
    fn query(&mut self, q: &Query, covering: bool, visit: &mut dyn FnMut(RowRef<'_>)) -> Result<usize>;

    /// How many records `q` selects.
    fn count(&mut self, q: &Query) -> Result<u64>;

    /// Rows and index entries the engine read so far, by its own counters
    /// (`None`: the engine keeps none).
    fn rows_read(&self) -> Option<u64>;
}

/// The engines with an indexed store: Basalt (with indexes, or with none
/// and filtered scans) and SQLite.
pub fn supports(kind: Kind) -> bool {
    matches!(kind, Kind::Basalt | Kind::Sqlite)
}

/// Opens a store of `kind` in the empty directory `dir` keeping `indexes`.
pub fn open(kind: Kind, dir: &Path, cfg: &Config, indexes: IndexSet) -> Result<Box<dyn IndexedStore>> {
    std::fs::create_dir_all(dir)?;
    Ok(match kind {
        Kind::Basalt => Box::new(basalt::BasaltStore::open(dir, cfg, indexes)?),
        Kind::Sqlite => Box::new(sqlite::SqliteStore::open(dir, cfg, indexes)?),
        other => return Err(format!("{} has no indexed store in this harness", other.name()).into()),
    })
}

/// The settings of `kind`'s store, for the report.
pub fn options(kind: Kind) -> &'static str {
    match kind {
        Kind::Basalt => basalt::OPTIONS,
        Kind::Sqlite => sqlite::OPTIONS,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_permutations_spread_over_the_key_order() {
        for n in [1_000u64, 30_000] {
            let recs = Records::new(n, 1, PAYLOAD_BYTES).expect("records");
            let mut scores: Vec<i64> = (0..n).map(|i| recs.score(i)).collect();
            // Neighbouring ids are far apart in score.
            assert!((recs.score(1) - recs.score(0)).unsigned_abs() > n / 4, "n {n}");
            scores.sort_unstable();
            assert!(scores.iter().enumerate().all(|(i, &s)| s == i as i64), "n {n}: score is a permutation");
            let mut names = std::collections::HashMap::new();
            let mut regions = std::collections::HashMap::new();
            for i in 0..n {
                *names.entry(recs.name(i)).or_insert(0u64) += 1;
                *regions.entry(recs.region(i)).or_insert(0u64) += 1;
            }
            assert!(names.len() as u64 == n / NAME_ROWS && names.values().all(|&c| c == NAME_ROWS));
            assert!(regions.len() as u64 == n / REGION_ROWS && regions.values().all(|&c| c == REGION_ROWS));
        }
    }
}
