//! Seed 002 (MarbleDB): N records (100,000 by default) with 512-byte
//! values, written in key order; point lookups; a full sequential scan; an
//! equality search on a field inside the value with no index (a full scan
//! that decodes the field); 100-row range queries; memory used. Lookups
//! check every value whole; so does an untimed scan before the timed ones
//! (which, like the range queries, check each row's id: a whole-value
//! check per row would weigh on the scan it measures). The back-pressure
//! run repeats the write phase under a write-buffer budget. With a memory
//! limit the read phases run again under it, after an untimed warm-up
//! run of the same phases.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{Job, Opener, Sink, disk_bytes, end_limited, load, rate, start_limited};
use crate::datagen::{self, ValuePool};
use crate::engine::{Engine, Result};
use crate::measure::Latencies;

/// Rows per write batch: small, so the longest batch shows a stall.
pub const BATCH_ROWS: usize = 100;
/// Rows per range query.
pub const RANGE_ROWS: usize = 100;
/// Distinct values of the searched field: each equality query matches ~1%.
pub const CATEGORIES: u64 = 100;
/// Equality queries timed (the median is reported).
pub const EQUALITY_QUERIES: u64 = 5;
/// The shortest time a scan measurement repeats for.
const SCAN_MIN: Duration = Duration::from_millis(500);

/// The searched field of record `id`: bytes 16..24 of its value.
pub fn category(id: u64) -> u64 {
    datagen::mix64(id ^ 0x5eed) % CATEGORIES
}

/// Where the searched field lies in a value.
const FIELD: std::ops::Range<usize> = 16..24;

/// The value of record `id`: the pool's value with the searched field.
fn record(pool: &ValuePool, id: u64, value_bytes: usize, out: &mut Vec<u8>) {
    pool.fill(id, 0, value_bytes.max(FIELD.end), out);
    out[FIELD].copy_from_slice(&category(id).to_le_bytes());
}

/// The searched field of a value.
fn field(value: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(value.get(FIELD)?.try_into().ok()?))
}

fn write_records(job: &Job, engine: &dyn Engine, sink: &mut Sink, metrics: bool) -> Result<()> {
    let pool = ValuePool::new(job.seed);
    let stats = load(engine, job.scale, BATCH_ROWS, |i, (k, v)| {
        k.clear();
        k.extend_from_slice(&datagen::u64_key(i));
        record(&pool, i, job.value_bytes, v);
    })?;
    if metrics {
        sink.put("insert_rows_per_s", rate(job.scale, stats.took), "rows/s");
        sink.put("stall_max_ms", stats.batch_max.as_secs_f64() * 1e3, "ms");
    }
    Ok(())
}

/// The main run: write, lookups, scan, unindexed equality, ranges, memory.
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let engine = open(dir)?;
    write_records(job, engine.as_ref(), sink, true)?;
    sink.put_peak_memory("write_peak_memory_bytes", engine.as_ref());
    engine.settle()?;
    sink.put("disk_bytes", disk_bytes(dir) as f64, "bytes");
    read_phases(job, engine.as_ref(), sink)?;
    sink.put_peak_memory("peak_memory_bytes", engine.as_ref());
    drop(engine);
    if let Some(engine) = start_limited(job, open, dir, sink)? {
        // Untimed warm-up: the same phases into a sink that is dropped, so
        // the timed ones measure a warm store under the limit, not a cold
        // start (which favours engines whose page faults read ahead).
        read_phases(job, engine.as_ref(), &mut Sink::new(job))?;
        read_phases(job, engine.as_ref(), sink)?;
        end_limited(job, sink);
    }
    if crate::indexed::supports(job.engine) {
        // The equality search with an index on the field: the records
        // loaded again into a store that keeps one (after the other
        // phases, so their memory figures stay as they were).
        let pool = ValuePool::new(job.seed);
        let value = |id: u64, out: &mut Vec<u8>| {
            record(&pool, id, job.value_bytes, out);
            category(id)
        };
        let indexed_dir = dir.with_extension("indexed");
        let us = super::resilientdb::indexed_search(job, &indexed_dir, &value, CATEGORIES, EQUALITY_QUERIES)?;
        sink.put("indexed_query_us", us, "us");
    }
    Ok(())
}

fn read_phases(job: &Job, engine: &dyn Engine, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let pool = ValuePool::new(job.seed);
    let mut expected = Vec::new();
    let mut rng = datagen::rng(job.seed, 2);
    let mut chooser = datagen::Chooser::new(job.distribution, n);
    let mut lat = Latencies::new(4);
    let mut bad = 0u64;
    let mut reader = engine.reader()?;
    let t = Instant::now();
    for _ in 0..job.ops {
        let i = chooser.next(&mut rng, n);
        let found = lat.time(|| {
            reader.get(&datagen::u64_key(i), &mut |v| {
                record(&pool, i, job.value_bytes, &mut expected);
                bad += u64::from(v != expected.as_slice());
            })
        })?;
        bad += u64::from(!found);
    }
    sink.put("get_ops_per_s", rate(job.ops, t.elapsed()), "ops/s");
    sink.put_latency("get", &mut lat);

    let mut next = 0u64;
    let verified = reader.scan(&[], None, usize::MAX, &mut |k, v| {
        record(&pool, next, job.value_bytes, &mut expected);
        bad += u64::from(k != datagen::u64_key(next) || v != expected.as_slice());
        next += 1;
    })?;
    bad += u64::from(verified as u64 != n);

    let (mut rows, mut passes) = (0u64, 0u32);
    let t = Instant::now();
    while passes < 3 || t.elapsed() < SCAN_MIN {
        let mut next = 0u64;
        rows += reader.scan(&[], None, usize::MAX, &mut |_, v| {
            bad += u64::from(datagen::value_id(v) != Some(next));
            next += 1;
        })? as u64;
        passes += 1;
    }
    sink.put("scan_rows_per_s", rate(rows, t.elapsed()), "rows/s");

    let mut query_us = Vec::new();
    for target in 0..EQUALITY_QUERIES {
        let expected = (0..n).filter(|&i| category(i) == target).count();
        let mut matches = 0usize;
        let t = Instant::now();
        reader.scan(&[], None, usize::MAX, &mut |_, v| {
            matches += usize::from(field(v) == Some(target));
        })?;
        query_us.push(t.elapsed().as_secs_f64() * 1e6);
        bad += u64::from(matches != expected);
    }
    query_us.sort_by(f64::total_cmp);
    sink.put("index_query_us", query_us[query_us.len() / 2], "us");

    let queries = (job.ops / 10).max(1000);
    let mut range_rows = 0u64;
    let t = Instant::now();
    for _ in 0..queries {
        let start = rng.random_range(0..n);
        let mut next = start;
        range_rows += reader.scan(&datagen::u64_key(start), None, RANGE_ROWS, &mut |_, v| {
            bad += u64::from(datagen::value_id(v) != Some(next));
            next += 1;
        })? as u64;
    }
    sink.put("range_scan_ops_per_s", rate(queries, t.elapsed()), "ops/s");
    drop(reader);
    if bad > 0 || range_rows == 0 {
        return Err(format!("marbledb: {bad} wrong or missing rows").into());
    }
    Ok(())
}

/// The back-pressure run: the write phase under the job's budget. Engines
/// without a budget knob report memory only.
pub fn run_backpressure(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let engine = open(dir)?;
    let budget = engine.has_write_buffer_budget();
    write_records(job, engine.as_ref(), sink, budget)?;
    for (metric, value, unit) in engine.write_breakdown() {
        sink.put(metric, value, unit);
    }
    sink.put_peak_memory("peak_memory_bytes", engine.as_ref());
    let t = Instant::now();
    engine.settle()?;
    if budget {
        sink.put("settle_ms", t.elapsed().as_secs_f64() * 1e3, "ms");
    }
    Ok(())
}
