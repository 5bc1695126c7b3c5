//! Seeds 001/004 (OmenDB): bulk insert of N rows with 8-byte keys in
//! sequential or random order, or a lognormal key set in random order,
//! settle, then random point lookups uniform over the present keys, and as
//! many lookups of missing keys.

use std::path::Path;
use std::time::Instant;

use rand::Rng;

use super::{Job, Sink, disk_bytes, load, rate};
use crate::datagen::{self, KeyOrder, ValuePool};
use crate::engine::{self, Result};
use crate::measure::Latencies;

/// Rows per write batch (one transaction each).
pub const BATCH_ROWS: usize = 1000;
/// Lookups per reader (read transaction) before it is renewed.
pub const READS_PER_READER: u64 = 1000;

/// Runs the workload for the job's key order (sequential, random or
/// lognormal).
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let order = KeyOrder::new(job.distribution, n, job.seed)
        .ok_or_else(|| format!("omendb: {} is not a key order", job.distribution.name()))?;
    let engine = engine::open(job.engine, dir, &job.config(true))?;
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

    let mut rng = datagen::rng(job.seed, 1);
    let mut lat = Latencies::new(4);
    let mut wrong = None;
    let mut missing = 0u64;
    let t = Instant::now();
    let mut done = 0;
    while done < job.ops {
        let mut reader = engine.reader()?;
        for _ in 0..READS_PER_READER.min(job.ops - done) {
            let i = rng.random_range(0..n);
            let key = datagen::u64_key(order.key_number(i));
            let found = lat.time(|| {
                reader.get(&key, &mut |v| {
                    if datagen::value_id(v) != Some(i) {
                        wrong = Some(i);
                    }
                })
            })?;
            missing += u64::from(!found);
            done += 1;
        }
    }
    let took = t.elapsed();
    if let Some(i) = wrong {
        return Err(format!("omendb: key of item {i} returned another row's value").into());
    }
    if missing > 0 {
        return Err(format!("omendb: {missing} present keys were not found").into());
    }
    sink.put("get_ops_per_s", rate(job.ops, took), "ops/s");
    sink.put_latency("get", &mut lat);

    let mut lat = Latencies::new(4);
    let mut found = 0u64;
    let t = Instant::now();
    let mut done = 0;
    while done < job.ops {
        let mut reader = engine.reader()?;
        for _ in 0..READS_PER_READER.min(job.ops - done) {
            let key = datagen::u64_key(order.missing_number(rng.random_range(0..n), n));
            found += u64::from(lat.time(|| reader.get(&key, &mut |_| {}))?);
            done += 1;
        }
    }
    let took = t.elapsed();
    if found > 0 {
        return Err(format!("omendb: {found} missing keys were found").into());
    }
    sink.put("get_missing_ops_per_s", rate(job.ops, took), "ops/s");
    sink.put_latency("get_missing", &mut lat);
    sink.put_peak_memory("peak_memory_bytes");
    Ok(())
}
