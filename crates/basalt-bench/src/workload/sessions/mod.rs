//! Issue 60: a session store with a time to live. One keyspace
//! `sessions` receives, at a steady target rate, new sessions (16-byte
//! random-looking ids, values of [`VALUE_BYTES_MIN`]–[`VALUE_BYTES_MAX`]
//! bytes), touches (a rewrite of a recent session, as a store that extends
//! a session on each use does) and point reads of recent sessions, for a
//! fixed time. Two Basalt stores take the same operations, interleaved in
//! one process, the first of each pair alternating (so neither is always
//! first, and both see the same moments of a shared machine):
//!
//! - `basalt`: the keyspace with `Keyspace::set_ttl(ttl)`;
//! - `basalt-no-ttl`: the same keyspace without a TTL.
//!
//! Every [`SAMPLE_EVERY_MAX`] (or a twentieth of a short run) both
//! directories' bytes on disk are sampled, with the sessions written within
//! the TTL. Reported per store: bytes at each tenth of the run (1, 2, 5 and
//! 10 minutes of the default run among them), the most, the most of each
//! half and their ratio (bounded: about 1; growing linearly: about 2); get
//! and put p50/p99 and operations per second of time inside the store;
//! `Stats::files_dropped_expired`, compaction and flush bytes; and for the
//! TTL store, its get p50 and p99 over the other's.
//!
//! Checked ([`drive`]), failing the run: every read of a session whose
//! last write is younger than the TTL less [`margin`] finds it, at its last
//! version, byte for byte (in both stores); at each sample, sessions whose
//! last write is older than the TTL plus the margin are not found in the
//! TTL store and are found, right, in the other; at the end, a count of
//! each keyspace lies between the sessions that must be there and those
//! that may be.

mod drive;
mod store;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Job, Sink};
use crate::engine::Result;

pub use drive::{Outcome, Sample, drive};
pub use store::{BasaltSessions, SessionStore, StoreStats};

/// Shortest session value.
pub const VALUE_BYTES_MIN: usize = 200;
/// Longest session value.
pub const VALUE_BYTES_MAX: usize = 500;
/// Touches per new session.
pub const TOUCHES_PER_NEW: u64 = 1;
/// Reads per new session.
pub const READS_PER_NEW: u64 = 4;
/// Sessions older than the TTL checked absent at each sample.
pub const EXPIRED_CHECKS_PER_SAMPLE: usize = 32;
/// The longest time between two samples of the space.
pub const SAMPLE_EVERY_MAX: Duration = Duration::from_secs(5);
/// The longest slack of the timing checks (the wall clock Basalt stamps
/// commits with against this process's monotonic clock, the commit
/// clock's millisecond marks).
pub const MARGIN_MAX: Duration = Duration::from_secs(5);
/// Default run length, TTL and rate.
pub const SECONDS_DEFAULT: u64 = 600;
pub const TTL_SECS_DEFAULT: u64 = 60;
pub const NEW_PER_S_DEFAULT: u64 = 1_000;

/// The engine name of the store without a TTL.
pub const NO_TTL_ENGINE: &str = "basalt-no-ttl";

/// What a sessions job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// Length of the run.
    pub run_ms: u64,
    /// The TTL store's time to live.
    pub ttl_ms: u64,
    /// New sessions per second (touches and reads in proportion).
    pub new_per_s: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            run_ms: SECONDS_DEFAULT * 1000,
            ttl_ms: TTL_SECS_DEFAULT * 1000,
            new_per_s: NEW_PER_S_DEFAULT,
        }
    }
}

impl Params {
    pub fn run(&self) -> Duration {
        Duration::from_millis(self.run_ms)
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Reads and touches pick sessions created within this: half the TTL.
    pub fn recent(&self) -> Duration {
        self.ttl() / 2
    }

    pub fn sample_every(&self) -> Duration {
        (self.run() / 20).min(SAMPLE_EVERY_MAX).max(Duration::from_millis(10))
    }

    /// The distribution column of every record.
    pub fn name(&self) -> String {
        if self.ttl_ms.is_multiple_of(1000) {
            format!("ttl-{}s", self.ttl_ms / 1000)
        } else {
            format!("ttl-{}ms", self.ttl_ms)
        }
    }
}

/// The slack of the timing checks: a quarter of the TTL, at most
/// [`MARGIN_MAX`].
pub fn margin(ttl: Duration) -> Duration {
    (ttl / 4).min(MARGIN_MAX)
}

/// The settings, for the report.
pub fn options(cache_bytes: usize, p: &Params, ttl: bool) -> String {
    format!(
        "keyspace sessions{}; default options but the block cache ({} MiB); Keyspace::put_opt (sync=false), \
         Keyspace::get_with; {} new sessions/s (16 B ids, {VALUE_BYTES_MIN}-{VALUE_BYTES_MAX} B values), \
         {TOUCHES_PER_NEW} touch and {READS_PER_NEW} reads each, of sessions created in the last {} ms; \
         interleaved with the other store",
        if ttl { format!(" with Keyspace::set_ttl({} ms)", p.ttl_ms) } else { " without a TTL".to_string() },
        cache_bytes >> 20,
        p.new_per_s,
        p.recent().as_millis(),
    )
}

/// Runs the workload for `job` in `dir`; see the module docs.
pub fn run(job: &Job, dir: &Path, sink: &mut Sink) -> Result<()> {
    let p = job.sessions.unwrap_or_default();
    let cfg = job.config(false);
    let (ttl_dir, plain_dir) = (dir.join("ttl"), dir.join("no-ttl"));
    let outcome = {
        let ttl = BasaltSessions::open(&ttl_dir, cfg.cache_bytes, Some(p.ttl()))?;
        let plain = BasaltSessions::open(&plain_dir, cfg.cache_bytes, None)?;
        drive(&p, [&ttl, &plain], job.seed, job.run)
    };
    let _ = std::fs::remove_dir_all(&ttl_dir);
    let _ = std::fs::remove_dir_all(&plain_dir);
    record(job, &p, &outcome?, sink);
    Ok(())
}

/// Puts what the run measured into `sink`: each store under its engine
/// name, distribution `ttl-<N>s`, scale the run's seconds.
pub fn record(job: &Job, p: &Params, out: &Outcome, sink: &mut Sink) {
    for (i, name) in ["basalt", NO_TTL_ENGINE].into_iter().enumerate() {
        let mut own = Sink::new(job);
        name.clone_into(&mut own.template.engine);
        own.template.distribution = p.name();
        own.template.scale = p.run_ms / 1000;
        own.template.env.engine_options = options(job.cache_bytes, p, i == 0);
        let s = &out.stores[i];
        let mut lat = s.gets.clone();
        own.put_latency("get", &mut lat);
        let mut lat = s.puts.clone();
        own.put_latency("put", &mut lat);
        own.put("ops_per_s", super::rate(s.ops, s.inside), "ops/s");
        own.put("reads_checked", s.reads_checked as f64, "count");
        own.put("expired_checked", s.expired_checked as f64, "count");
        own.put("sessions_counted_at_end", s.counted_at_end as f64, "count");
        for tenth in 1..=10u64 {
            let at = p.run_ms * tenth / 10;
            let bytes = out.disk_at(i, at);
            own.put(&format!("disk_at_{}pct_bytes", tenth * 10), bytes as f64, "bytes");
        }
        let (first, second) = out.half_maxima(i, p.run_ms);
        own.put("disk_max_bytes", out.samples.iter().map(|x| x.disk[i]).max().unwrap_or(0) as f64, "bytes");
        own.put("disk_first_half_max_bytes", first as f64, "bytes");
        own.put("disk_second_half_max_bytes", second as f64, "bytes");
        own.put("disk_growth_ratio", second as f64 / first.max(1) as f64, "ratio");
        let st = &s.stats;
        own.put("files_dropped_expired", st.files_dropped_expired as f64, "count");
        own.put("compaction_read_bytes", st.compaction_read_bytes as f64, "bytes");
        own.put("compaction_written_bytes", st.compaction_written_bytes as f64, "bytes");
        own.put("flush_bytes", st.flush_bytes as f64, "bytes");
        own.put("compactions", st.compactions as f64, "count");
        own.put("new_sessions_per_s", super::rate(out.sessions, out.took), "ops/s");
        if i == 0 {
            let (mut a, mut b) = (out.stores[0].gets.clone(), out.stores[1].gets.clone());
            for pct in [50.0, 99.0] {
                let ratio = a.percentile_us(pct) / b.percentile_us(pct).max(1e-9);
                own.put(&format!("get_p{pct:.0}_ratio_ttl_over_no_ttl"), ratio, "ratio");
            }
            own.put("live_sessions_expected_at_end", out.live_at_end as f64, "count");
        }
        sink.records.extend(own.records);
    }
}

#[cfg(test)]
mod tests;
