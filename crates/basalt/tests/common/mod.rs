//! Helpers shared by the whole-engine test binaries: a seeded RNG, an
//! in-memory oracle, and readers that collect a database's contents.

#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod guard;
pub mod history;
pub mod limit;
pub mod schema_gen;
pub mod table_oracle;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use basalt::testing::MemFs;
use basalt::{Compression, Db, DbIterator, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Seeds for a randomized test: `BASALT_SEED` replays one case, otherwise
/// `BASALT_CASES` (or `default_cases`) cases from a base seed.
pub fn seeds(default_cases: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("BASALT_SEED") {
        return vec![s.parse().expect("BASALT_SEED must be a number")];
    }
    let cases = std::env::var("BASALT_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(default_cases);
    let base: u64 = std::env::var("BASALT_BASE_SEED").ok().and_then(|c| c.parse().ok()).unwrap_or(0x5eed);
    (0..cases).map(|i| base.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i)).collect()
}

/// Runs `case` for every seed; on a failure, reports the seed that replays it.
pub fn run_seeded(name: &str, default_cases: u64, case: impl Fn(u64) + std::panic::RefUnwindSafe) {
    for seed in seeds(default_cases) {
        if let Err(panic) = std::panic::catch_unwind(|| case(seed)) {
            eprintln!("\n{name} failed with seed {seed}; replay with BASALT_SEED={seed}\n");
            std::panic::resume_unwind(panic);
        }
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// The model: key → value.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Options that make every mechanism run on small data: tiny memtables
/// (many flushes and L0 files), tiny blocks (many blocks per SST), random
/// filter and compression settings.
pub fn small_options(fs: &MemFs, rng: &mut StdRng) -> Options {
    Options::default()
        .fs(Arc::new(fs.clone()))
        .memtable_bytes_max(rng.random_range(1_000..20_000))
        .immutable_memtables_max(rng.random_range(1..4))
        .block_bytes_target(rng.random_range(32..2_048))
        .table_block_bytes_target(rng.random_range(32..4_096))
        .settled_block_bytes_target(rng.random_range(32..8_192))
        .bloom_bits_per_key([0, 4, 10][rng.random_range(0..3)])
        .compression(if rng.random_bool(0.5) { Compression::Lz4 } else { Compression::None })
        .index_compression(if rng.random_bool(0.5) { Compression::Lz4 } else { Compression::None })
        .block_cache_bytes(rng.random_range(0..256 << 10))
        .l0_compaction_trigger(rng.random_range(2..5))
        .level1_bytes_target(rng.random_range(4_000..40_000))
        .level_size_ratio(rng.random_range(2..5))
        .sst_bytes_target(rng.random_range(500..8_000))
        .auto_compaction(rng.random_bool(0.8))
        // Half the cases with a row cache small enough to evict.
        .row_cache_bytes(if rng.random_bool(0.5) { rng.random_range(1..64 << 10) } else { 0 })
        // Half the cases read SSTs through maps (MemFs maps by copying).
        .mmap_reads(rng.random_bool(0.5))
        // Half the cases keep keyspace values from a random length on in
        // blob files, moved by compactions at a random garbage share.
        .blob_value_bytes_min(if rng.random_bool(0.5) { rng.random_range(1..100) } else { 0 })
        .blob_gc_garbage_percent(rng.random_range(1..=100))
        // A third of the cases under a write budget that switches memtables
        // below half their size: small L0 files merged in L0 first.
        .write_buffer_bytes_max(if rng.random_bool(1.0 / 3.0) {
            rng.random_range(4_000..40_000)
        } else {
            256 << 20
        })
}

/// A key from a small space, so writes overwrite and delete each other;
/// now and then one with bytes that stress ordering (0x00, 0xff, prefixes).
pub fn random_key(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => Vec::new(),
        1 => {
            let len = rng.random_range(1..4);
            (0..len).map(|_| [0x00, 0x01, 0xfe, 0xff][rng.random_range(0..4)]).collect()
        }
        _ => format!("k{:03}", rng.random_range(0..150)).into_bytes(),
    }
}

pub fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.random_bool(0.1) { rng.random_range(0..2_000) } else { rng.random_range(0..40) };
    (0..len).map(|_| rng.random()).collect()
}

/// A random bound over the key space.
pub fn random_bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

/// What the model holds in a range, in the given order.
pub fn model_range(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    forward: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let valid = match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a < b || (a == b && matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
        }
        _ => true,
    };
    if !valid {
        return Vec::new();
    }
    let it = model.range::<Vec<u8>, _>((lo.as_ref(), hi.as_ref())).map(|(k, v)| (k.clone(), v.clone()));
    if forward { it.collect() } else { it.rev().collect() }
}

/// Everything an iterator yields; panics on an error.
pub fn collect(it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|kv| {
        let (k, v) = kv.expect("iteration failed");
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

/// Everything in the database.
pub fn contents(db: &Db) -> Model {
    collect(db.iter_all()).into_iter().collect()
}

/// Every row of `table` (as `snapshot` sees it, or now), in key order.
pub fn scan_rows(table: &basalt::Table, snapshot: Option<&basalt::Snapshot>) -> Vec<Vec<schema_gen::Cell>> {
    let opts = basalt::ScanOptions::default().snapshot(snapshot);
    let mut rows = Vec::new();
    for batch in table.scan(opts).expect("scan opens") {
        rows.extend(schema_gen::rows_of(&batch.expect("scan batch")));
    }
    rows
}
