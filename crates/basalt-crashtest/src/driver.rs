//! The driver: runs cycles of start writer → wait a random time → `SIGKILL`
//! → reopen and check, and counts what it saw.
//!
//! After each kill the database must open; a forward and a reverse scan of
//! the key-value store and a scan of every table must read without error
//! and agree; and every writer thread's data must be exactly its
//! acknowledged batches, plus its pending batch wholly or not at all. The
//! driver records in the log whether the pending batch was there, so the
//! expected state stays exact across cycles.

use std::io::{BufRead, BufReader};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use basalt::{Db, ScanOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::expected::{self, ExpectedLog};
use crate::workload::{self, Model};
use crate::writer::{STATUS, db_dir, log_path};

/// How a run goes; see `basalt-crashtest --help`.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    pub dir: PathBuf,
    pub cycles: u64,
    pub seed: u64,
    pub workloads: Vec<String>,
    pub threads: u32,
    /// Kills land up to this long after the writer starts.
    pub kill_ms_max: u64,
    pub unsynced_share: f64,
    /// Print a line per cycle.
    pub verbose: bool,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Summary {
    pub cycles: u64,
    /// Distinct batches acknowledged over the run.
    pub batches_acked: u64,
    /// Acknowledged batches checked, summed over cycles (every batch is
    /// checked again after every later kill).
    pub batch_checks: u64,
    /// Pending batches found in the database after a kill, and not.
    pub pending_applied: u64,
    pub pending_dropped: u64,
    /// Flushes and compactions the writers ran.
    pub flushes: u64,
    pub compactions: u64,
    /// Kills with a memtable waiting for (or in) flush.
    pub kills_with_flush_pending: u64,
    /// Kills in a cycle that ran a compaction.
    pub kills_after_compaction: u64,
    /// Kills that left SSTs the recovery deleted: outputs of an unfinished
    /// flush or compaction, or inputs of a finished one not yet deleted.
    pub kills_leaving_ssts: u64,
    pub violations: Vec<String>,
    pub elapsed: Duration,
}

impl Summary {
    /// The one-line summary the binary prints last.
    pub fn line(&self) -> String {
        format!(
            "crashtest summary: {} cycles, {} acknowledged batches checked ({} distinct), pending batches \
             found applied {} / dropped {}, writers ran {} flushes and {} compactions, {} kills with a flush \
             pending, {} in cycles that compacted, {} leaving SSTs for recovery to delete, {:.0} s, {} violations",
            self.cycles,
            self.batch_checks,
            self.batches_acked,
            self.pending_applied,
            self.pending_dropped,
            self.flushes,
            self.compactions,
            self.kills_with_flush_pending,
            self.kills_after_compaction,
            self.kills_leaving_ssts,
            self.elapsed.as_secs_f64(),
            self.violations.len()
        )
    }
}

/// One writer thread's expected state.
struct Tracked {
    workload: String,
    thread: u32,
    model: Box<dyn Model>,
    /// Batches already applied to the model.
    applied: u64,
}

/// The last status line of the writer: flushes, compactions, immutable
/// memtables.
type Status = Arc<Mutex<Option<(u64, u64, u64)>>>;

/// Runs the kill test with `exe` (this binary) as the writer.
pub fn run(config: &DriverConfig, exe: &Path) -> Summary {
    let start = Instant::now();
    let mut summary = Summary::default();
    if let Err(e) = std::fs::create_dir_all(config.dir.join("expected")) {
        summary.violations.push(format!("cannot create {}: {e}", config.dir.display()));
        return summary;
    }
    let mut tracked = Vec::new();
    for name in &config.workloads {
        let Some(w) = workload::by_name(name, config.seed) else {
            summary.violations.push(format!("unknown workload {name}"));
            return summary;
        };
        for thread in 0..config.threads {
            tracked.push(Tracked { workload: name.clone(), thread, model: w.model(thread), applied: 0 });
        }
    }
    let mut rng = StdRng::seed_from_u64(crate::mix(&[config.seed, 0xd21]));
    for cycle in 0..config.cycles {
        let kill_after = if rng.random_bool(0.1) {
            // Early: the writer is still opening, recovering the last kill.
            Duration::from_millis(rng.random_range(0..30))
        } else {
            Duration::from_millis(rng.random_range(30..=config.kill_ms_max.max(31)))
        };
        let outcome = run_writer(config, exe, cycle, kill_after, &mut summary)
            .and_then(|()| check(config, cycle, &mut tracked, &mut summary));
        summary.cycles += 1;
        if config.verbose {
            eprintln!("cycle {cycle}: killed after {kill_after:?}; {}", summary.line());
        }
        if let Err(v) = outcome {
            summary.violations.push(format!("cycle {cycle} (seed {}): {v}", config.seed));
            break;
        }
    }
    summary.elapsed = start.elapsed();
    summary
}

fn spawn_writer(config: &DriverConfig, exe: &Path, cycle: u64) -> Result<Child, String> {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(config.dir.join("writer-stderr.log"))
        .map_err(|e| format!("writer stderr log: {e}"))?;
    Command::new(exe)
        .arg("writer")
        .arg("--dir")
        .arg(&config.dir)
        .args(["--seed", &config.seed.to_string(), "--cycle", &cycle.to_string()])
        .args(["--workloads", &config.workloads.join(","), "--threads", &config.threads.to_string()])
        .args(["--unsynced-share", &config.unsynced_share.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start the writer: {e}"))
}

/// Starts a writer, kills it after `kill_after`, and counts what it was
/// doing.
fn run_writer(
    config: &DriverConfig,
    exe: &Path,
    cycle: u64,
    kill_after: Duration,
    summary: &mut Summary,
) -> Result<(), String> {
    let mut child = spawn_writer(config, exe, cycle)?;
    let status: Status = Arc::default();
    let reader = child.stdout.take().map(|out| {
        let status = status.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut parts = line.split(' ');
                if parts.next() == Some(STATUS) {
                    let n: Vec<u64> = parts.filter_map(|p| p.parse().ok()).collect();
                    if let [f, c, i] = n[..] {
                        *status.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((f, c, i));
                    }
                }
            }
        })
    });
    std::thread::sleep(kill_after);
    if let Ok(Some(exit)) = child.try_wait() {
        return Err(format!(
            "the writer exited by itself ({exit}); its errors are in {}",
            config.dir.join("writer-stderr.log").display()
        ));
    }
    // `Child::kill` sends SIGKILL.
    child.kill().map_err(|e| format!("kill: {e}"))?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    if let Some(r) = reader {
        let _ = r.join();
    }
    let last = *status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((flushes, compactions, imms)) = last {
        summary.flushes += flushes;
        summary.compactions += compactions;
        summary.kills_with_flush_pending += u64::from(imms > 0);
        summary.kills_after_compaction += u64::from(compactions > 0);
    }
    Ok(())
}

/// Reopens the database and checks it; panics of the engine are violations.
fn check(
    config: &DriverConfig,
    cycle: u64,
    tracked: &mut [Tracked],
    summary: &mut Summary,
) -> Result<(), String> {
    // No compaction during the check: only recovery deletes files, so the
    // SSTs it deletes are what the kill left unfinished.
    let options = crate::options::for_cycle(config.seed, cycle).auto_compaction(false);
    let dir = db_dir(&config.dir);
    let before = ssts(&dir);
    let db = Db::open(&dir, options).map_err(|e| format!("the database did not open: {e}"))?;
    std::panic::catch_unwind(AssertUnwindSafe(|| check_open(config, &db, tracked, summary)))
        .map_err(|_| "the check panicked (see stderr)".to_string())??;
    db.close().map_err(|e| format!("close after the check: {e}"))?;
    let after = ssts(&dir);
    summary.kills_leaving_ssts += u64::from(before.difference(&after).next().is_some());
    Ok(())
}

/// Names of the SSTs in `dir`.
fn ssts(dir: &Path) -> std::collections::BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return std::collections::BTreeSet::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "sst"))
        .collect()
}

fn check_open(
    config: &DriverConfig,
    db: &Db,
    tracked: &mut [Tracked],
    summary: &mut Summary,
) -> Result<(), String> {
    scan_everything(db)?;
    for t in tracked {
        let path = log_path(&config.dir, &t.workload, t.thread);
        let state = expected::read(&path)?;
        for id in t.applied..state.acked {
            t.model.apply(id);
        }
        summary.batches_acked += state.acked - t.applied;
        t.applied = state.acked;
        let applied = t.model.check(db, state.pending)?;
        if let Some(p) = state.pending {
            let mut log = ExpectedLog::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if applied {
                t.model.apply(p);
                t.applied = p + 1;
                summary.pending_applied += 1;
                summary.batches_acked += 1;
            } else {
                summary.pending_dropped += 1;
            }
            log.record(if applied { 'A' } else { 'X' }, p).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        summary.batch_checks += t.applied;
    }
    Ok(())
}

/// Scans the key-value store both ways and every table forward: no error,
/// and the two directions agree.
fn scan_everything(db: &Db) -> Result<(), String> {
    let forward: Vec<_> = db
        .iter_all()
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<basalt::Result<_>>()
        .map_err(|e| format!("forward scan: {e}"))?;
    let mut reverse: Vec<_> = db
        .iter_rev::<&[u8]>(..)
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<basalt::Result<_>>()
        .map_err(|e| format!("reverse scan: {e}"))?;
    reverse.reverse();
    if forward != reverse {
        return Err(format!(
            "forward scan ({} items) and reverse scan ({}) differ",
            forward.len(),
            reverse.len()
        ));
    }
    if forward.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err("forward scan out of order".into());
    }
    for name in db.tables() {
        if name == "default" {
            continue;
        }
        let table = db.table(&name).map_err(|e| format!("table {name}: {e}"))?;
        let scan = table.scan(ScanOptions::default()).map_err(|e| format!("scan of {name}: {e}"))?;
        for b in scan {
            b.map_err(|e| format!("scan of {name}: {e}"))?;
        }
    }
    Ok(())
}
