//! The writer process: opens the database, then runs every thread of every
//! workload, each committing batches in order and recording them in its
//! expected-state log, until the driver kills it. It prints a status line
//! (flushes, compactions, memtables waiting for flush) every few
//! milliseconds so the driver knows what the engine was doing when it died.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt::Db;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::expected::{self, ExpectedLog};
use crate::workload::{self, Workload};

/// What the writer needs to know; the driver passes it on the command line.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// The run's directory: `db/` and `expected/` below it.
    pub dir: PathBuf,
    pub seed: u64,
    pub cycle: u64,
    pub workloads: Vec<String>,
    pub threads: u32,
    /// Share of batches written with `sync = false`: a process crash must
    /// not lose them either.
    pub unsynced_share: f64,
    /// The writer exits by itself after this long, in case the driver died.
    pub lifetime: Duration,
}

/// The database directory of a run.
pub fn db_dir(dir: &Path) -> PathBuf {
    dir.join("db")
}

/// The expected-state log of one writer thread.
pub fn log_path(dir: &Path, workload: &str, thread: u32) -> PathBuf {
    dir.join("expected").join(format!("{workload}-{thread:02}.log"))
}

/// Prefix of the status lines on stdout.
pub const STATUS: &str = "status";

/// Runs the writer; returns only on an error (or after its lifetime), which
/// the driver reports.
pub fn run(config: &WriterConfig) -> Result<(), String> {
    let options = crate::options::for_cycle(config.seed, config.cycle);
    let db = Arc::new(Db::open(db_dir(&config.dir), options).map_err(|e| format!("open: {e}"))?);
    let mut handles = Vec::new();
    for name in &config.workloads {
        let w: Arc<dyn Workload> =
            workload::by_name(name, config.seed).ok_or_else(|| format!("unknown workload {name}"))?.into();
        w.prepare(&db).map_err(|e| format!("{name}: prepare: {e}"))?;
        for thread in 0..config.threads {
            let (db, w, config) = (db.clone(), w.clone(), config.clone());
            handles.push(std::thread::spawn(move || write_loop(&db, w.as_ref(), thread, &config)));
        }
    }
    let start = Instant::now();
    while start.elapsed() < config.lifetime {
        if let Some(h) = handles.iter().position(std::thread::JoinHandle::is_finished) {
            let result = handles.swap_remove(h).join().map_err(|_| "a writer thread panicked".to_string())?;
            return result;
        }
        let s = db.stats();
        println!("{STATUS} {} {} {}", s.flushes, s.compactions, s.immutable_memtables);
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_millis(5));
    }
    Err("lifetime over: the driver never killed this writer".into())
}

fn write_loop(db: &Db, w: &dyn Workload, thread: u32, config: &WriterConfig) -> Result<(), String> {
    let path = log_path(&config.dir, w.name(), thread);
    let state = expected::read(&path)?;
    if let Some(p) = state.pending {
        return Err(format!("{}: batch {p} is still pending: the driver did not resolve it", path.display()));
    }
    let mut log = ExpectedLog::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rng = StdRng::seed_from_u64(crate::mix(&[config.seed, config.cycle, u64::from(thread), 0x77]));
    for id in state.acked.. {
        let sync = !rng.random_bool(config.unsynced_share);
        log.record('P', id).map_err(|e| format!("{}: {e}", log.path().display()))?;
        w.write(db, thread, id, sync)
            .map_err(|e| format!("{} thread {thread}: batch {id}: {e}", w.name()))?;
        log.record('A', id).map_err(|e| format!("{}: {e}", log.path().display()))?;
    }
    Ok(())
}
