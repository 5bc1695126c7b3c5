//! YCSB core workloads A–F: 1 KB records (YCSB's 10 fields of 100 bytes,
//! stored as one value), keys `user<hash>` in hashed insert order, zipfian
//! requests with θ = 0.99 (latest for D), scans of 1–100 rows for E. A load
//! phase, then each workload's run phase with 1 and 2 client threads, in
//! YCSB's recommended order (A, B, C, F, D, E: the inserts of D and E come
//! last). Each operation is its own transaction and takes a fresh reader,
//! as an application serving requests would.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::Rng;

use super::{Job, Sink, load, rate};
use crate::datagen::{self, Chooser, Distribution, ValuePool};
use crate::engine::{self, Engine, Result};
use crate::measure::Latencies;

/// Rows per batch in the load phase.
pub const LOAD_BATCH_ROWS: usize = 100;
/// Longest scan of workload E.
pub const SCAN_ROWS_MAX: usize = 100;

/// One workload's mix, in percent.
#[derive(Debug, Clone, Copy)]
struct Mix {
    read: u32,
    update: u32,
    insert: u32,
    scan: u32,
    // The rest is read-modify-write.
}

fn mix(letter: char) -> Option<Mix> {
    Some(match letter {
        'a' => Mix { read: 50, update: 50, insert: 0, scan: 0 },
        'b' => Mix { read: 95, update: 5, insert: 0, scan: 0 },
        'c' => Mix { read: 100, update: 0, insert: 0, scan: 0 },
        'd' => Mix { read: 95, update: 0, insert: 5, scan: 0 },
        'e' => Mix { read: 0, update: 0, insert: 5, scan: 95 },
        'f' => Mix { read: 50, update: 0, insert: 0, scan: 0 },
        _ => return None,
    })
}

/// YCSB's recommended order of the run phases.
pub const ORDER: [char; 6] = ['a', 'b', 'c', 'f', 'd', 'e'];

/// Shared state of a run phase.
struct Phase<'a> {
    engine: &'a dyn Engine,
    pool: &'a ValuePool,
    value_bytes: usize,
    /// Items inserted so far (the load plus D's and E's inserts).
    inserted: &'a AtomicU64,
    /// Next item number to insert.
    next_insert: &'a AtomicU64,
    /// Update version, so every write has new bytes.
    version: &'a AtomicU64,
}

#[derive(Debug, Default)]
struct Outcome {
    ops: u64,
    wrong: u64,
    missing: u64,
}

impl Phase<'_> {
    fn write(&self, id: u64) -> Result<()> {
        let mut v = Vec::new();
        self.pool.fill(id, self.version.fetch_add(1, Ordering::Relaxed) + 1, self.value_bytes, &mut v);
        self.engine.write(&[(datagen::ycsb_key(id), v)])
    }

    fn read(&self, id: u64, out: &mut Outcome) -> Result<()> {
        let mut reader = self.engine.reader()?;
        let found = reader
            .get(&datagen::ycsb_key(id), &mut |v| out.wrong += u64::from(datagen::value_id(v) != Some(id)))?;
        out.missing += u64::from(!found);
        Ok(())
    }

    #[expect(clippy::too_many_arguments, reason = "one thread's whole context")]
    fn client(
        &self,
        m: Mix,
        dist: Distribution,
        ops: u64,
        seed: u64,
        lat: &mut Latencies,
        reads: &mut Latencies,
        out: &mut Outcome,
    ) -> Result<()> {
        let mut rng = datagen::rng(seed, 0);
        let items = self.inserted.load(Ordering::Acquire);
        let mut chooser = Chooser::new(dist, items);
        for _ in 0..ops {
            let p = rng.random_range(0..100u32);
            let t = lat.sample_next().then(Instant::now);
            let present = self.inserted.load(Ordering::Acquire);
            let id = chooser.next(&mut rng, present).min(present - 1);
            if p < m.read {
                let r = Instant::now();
                self.read(id, out)?;
                reads.record(r.elapsed());
            } else if p < m.read + m.update {
                self.write(id)?;
            } else if p < m.read + m.update + m.insert {
                let new = self.next_insert.fetch_add(1, Ordering::Relaxed);
                self.write(new)?;
                self.inserted.fetch_max(new + 1, Ordering::Release);
            } else if p < m.read + m.update + m.insert + m.scan {
                let len = rng.random_range(1..=SCAN_ROWS_MAX);
                let mut reader = self.engine.reader()?;
                reader.scan(&datagen::ycsb_key(id), None, len, &mut |k, v| {
                    out.wrong += u64::from(datagen::value_id(v).map(datagen::ycsb_key).as_deref() != Some(k));
                })?;
            } else {
                self.read(id, out)?;
                self.write(id)?;
            }
            if let Some(t) = t {
                lat.record(t.elapsed());
            }
            out.ops += 1;
        }
        Ok(())
    }
}

/// Loads the records, then runs the job's workloads with each thread count.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let engine = engine::open(job.engine, dir, &job.config(false))?;
    let pool = ValuePool::new(job.seed);
    let stats = load(engine.as_ref(), n, LOAD_BATCH_ROWS, |i, (k, v)| {
        *k = datagen::ycsb_key(i);
        pool.fill(i, 0, job.value_bytes, v);
    })?;
    let t = Instant::now();
    engine.settle()?;
    let settle = t.elapsed();
    sink.put_in("ycsb-load", "hashed", 1, "insert_rows_per_s", rate(n, stats.took), "rows/s");
    sink.put_in(
        "ycsb-load",
        "hashed",
        1,
        "insert_settled_rows_per_s",
        rate(n, stats.took + settle),
        "rows/s",
    );

    let inserted = AtomicU64::new(n);
    let next_insert = AtomicU64::new(n);
    let version = AtomicU64::new(0);
    let phase = Phase {
        engine: engine.as_ref(),
        pool: &pool,
        value_bytes: job.value_bytes,
        inserted: &inserted,
        next_insert: &next_insert,
        version: &version,
    };
    for letter in ORDER.into_iter().filter(|l| job.ycsb.contains(l)) {
        let m = mix(letter).ok_or("unknown YCSB workload")?;
        let dist = if letter == 'd' { Distribution::Latest } else { job.distribution };
        for &threads in &job.threads {
            run_phase(job, &phase, letter, m, dist, threads, sink)?;
            engine.settle()?;
        }
    }
    sink.put_peak_memory("peak_memory_bytes");
    Ok(())
}

fn run_phase(
    job: &Job,
    phase: &Phase<'_>,
    letter: char,
    m: Mix,
    dist: Distribution,
    threads: usize,
    sink: &mut Sink,
) -> Result<()> {
    let threads = threads.max(1);
    let per_thread = job.ops / threads as u64;
    let seed = job.seed ^ (u64::from(letter) << 8) ^ threads as u64;
    let t = Instant::now();
    let results: Vec<Result<(Latencies, Latencies, Outcome)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || {
                    let (mut lat, mut reads, mut out) =
                        (Latencies::new(2), Latencies::new(1), Outcome::default());
                    phase.client(
                        m,
                        dist,
                        per_thread,
                        datagen::mix64(seed + th as u64),
                        &mut lat,
                        &mut reads,
                        &mut out,
                    )?;
                    Ok((lat, reads, out))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into())))
            .collect()
    });
    let took = t.elapsed();
    let (mut lat, mut reads, mut total) = (Latencies::new(1), Latencies::new(1), Outcome::default());
    for r in results {
        let (l, rd, o) = r?;
        lat.merge(l);
        reads.merge(rd);
        total.ops += o.ops;
        total.wrong += o.wrong;
        total.missing += o.missing;
    }
    if total.wrong > 0 {
        return Err(format!("ycsb-{letter}: {} reads returned another row", total.wrong).into());
    }
    // Latest (D) may pick an item whose insert is still in flight in
    // another thread; anything else missing is a bug.
    let tolerated = if dist == Distribution::Latest && threads > 1 { total.ops / 100 } else { 0 };
    if total.missing > tolerated {
        return Err(format!("ycsb-{letter}: {} present keys were not found", total.missing).into());
    }
    let w = format!("ycsb-{letter}");
    let d = dist.name();
    sink.put_in(&w, d, threads, "ops_per_s", rate(total.ops, took), "ops/s");
    sink.put_in(&w, d, threads, "op_p50_us", lat.percentile_us(50.0), "us");
    sink.put_in(&w, d, threads, "op_p99_us", lat.percentile_us(99.0), "us");
    if !reads.is_empty() {
        sink.put_in(&w, d, threads, "get_p50_us", reads.percentile_us(50.0), "us");
        sink.put_in(&w, d, threads, "get_p99_us", reads.percentile_us(99.0), "us");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_are_ycsbs() {
        for l in ORDER {
            let m = mix(l).expect("mix");
            assert!(m.read + m.update + m.insert + m.scan <= 100);
        }
        assert_eq!(mix('f').map(|m| 100 - m.read), Some(50), "F: half read-modify-write");
        assert!(mix('g').is_none());
    }
}
