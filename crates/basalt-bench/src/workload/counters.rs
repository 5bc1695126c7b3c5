//! Issue 60: counters. [`HOT_KEYS`] counters (8-byte keys, an `i64`
//! little-endian value, each set to 0 by the load) incremented by 1 and 2
//! client threads, each increment a key drawn uniformly from the
//! counters, two ways, each in a fresh database (default options but the
//! shared block cache, writes without sync):
//!
//! - `basalt`: `Db::merge` of `1` into the default keyspace bound to the
//!   builtin `add_i64` operator (no read, so nothing to conflict with);
//! - `basalt-txn`: an optimistic transaction that reads the counter, writes
//!   it plus one and commits, run again when the commit is refused for a
//!   conflict (as the `transactions` workload's `rmw` does).
//!
//! Reported per thread count: `ops_per_s` (increments acknowledged per
//! second) and `aborts_per_commit`. Each thread counts what it
//! incremented, per key; after each phase every counter must equal the
//! increments made to it (by gets), and once more after a flush and a
//! compaction of everything (which folds the merge operands): a lost or a
//! doubled increment fails the run. The parent's run number picks which
//! way goes first in each phase, so neither is always first.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt::{Db, Options, WriteOptions};
use rand::Rng;

use super::{Job, Sink, rate};
use crate::datagen;
use crate::engine::{Config, Result};

/// Counters every increment draws from.
pub const HOT_KEYS: u64 = 16;
/// Increments per phase (split over the threads) when the job names no
/// count.
pub const OPS_DEFAULT: u64 = 200_000;
/// The engine name of the transaction path.
pub const TXN_ENGINE: &str = "basalt-txn";
/// The distribution column of every record: the hot set's size.
const HOT_NAME: &str = "hot-16";
/// Consecutive refused commits of one increment that end the run.
const ABORTS_IN_A_ROW_MAX: u64 = 1_000_000;
/// The random stream of the keys drawn.
const KEYS_STREAM: u64 = 61;

fn key(counter: u64) -> [u8; 8] {
    counter.to_be_bytes()
}

fn count(value: &[u8]) -> Result<i64> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| format!("a counter of {} bytes", value.len()))?;
    Ok(i64::from_le_bytes(bytes))
}

/// A way to increment counters. `Sync`: the threads of a phase share it.
pub trait CounterStore: Sync {
    /// Adds 1 to `key`; returns the commits refused on the way.
    fn increment(&self, key: &[u8]) -> Result<u64>;
    /// The counter's value (0 when absent).
    fn value(&self, key: &[u8]) -> Result<i64>;
    /// Flushes and compacts everything, and waits for it.
    fn compact(&self) -> Result<()>;
}

/// Basalt, by merge or by transaction.
pub struct BasaltCounters {
    db: Db,
    merge: bool,
}

impl BasaltCounters {
    /// Opens a database in `dir` and sets every counter to 0.
    pub fn open(dir: &Path, cfg: &Config, merge: bool) -> Result<BasaltCounters> {
        let db = Db::open(dir, Options::default().block_cache_bytes(cfg.cache_bytes))?;
        if merge {
            db.keyspace("default")?.set_merge_operator("add_i64")?;
        }
        for c in 0..HOT_KEYS {
            db.put(key(c), 0i64.to_le_bytes())?;
        }
        db.flush()?;
        db.wait_for_background_work()?;
        Ok(BasaltCounters { db, merge })
    }
}

impl CounterStore for BasaltCounters {
    fn increment(&self, key: &[u8]) -> Result<u64> {
        let opts = WriteOptions::default().sync(false);
        if self.merge {
            let mut batch = basalt::WriteBatch::new();
            batch.merge(key, 1i64.to_le_bytes());
            self.db.write_opt(batch, &opts)?;
            return Ok(0);
        }
        let mut aborts = 0;
        loop {
            let mut tx = self.db.transaction();
            let old = match tx.get(key)? {
                Some(v) => count(&v)?,
                None => 0,
            };
            tx.put(key, (old + 1).to_le_bytes())?;
            match tx.commit_opt(&opts) {
                Ok(()) => return Ok(aborts),
                Err(basalt::Error::Conflict(_)) => aborts += 1,
                Err(e) => return Err(e.into()),
            }
            if aborts > ABORTS_IN_A_ROW_MAX {
                return Err("an increment was refused a million times in a row".into());
            }
        }
    }

    fn value(&self, key: &[u8]) -> Result<i64> {
        self.db.get(key)?.map_or(Ok(0), |v| count(&v))
    }

    fn compact(&self) -> Result<()> {
        self.db.flush()?;
        self.db.compact_range::<&[u8]>(..)?;
        Ok(self.db.wait_for_background_work()?)
    }
}

/// The settings, for the report.
pub fn options(cfg: &Config, merge: bool) -> String {
    format!(
        "default options but the block cache ({} MiB); {HOT_KEYS} counters of 8 bytes (i64 LE), set to 0; {}; \
         sync=false",
        cfg.cache_bytes >> 20,
        if merge {
            "increment: Db::write_opt of a batch of one merge of 1 (keyspace bound to add_i64)"
        } else {
            "increment: transaction get, put of +1, commit_opt; run again on Error::Conflict"
        }
    )
}

/// What one phase did.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub took: Duration,
    /// Increments made, per counter.
    pub made: Vec<u64>,
    pub aborts: u64,
}

impl Phase {
    pub fn commits(&self) -> u64 {
        self.made.iter().sum()
    }
}

/// Runs `ops` increments split over `threads` clients.
pub fn run_phase(store: &dyn CounterStore, threads: usize, ops: u64, seed: u64) -> Result<Phase> {
    let aborts = AtomicU64::new(0);
    let per_thread = ops / threads.max(1) as u64;
    let start = Instant::now();
    let made = std::thread::scope(|s| -> Result<Vec<u64>> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let aborts = &aborts;
                s.spawn(move || -> Result<Vec<u64>> {
                    let mut rng = datagen::rng(seed ^ (t as u64 + 1), KEYS_STREAM);
                    let mut made = vec![0u64; HOT_KEYS as usize];
                    for _ in 0..per_thread {
                        let c = rng.random_range(0..HOT_KEYS);
                        aborts.fetch_add(store.increment(&key(c))?, Ordering::Relaxed);
                        made[c as usize] += 1;
                    }
                    Ok(made)
                })
            })
            .collect();
        let mut made = vec![0u64; HOT_KEYS as usize];
        for h in handles {
            let mine = h.join().map_err(|_| "a client thread panicked")??;
            made.iter_mut().zip(mine).for_each(|(m, n)| *m += n);
        }
        Ok(made)
    })?;
    Ok(Phase { took: start.elapsed(), made, aborts: aborts.load(Ordering::Relaxed) })
}

/// Every counter must equal the increments made to it (`made`, summed
/// over the phases so far).
pub fn check(store: &dyn CounterStore, made: &[u64], when: &str) -> Result<()> {
    let mut wrong = Vec::new();
    for (c, &n) in made.iter().enumerate() {
        let v = store.value(&key(c as u64))?;
        if v != n as i64 {
            wrong.push(format!("counter {c} holds {v}, not {n}"));
        }
    }
    let total: u64 = made.iter().sum();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("counters {when}: {} of {total} increments: {}", wrong.len(), wrong.join("; ")).into())
    }
}

/// Runs every phase of `job` on `store`, checks the counters after each
/// and after a compaction, and records into `sink`.
pub fn run_store(job: &Job, store: &dyn CounterStore, sink: &mut Sink) -> Result<()> {
    let mut made = vec![0u64; HOT_KEYS as usize];
    for &threads in &job.threads {
        let phase = run_phase(store, threads, job.ops, job.seed)?;
        made.iter_mut().zip(&phase.made).for_each(|(m, n)| *m += n);
        check(store, &made, &format!("after {threads} thread(s)"))?;
        let commits = phase.commits();
        sink.put_in("counters", HOT_NAME, threads, "ops_per_s", rate(commits, phase.took), "ops/s");
        let per = phase.aborts as f64 / commits.max(1) as f64;
        sink.put_in("counters", HOT_NAME, threads, "aborts_per_commit", per, "ratio");
    }
    store.compact()?;
    check(store, &made, "after a compaction")
}

/// Runs the workload for `job` in `dir`; see the module docs.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let cfg = job.config(false);
    let merge_first = job.run.is_multiple_of(2);
    for merge in [merge_first, !merge_first] {
        let mut own = Sink::new(job);
        if !merge {
            TXN_ENGINE.clone_into(&mut own.template.engine);
        }
        own.template.env.engine_options = options(&cfg, merge);
        let d = dir.join(if merge { "merge" } else { "txn" });
        std::fs::create_dir_all(&d)?;
        let store = BasaltCounters::open(&d, &cfg, merge)?;
        let outcome = run_store(job, &store, &mut own);
        drop(store);
        std::fs::remove_dir_all(&d)?;
        outcome?;
        sink.records.extend(own.records);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Workload;
    use super::*;
    use crate::engine::Kind;

    fn job() -> Job {
        let mut job = super::super::tests::job(Workload::Counters, HOT_KEYS, &[]);
        job.threads = vec![1, 2];
        job.ops = 2_000;
        job
    }

    #[test]
    fn both_ways_count_every_increment_and_report_each_thread_count() {
        for nth in [0, 1] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut j = job();
            j.run = nth;
            let mut sink = Sink::new(&j);
            run(&j, dir.path(), &mut sink).expect("run");
            for engine in [Kind::Basalt.name(), TXN_ENGINE] {
                for threads in [1, 2] {
                    let value = |metric: &str| {
                        sink.records
                            .iter()
                            .find(|r| r.engine == engine && r.threads == threads && r.metric == metric)
                            .unwrap_or_else(|| panic!("{engine} {threads}: no {metric}"))
                            .value
                    };
                    assert!(value("ops_per_s") > 0.0);
                    let aborts = value("aborts_per_commit");
                    assert!(aborts >= 0.0 && (engine == TXN_ENGINE || aborts == 0.0), "{engine}: {aborts}");
                }
            }
            assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none(), "databases removed");
        }
    }

    /// How a broken store breaks.
    #[derive(Clone, Copy, PartialEq)]
    enum Fault {
        /// Every 97th increment is acknowledged but not written.
        Loses,
        /// Every 89th increment is written twice.
        Doubles,
        /// Compaction drops the counters' merge operands (only the base
        /// is left).
        CompactionForgets,
    }

    struct Broken {
        inner: BasaltCounters,
        fault: Fault,
        calls: AtomicU64,
    }

    impl CounterStore for Broken {
        fn increment(&self, key: &[u8]) -> Result<u64> {
            let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
            match self.fault {
                Fault::Loses if n.is_multiple_of(97) => Ok(0),
                Fault::Doubles if n.is_multiple_of(89) => {
                    self.inner.increment(key)?;
                    self.inner.increment(key)
                }
                _ => self.inner.increment(key),
            }
        }
        fn value(&self, key: &[u8]) -> Result<i64> {
            self.inner.value(key)
        }
        fn compact(&self) -> Result<()> {
            self.inner.compact()?;
            if self.fault == Fault::CompactionForgets {
                for c in 0..HOT_KEYS {
                    self.inner.db.put(key(c), 0i64.to_le_bytes())?;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn a_lost_or_doubled_increment_fails_the_run() {
        let j = job();
        for (fault, merge, says) in [
            (Fault::Loses, true, "after 1 thread(s)"),
            (Fault::Doubles, false, "after 1 thread(s)"),
            (Fault::CompactionForgets, true, "after a compaction"),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let inner = BasaltCounters::open(dir.path(), &j.config(false), merge).expect("open");
            let store = Broken { inner, fault, calls: AtomicU64::new(0) };
            let mut sink = Sink::new(&j);
            let err = run_store(&j, &store, &mut sink).expect_err("a broken store fails").to_string();
            assert!(err.contains(says) && err.contains("holds"), "{err}");
        }
    }

    #[test]
    fn two_threads_of_transactions_count_every_increment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = job();
        let store = BasaltCounters::open(dir.path(), &j.config(false), false).expect("open");
        let phase = run_phase(&store, 2, 20_000, 3).expect("phase");
        assert_eq!(phase.commits(), 20_000);
        check(&store, &phase.made, "after the phase").expect("every increment counted");
    }
}
