//! Measuring: latency samples and their percentiles, the process's memory,
//! and the machine the numbers come from.

use std::time::{Duration, Instant};

/// Latency samples of one operation type. Every `every`-th operation is
/// timed on its own (the clock costs ~25 ns a read, so timing every
/// operation would tax the fastest engines most); throughput is always the
/// count over the wall time of the whole loop.
#[derive(Debug, Clone)]
pub struct Latencies {
    every: u64,
    seen: u64,
    nanos: Vec<u64>,
}

impl Latencies {
    /// Samples one operation in `every`.
    pub fn new(every: u64) -> Latencies {
        Latencies { every: every.max(1), seen: 0, nanos: Vec::new() }
    }

    /// Whether the next operation should be timed; counts it.
    pub fn sample_next(&mut self) -> bool {
        self.seen += 1;
        self.seen.is_multiple_of(self.every)
    }

    /// Records one timed operation.
    pub fn record(&mut self, took: Duration) {
        self.nanos.push(took.as_nanos() as u64);
    }

    /// Times `op` if it is sampled.
    pub fn time<T>(&mut self, op: impl FnOnce() -> T) -> T {
        if self.sample_next() {
            let t = Instant::now();
            let out = op();
            self.record(t.elapsed());
            out
        } else {
            op()
        }
    }

    /// Adds another recorder's samples (threads merge theirs).
    pub fn merge(&mut self, other: Latencies) {
        self.seen += other.seen;
        self.nanos.extend(other.nanos);
    }

    /// The `p`-th percentile (0–100) in microseconds; 0 without samples.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return 0.0;
        }
        self.nanos.sort_unstable();
        let rank = ((p / 100.0) * (self.nanos.len() - 1) as f64).round() as usize;
        self.nanos[rank.min(self.nanos.len() - 1)] as f64 / 1000.0
    }

    /// The longest sample, in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.nanos.iter().max().map_or(0.0, |&n| n as f64 / 1e6)
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }
}

/// A field of `/proc/self/status` in bytes (`VmHWM`, `VmRSS`, `RssAnon`…).
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kib: u64 = line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Resets the peak resident set size (`VmHWM`) to the current one, so a
/// later reading is the peak of what ran in between (Linux ≥ 4.0).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The machine and build the numbers come from.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Cores available to the process.
    pub cores: usize,
    /// Physical memory in bytes.
    pub memory_bytes: u64,
    /// `git describe` of the work tree (`-dirty` when it has changes).
    pub git_commit: String,
    /// When the run started (UTC, RFC 3339).
    pub date: String,
    /// Always `release` for published numbers; `debug` marks a test build.
    pub build: String,
}

impl Machine {
    /// Reads the machine's description.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map_or_else(|| "unknown".to_string(), |s| s.trim().to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024);
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            memory_bytes,
            git_commit: git_commit(),
            date: utc_now(),
            build: if cfg!(debug_assertions) { "debug" } else { "release" }.to_string(),
        }
    }
}

fn git_commit() -> String {
    let out =
        std::process::Command::new("git").args(["describe", "--always", "--dirty", "--abbrev=12"]).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown".to_string(),
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut l = Latencies::new(1);
        for us in 1..=100u64 {
            assert!(l.sample_next());
            l.record(Duration::from_micros(us));
        }
        assert!((l.percentile_us(50.0) - 50.0).abs() <= 1.0);
        assert!((l.percentile_us(99.0) - 99.0).abs() <= 1.0);
        assert!((l.max_ms() - 0.1).abs() < 1e-9);
        let mut sparse = Latencies::new(4);
        let timed = (0..100).filter(|_| sparse.sample_next()).count();
        assert_eq!(timed, 25);
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_411), (2025, 11, 19));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn memory_is_readable_on_linux() {
        assert!(proc_status_bytes("VmRSS").unwrap_or(1) > 0);
        reset_peak_rss();
        assert!(proc_status_bytes("VmHWM").unwrap_or(1) > 0);
    }
}
