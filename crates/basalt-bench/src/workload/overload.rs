//! Sustained overload (issue 60): one writer puts 512-byte records under
//! uniformly random keys of a key space of `scale` keys, in batches of
//! 100, as fast as the engine takes them, for `seconds` — faster than
//! compaction can sustain, so background work, not the writer, sets the
//! pace. The same run with the write-buffer budget (`overload`) and
//! without it (`overload-unbounded`, the engine's defaults) gives the
//! throughput kept under the budget, the longest batch write and the peak
//! memory. Random keys, so compaction merges real overlap: with keys in
//! order an engine may move files down without rewriting them.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;

use super::{Job, Opener, Sink, rate};
use crate::datagen::{self, ValuePool};
use crate::engine::{Result, Row};

/// Rows per write batch, as in the back-pressure run.
pub const BATCH_ROWS: usize = 100;
/// A batch write longer than this counts as a stall.
const STALL: Duration = Duration::from_millis(50);

/// The workload name of the run without a budget.
pub const UNBOUNDED: &str = "overload-unbounded";

/// Writes for `job.seconds`, then settles (timed apart).
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let engine = open(dir)?;
    let pool = ValuePool::new(job.seed);
    let mut rng = datagen::rng(job.seed, 60);
    let keys = job.scale.max(1);
    let run_for = Duration::from_secs(job.seconds.max(1));
    let mut rows: Vec<Row> = vec![Row::default(); BATCH_ROWS];
    let (mut written, mut batch_max, mut stalls) = (0u64, Duration::ZERO, 0u64);
    let mut second_half: Option<(Instant, u64)> = None;
    let start = Instant::now();
    while start.elapsed() < run_for {
        for (k, v) in &mut rows {
            let id = rng.random_range(0..keys);
            k.clear();
            k.extend_from_slice(&datagen::u64_key(id));
            pool.fill(id, written, job.value_bytes, v);
        }
        let t = Instant::now();
        engine.write(&rows)?;
        let took = t.elapsed();
        batch_max = batch_max.max(took);
        stalls += u64::from(took > STALL);
        written += BATCH_ROWS as u64;
        if second_half.is_none() && start.elapsed() >= run_for / 2 {
            second_half = Some((Instant::now(), written));
        }
    }
    let took = start.elapsed();
    sink.put("insert_rows_per_s", rate(written, took), "rows/s");
    if let Some((at, before)) = second_half {
        // The rate once the tree is deep: a run that only filled memory
        // fast would show it here.
        sink.put("insert_second_half_rows_per_s", rate(written - before, at.elapsed()), "rows/s");
    }
    sink.put("rows_written", written as f64, "rows");
    sink.put("stall_max_ms", batch_max.as_secs_f64() * 1e3, "ms");
    sink.put("stalls_over_50ms", stalls as f64, "count");
    for (metric, value, unit) in engine.write_breakdown() {
        sink.put(metric, value, unit);
    }
    sink.put_peak_memory("peak_memory_bytes", engine.as_ref());
    let t = Instant::now();
    engine.settle()?;
    sink.put("settle_ms", t.elapsed().as_secs_f64() * 1e3, "ms");
    Ok(())
}
