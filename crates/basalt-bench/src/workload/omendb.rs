//! Seeds 001/004 (OmenDB): bulk insert of N rows with 8-byte keys in
//! sequential or random order, or a lognormal key set in random order,
//! settle, then random point lookups uniform over the present keys, and as
//! many lookups of missing keys; every value read is checked whole. For
//! Basalt builds an untimed pass breaks lookups down by phase (see
//! [`breakdown`]). With a memory limit the lookups run again under it,
//! after an untimed warm-up pass of as many lookups.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{Job, Opener, Sink, disk_bytes, end_limited, load, rate, start_limited};
use crate::datagen::{self, KeyOrder, ValuePool};
use crate::engine::{self, Engine, Result};
use crate::measure::Latencies;

/// Rows per write batch (one transaction each).
pub const BATCH_ROWS: usize = 1000;
/// Lookups per reader (read transaction) before it is renewed.
pub const READS_PER_READER: u64 = 1000;

/// Runs the workload for the job's key order (sequential, random or
/// lognormal).
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let order = KeyOrder::new(job.distribution, n, job.seed)
        .ok_or_else(|| format!("omendb: {} is not a key order", job.distribution.name()))?;
    let engine = open(dir)?;
    let pool = ValuePool::new(job.seed);
    let stats = load(engine.as_ref(), n, BATCH_ROWS, |i, (k, v)| {
        k.clear();
        k.extend_from_slice(&datagen::u64_key(order.key_number(i)));
        pool.fill(i, 0, job.value_bytes, v);
    })?;
    sink.put("insert_rows_per_s", rate(n, stats.took), "rows/s");
    let t = Instant::now();
    engine.settle()?;
    let settle = t.elapsed();
    sink.put("settle_ms", settle.as_secs_f64() * 1e3, "ms");
    sink.put("insert_settled_rows_per_s", rate(n, stats.took + settle), "rows/s");
    sink.put("disk_bytes", disk_bytes(dir) as f64, "bytes");

    let lookups = Lookups { order: &order, pool: &pool, n, value_bytes: job.value_bytes };
    read_phases(job, engine.as_ref(), &lookups, sink)?;
    sink.put_peak_memory("peak_memory_bytes", engine.as_ref());
    drop(engine);
    breakdown(job, dir, &lookups, sink)?;
    if let Some(engine) = start_limited(job, open, dir, sink)? {
        let mut rng = datagen::rng(job.seed, 3);
        lookups.run(engine.as_ref(), job.ops, Keys::Present, &mut rng, &mut Latencies::new(u64::MAX))?;
        read_phases(job, engine.as_ref(), &lookups, sink)?;
        end_limited(job, sink);
    }
    Ok(())
}

/// The timed passes: present keys, then missing keys.
fn read_phases(job: &Job, engine: &dyn Engine, lookups: &Lookups<'_>, sink: &mut Sink) -> Result<()> {
    let mut rng = datagen::rng(job.seed, 1);
    let mut lat = Latencies::new(4);
    let took = lookups.run(engine, job.ops, Keys::Present, &mut rng, &mut lat)?;
    sink.put("get_ops_per_s", rate(job.ops, took), "ops/s");
    sink.put_latency("get", &mut lat);

    let mut lat = Latencies::new(4);
    let took = lookups.run(engine, job.ops, Keys::Missing, &mut rng, &mut lat)?;
    sink.put("get_missing_ops_per_s", rate(job.ops, took), "ops/s");
    sink.put_latency("get_missing", &mut lat);
    Ok(())
}

/// Which keys a pass of lookups asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Keys of the store's items, each value checked.
    Present,
    /// The missing key of each item.
    Missing,
}

/// What a pass of lookups needs: the store's keys and how its values
/// were made.
struct Lookups<'a> {
    order: &'a KeyOrder,
    pool: &'a ValuePool,
    n: u64,
    value_bytes: usize,
}

impl Lookups<'_> {
    /// `ops` lookups of items uniform over the store's `n`, a new reader
    /// every [`READS_PER_READER`]; fails if a present key is not found, a
    /// missing one is, or a value is not, byte for byte, the one written.
    /// Returns the wall time of the pass.
    fn run(
        &self,
        engine: &dyn Engine,
        ops: u64,
        keys: Keys,
        rng: &mut impl Rng,
        lat: &mut Latencies,
    ) -> Result<Duration> {
        let mut wrong = None;
        let mut unexpected = 0u64;
        let t = Instant::now();
        let mut done = 0;
        while done < ops {
            let mut reader = engine.reader()?;
            for _ in 0..READS_PER_READER.min(ops - done) {
                let i = rng.random_range(0..self.n);
                let key = datagen::u64_key(match keys {
                    Keys::Present => self.order.key_number(i),
                    Keys::Missing => self.order.missing_number(i, self.n),
                });
                let found = lat.time(|| {
                    reader.get(&key, &mut |v| {
                        if let Err(e) = self.pool.check(v, i, 0..=0, self.value_bytes) {
                            wrong.get_or_insert(e);
                        }
                    })
                })?;
                unexpected += u64::from(found != (keys == Keys::Present));
                done += 1;
            }
        }
        let took = t.elapsed();
        if let Some(e) = wrong {
            return Err(format!("omendb: a wrong value: {e}").into());
        }
        if unexpected > 0 {
            let what =
                if keys == Keys::Present { "present keys were not found" } else { "missing keys were found" };
            return Err(format!("omendb: {unexpected} {what}").into());
        }
        Ok(took)
    }
}

/// Lookups per pass of Basalt's latency breakdown, at most (fewer when the
/// job's timed passes are shorter).
pub const BREAKDOWN_OPS: u64 = 100_000;

/// The phases of a Basalt lookup (the fields of `basalt::GetLatency`) and
/// their sum, as named in the metrics `get_breakdown_<phase>_ns` and
/// `get_missing_breakdown_<phase>_ns`.
pub const BREAKDOWN_PHASES: [&str; 6] = ["memtable", "filter", "index", "block", "search", "total"];

/// Basalt only, after the timed passes: the database reopened with
/// `Options::timing_stats` on, a warm-up pass of present keys, then a pass
/// of present and a pass of missing keys, each recorded as the mean
/// nanoseconds per lookup in each phase. The clock reads of the timing are
/// in these figures, so they add up to more than the timed passes' mean.
fn breakdown(job: &Job, dir: &Path, lookups: &Lookups<'_>, sink: &mut Sink) -> Result<()> {
    let Some(engine) = engine::open_timed(job.engine, dir, &job.config(true))? else { return Ok(()) };
    let ops = job.ops.min(BREAKDOWN_OPS);
    let mut rng = datagen::rng(job.seed, 2);
    let mut unsampled = Latencies::new(u64::MAX);
    let totals = |engine: &dyn Engine| -> Result<(u64, [f64; 6])> {
        let l = engine.get_latency().ok_or("omendb: Basalt opened for timing reports no timing")?;
        let phases = [l.memtable_ns, l.filter_ns, l.index_ns, l.block_ns, l.search_ns];
        let mut sums = [0.0; 6];
        for (sum, mean) in sums.iter_mut().zip(phases) {
            *sum = mean * l.gets as f64;
        }
        sums[5] = sums[..5].iter().sum();
        Ok((l.gets, sums))
    };
    lookups.run(engine.as_ref(), ops, Keys::Present, &mut rng, &mut unsampled)?;
    for (keys, prefix) in [(Keys::Present, "get_breakdown"), (Keys::Missing, "get_missing_breakdown")] {
        let (gets_before, before) = totals(engine.as_ref())?;
        lookups.run(engine.as_ref(), ops, keys, &mut rng, &mut unsampled)?;
        let (gets_after, after) = totals(engine.as_ref())?;
        let gets = (gets_after - gets_before).max(1) as f64;
        for ((phase, b), a) in BREAKDOWN_PHASES.iter().zip(before).zip(after) {
            sink.put(&format!("{prefix}_{phase}_ns"), (a - b) / gets, "ns");
        }
    }
    Ok(())
}
