//! YCSB core workloads A–F: 1 KB records (YCSB's 10 fields of 100 bytes,
//! stored as one value), keys `user<hash>` in hashed insert order, zipfian
//! requests with θ = 0.99 (latest for D), scans of 1–100 rows for E. A load
//! phase, then each workload's run phase with 1 and 2 client threads, in
//! YCSB's recommended order (A, B, C, F, D, E: the inserts of D and E come
//! last). Each operation is its own transaction and takes a fresh reader,
//! as an application serving requests would. The harness keeps the latest
//! acknowledged version of every item: a read must return, byte for byte,
//! that version or a newer one (a concurrent update), so a stale value
//! fails the run; a scan checks each row's key, id and version. With a
//! memory limit the run phases go again under it, after an untimed full
//! scan.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::Rng;

use super::{Job, Opener, Sink, end_limited, load, rate, start_limited};
use crate::datagen::{self, Chooser, Distribution, ValuePool};
use crate::engine::{Engine, Result};
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
    items: &'a Items,
}

/// What the harness knows of the items, across phases and passes.
struct Items {
    /// Items inserted so far (the load plus D's and E's inserts).
    inserted: AtomicU64,
    /// Next item number to insert.
    next_insert: AtomicU64,
    /// Update version, so every write has new bytes.
    version: AtomicU64,
    /// The latest acknowledged version of each item (0: the load's).
    acknowledged: Vec<AtomicU64>,
    /// Serialise the writes of one item (by item number modulo the count).
    write_locks: Vec<std::sync::Mutex<()>>,
}

/// Stripes of [`Items::write_locks`].
const WRITE_LOCK_STRIPES: u64 = 4096;

#[derive(Debug, Default)]
struct Outcome {
    ops: u64,
    wrong: u64,
    missing: u64,
    /// The first wrong value, described.
    first_wrong: Option<String>,
}

impl Outcome {
    fn wrong(&mut self, what: String) {
        self.wrong += 1;
        self.first_wrong.get_or_insert(what);
    }
}

impl Phase<'_> {
    fn acknowledged(&self, id: u64) -> Result<&AtomicU64> {
        self.items
            .acknowledged
            .get(id as usize)
            .ok_or_else(|| format!("ycsb: item {id} beyond the version table").into())
    }

    fn write(&self, id: u64) -> Result<()> {
        // Two clients may update one item at once; its versions must
        // commit in the order they were issued, or "the latest
        // acknowledged version" would not be the engine's latest value
        // (the later-issued write may commit first and then be
        // overwritten). So the harness serialises writes of one item (a
        // striped lock: writes of other items rarely wait); reads take no
        // lock.
        let stripe = &self.items.write_locks[(id % WRITE_LOCK_STRIPES) as usize];
        let _serialised = stripe.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v = Vec::new();
        let version = self.items.version.fetch_add(1, Ordering::Relaxed) + 1;
        self.pool.fill(id, version, self.value_bytes, &mut v);
        self.engine.write(&[(datagen::ycsb_key(id), v)])?;
        self.acknowledged(id)?.fetch_max(version, Ordering::AcqRel);
        Ok(())
    }

    fn read(&self, id: u64, out: &mut Outcome) -> Result<()> {
        let floor = self.acknowledged(id)?.load(Ordering::Acquire);
        let mut reader = self.engine.reader()?;
        let mut wrong = None;
        let found = reader.get(&datagen::ycsb_key(id), &mut |v| {
            // Issued before this check: a concurrent update's version
            // may be newer than `floor`, never newer than this.
            let latest = self.items.version.load(Ordering::Acquire);
            wrong = self.pool.check(v, id, floor..=latest, self.value_bytes).err();
        })?;
        if let Some(e) = wrong {
            out.wrong(e);
        }
        out.missing += u64::from(!found);
        Ok(())
    }

    fn scan(&self, id: u64, len: usize, out: &mut Outcome) -> Result<()> {
        let mut reader = self.engine.reader()?;
        reader.scan(&datagen::ycsb_key(id), None, len, &mut |k, v| {
            let Some((row, version)) = datagen::value_header(v) else {
                out.wrong(format!("a scanned value of {} bytes", v.len()));
                return;
            };
            let floor = self.items.acknowledged.get(row as usize).map_or(0, |a| a.load(Ordering::Acquire));
            if datagen::ycsb_key(row) != k || version < floor || v.len() != self.value_bytes.max(16) {
                out.wrong(format!("scanned item {row}: version {version}, {floor} acknowledged"));
            }
        })?;
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
        let items = self.items.inserted.load(Ordering::Acquire);
        let mut chooser = Chooser::new(dist, items);
        for _ in 0..ops {
            let p = rng.random_range(0..100u32);
            let t = lat.sample_next().then(Instant::now);
            let present = self.items.inserted.load(Ordering::Acquire);
            let id = chooser.next(&mut rng, present).min(present - 1);
            if p < m.read {
                let r = Instant::now();
                self.read(id, out)?;
                reads.record(r.elapsed());
            } else if p < m.read + m.update {
                self.write(id)?;
            } else if p < m.read + m.update + m.insert {
                let new = self.items.next_insert.fetch_add(1, Ordering::Relaxed);
                self.write(new)?;
                self.items.inserted.fetch_max(new + 1, Ordering::Release);
            } else if p < m.read + m.update + m.insert + m.scan {
                let len = rng.random_range(1..=SCAN_ROWS_MAX);
                self.scan(id, len, out)?;
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
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let n = job.scale;
    let engine = open(dir)?;
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

    // Room for every insert D and E could make, in both passes.
    let insert_phases = job.ycsb.iter().filter(|l| matches!(l, 'd' | 'e')).count() * job.threads.len() * 2;
    let items = Items {
        inserted: AtomicU64::new(n),
        next_insert: AtomicU64::new(n),
        version: AtomicU64::new(0),
        acknowledged: (0..n + job.ops * insert_phases as u64).map(|_| AtomicU64::new(0)).collect(),
        write_locks: (0..WRITE_LOCK_STRIPES).map(|_| std::sync::Mutex::new(())).collect(),
    };
    let value_bytes = job.value_bytes;
    run_phases(job, &Phase { engine: engine.as_ref(), pool: &pool, value_bytes, items: &items }, sink)?;
    sink.put_peak_memory("peak_memory_bytes", engine.as_ref());
    drop(engine);
    if let Some(engine) = start_limited(job, open, dir, sink)? {
        // Untimed warm-up: one full scan brings the store back in.
        engine.reader()?.scan(&[], None, usize::MAX, &mut |_, _| {})?;
        run_phases(job, &Phase { engine: engine.as_ref(), pool: &pool, value_bytes, items: &items }, sink)?;
        end_limited(job, sink);
    }
    Ok(())
}

/// The job's run phases, in YCSB's order, each with every thread count.
fn run_phases(job: &Job, phase: &Phase<'_>, sink: &mut Sink) -> Result<()> {
    for letter in ORDER.into_iter().filter(|l| job.ycsb.contains(l)) {
        let m = mix(letter).ok_or("unknown YCSB workload")?;
        let dist = if letter == 'd' { Distribution::Latest } else { job.distribution };
        for &threads in &job.threads {
            run_phase(job, phase, letter, m, dist, threads, sink)?;
            phase.engine.settle()?;
        }
    }
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
        if total.first_wrong.is_none() {
            total.first_wrong = o.first_wrong;
        }
    }
    if total.wrong > 0 {
        return Err(format!(
            "ycsb-{letter}: {} reads returned a wrong value (first: {})",
            total.wrong,
            total.first_wrong.unwrap_or_default()
        )
        .into());
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
