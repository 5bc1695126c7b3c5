//! The run: the schedule of operations, each session's last write, the
//! checks and the samples of space. Store 0 has the TTL, store 1 has none.

use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::SmallRng;

use super::{
    EXPIRED_CHECKS_PER_SAMPLE, Params, READS_PER_NEW, SessionStore, StoreStats, TOUCHES_PER_NEW,
    VALUE_BYTES_MAX, VALUE_BYTES_MIN, margin,
};
use crate::datagen::{self, ValuePool};
use crate::engine::Result;
use crate::measure::Latencies;
use crate::workload::disk_bytes;

/// The random stream of the sessions picked.
const PICKS_STREAM: u64 = 62;
/// The stores' names in errors.
const NAMES: [&str; 2] = ["ttl store", "no-ttl store"];

/// What one store did.
#[derive(Debug, Clone)]
pub struct StoreRun {
    pub gets: Latencies,
    pub puts: Latencies,
    /// Timed operations, and the time spent inside them.
    pub ops: u64,
    pub inside: Duration,
    /// Reads checked to find their session.
    pub reads_checked: u64,
    /// Sessions checked gone (TTL store) or still there (the other).
    pub expired_checked: u64,
    pub counted_at_end: u64,
    pub stats: StoreStats,
}

impl StoreRun {
    fn new() -> StoreRun {
        StoreRun {
            gets: Latencies::new(1),
            puts: Latencies::new(1),
            ops: 0,
            inside: Duration::ZERO,
            reads_checked: 0,
            expired_checked: 0,
            counted_at_end: 0,
            stats: StoreStats::default(),
        }
    }
}

/// Bytes on disk of both stores at a moment of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub at_ms: u64,
    pub disk: [u64; 2],
    /// Sessions last written within the TTL.
    pub live: u64,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub stores: [StoreRun; 2],
    pub samples: Vec<Sample>,
    /// New sessions written, and the run's length.
    pub sessions: u64,
    pub took: Duration,
    pub live_at_end: u64,
}

impl Outcome {
    /// Store `i`'s bytes at the sample nearest `at_ms`.
    pub fn disk_at(&self, i: usize, at_ms: u64) -> u64 {
        self.samples.iter().min_by_key(|s| s.at_ms.abs_diff(at_ms)).map_or(0, |s| s.disk[i])
    }

    /// Store `i`'s most bytes in the run's first half, and in its second.
    pub fn half_maxima(&self, i: usize, run_ms: u64) -> (u64, u64) {
        let max = |first: bool| {
            self.samples.iter().filter(|s| (s.at_ms <= run_ms / 2) == first).map(|s| s.disk[i]).max()
        };
        (max(true).unwrap_or(0), max(false).unwrap_or(0))
    }
}

/// Every session: when created, its version, and when its last write began
/// and ended (ms since the start; the commit lies between).
struct Sessions {
    created_ms: Vec<u64>,
    version: Vec<u64>,
    written_ms: Vec<[u64; 2]>,
}

struct Run<'a> {
    p: &'a Params,
    stores: [&'a dyn SessionStore; 2],
    pool: ValuePool,
    rng: SmallRng,
    start: Instant,
    s: Sessions,
    measured: [StoreRun; 2],
    ttl_ms: u64,
    margin_ms: u64,
    value: Vec<u8>,
    read: Vec<u8>,
}

fn key(id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&datagen::mix64(id).to_be_bytes());
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
}

fn value_len(id: u64, version: u64) -> usize {
    let span = (VALUE_BYTES_MAX - VALUE_BYTES_MIN + 1) as u64;
    VALUE_BYTES_MIN + (datagen::mix64(id.wrapping_mul(31).wrapping_add(version)) % span) as usize
}

/// Runs `p` on `stores` (the TTL store first): see the module docs.
/// `run` (the parent's run number) picks which store goes first in each
/// pair of operations.
pub fn drive(p: &Params, stores: [&dyn SessionStore; 2], seed: u64, run: usize) -> Result<Outcome> {
    let ttl_ms = p.ttl_ms;
    let mut r = Run {
        p,
        stores,
        pool: ValuePool::new(seed),
        rng: datagen::rng(seed, PICKS_STREAM),
        start: Instant::now(),
        s: Sessions { created_ms: Vec::new(), version: Vec::new(), written_ms: Vec::new() },
        measured: [StoreRun::new(), StoreRun::new()],
        ttl_ms,
        margin_ms: margin(p.ttl()).as_millis() as u64,
        value: Vec::with_capacity(VALUE_BYTES_MAX),
        read: Vec::with_capacity(VALUE_BYTES_MAX),
    };
    let mut samples = Vec::new();
    let gap_ns = 1_000_000_000 / p.new_per_s.max(1);
    let sample_ms = p.sample_every().as_millis() as u64;
    let mut next_sample_ms = sample_ms;
    let mut unit: u64 = 0;
    while r.now_ms() < p.run_ms {
        let due = r.start + Duration::from_nanos(unit * gap_ns);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let order = if (unit + run as u64).is_multiple_of(2) { [0, 1] } else { [1, 0] };
        r.unit(order)?;
        unit += 1;
        if r.now_ms() >= next_sample_ms {
            samples.push(r.sample(order)?);
            next_sample_ms += sample_ms;
        }
    }
    let took = r.start.elapsed();
    samples.push(r.sample([0, 1])?);
    r.count_at_end()?;
    let live_at_end = samples.last().map_or(0, |s| s.live);
    for (m, s) in r.measured.iter_mut().zip(r.stores) {
        m.stats = s.stats();
    }
    Ok(Outcome { stores: r.measured, samples, sessions: r.s.created_ms.len() as u64, took, live_at_end })
}

impl Run<'_> {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// One new session, its touches and its reads.
    fn unit(&mut self, order: [usize; 2]) -> Result<()> {
        let id = self.s.created_ms.len() as u64;
        self.s.created_ms.push(self.now_ms());
        self.s.version.push(0);
        self.s.written_ms.push([0, 0]);
        self.write(id, order)?;
        for _ in 0..TOUCHES_PER_NEW {
            let id = self.recent();
            self.s.version[id as usize] += 1;
            self.write(id, order)?;
        }
        for _ in 0..READS_PER_NEW {
            let id = self.recent();
            for s in order {
                self.read(s, id, true)?;
            }
        }
        Ok(())
    }

    /// A session created within the recent window.
    fn recent(&mut self) -> u64 {
        let since = self.now_ms().saturating_sub(self.p.recent().as_millis() as u64);
        let lo = self.s.created_ms.partition_point(|&c| c < since) as u64;
        let hi = self.s.created_ms.len() as u64;
        self.rng.random_range(lo.min(hi - 1)..hi)
    }

    fn write(&mut self, id: u64, order: [usize; 2]) -> Result<()> {
        let version = self.s.version[id as usize];
        self.pool.fill(id, version, value_len(id, version), &mut self.value);
        let k = key(id);
        let began = self.now_ms();
        for s in order {
            let t = Instant::now();
            self.stores[s].put(&k, &self.value).map_err(|e| format!("{}: put: {e}", NAMES[s]))?;
            let took = t.elapsed();
            let m = &mut self.measured[s];
            m.puts.record(took);
            m.inside += took;
            m.ops += 1;
        }
        self.s.written_ms[id as usize] = [began, self.now_ms() + 1];
        Ok(())
    }

    /// Reads session `id` from store `s` (timed or not) and checks it: it
    /// must be there, right, if its last write is younger than the TTL less
    /// the margin, or if the store has no TTL; it must be gone from the TTL
    /// store if older than the TTL plus the margin. Returns which check
    /// applied: `Some(true)` there, `Some(false)` gone.
    fn read(&mut self, s: usize, id: u64, timed: bool) -> Result<Option<bool>> {
        let k = key(id);
        let before = self.now_ms();
        let t = Instant::now();
        let found = self.stores[s].get(&k, &mut self.read).map_err(|e| format!("{}: get: {e}", NAMES[s]))?;
        let took = t.elapsed();
        let after = self.now_ms() + 1;
        if timed {
            let m = &mut self.measured[s];
            m.gets.record(took);
            m.inside += took;
            m.ops += 1;
        }
        let [began, ended] = self.s.written_ms[id as usize];
        let version = self.s.version[id as usize];
        let must_be_there = s == 1 || after + self.margin_ms < began + self.ttl_ms;
        let must_be_gone = s == 0 && before > ended + self.ttl_ms + self.margin_ms;
        if found {
            if must_be_gone {
                return Err(format!(
                    "{}: session {id} found {} ms after its last write, past its TTL of {} ms",
                    NAMES[s],
                    before - ended,
                    self.ttl_ms
                )
                .into());
            }
            // The length of the version the value says it is, so that a
            // stale version is named as such.
            let stamped = datagen::value_header(&self.read).map_or(version, |(_, v)| v);
            self.pool
                .check(&self.read, id, version..=version, value_len(id, stamped))
                .map_err(|e| format!("{}: session {e}", NAMES[s]))?;
        } else if must_be_there {
            return Err(format!(
                "{}: session {id} (version {version}, written {} ms ago) not found",
                NAMES[s],
                after - began
            )
            .into());
        }
        let applied = if must_be_there {
            Some(true)
        } else if must_be_gone {
            Some(false)
        } else {
            None
        };
        if applied == Some(true) && timed {
            self.measured[s].reads_checked += 1;
        }
        Ok(applied)
    }

    /// Samples both stores' bytes, and checks sessions created before the
    /// TTL and the margin: gone from the TTL store, there in the other.
    fn sample(&mut self, order: [usize; 2]) -> Result<Sample> {
        let now = self.now_ms();
        let disk = [disk_bytes(self.stores[0].dir()), disk_bytes(self.stores[1].dir())];
        let live = self.s.written_ms.iter().filter(|w| w[1] + self.ttl_ms > now).count() as u64;
        let old = now.saturating_sub(self.ttl_ms + self.margin_ms);
        let hi = self.s.created_ms.partition_point(|&c| c < old) as u64;
        if hi > 0 {
            for _ in 0..EXPIRED_CHECKS_PER_SAMPLE {
                let id = self.rng.random_range(0..hi);
                for s in order {
                    if self.read(s, id, false)? == Some(s == 1) {
                        self.measured[s].expired_checked += 1;
                    }
                }
            }
        }
        Ok(Sample { at_ms: now, disk, live })
    }

    /// Counts each keyspace: the store without a TTL holds every session;
    /// the TTL store at least those that must be there throughout the
    /// count, at most those that may be.
    fn count_at_end(&mut self) -> Result<()> {
        let total = self.s.created_ms.len() as u64;
        for s in [0, 1] {
            let before = self.now_ms();
            let n = self.stores[s].count().map_err(|e| format!("{}: count: {e}", NAMES[s]))?;
            let after = self.now_ms() + 1;
            let (must, may) = if s == 1 {
                (total, total)
            } else {
                let w = &self.s.written_ms;
                let must = w.iter().filter(|[b, _]| after + self.margin_ms < b + self.ttl_ms).count();
                let may = w.iter().filter(|[_, e]| before <= e + self.ttl_ms + self.margin_ms).count();
                (must as u64, may as u64)
            };
            if n < must || n > may {
                return Err(format!(
                    "{}: {n} sessions counted at the end, expected {must} to {may} of {total}",
                    NAMES[s]
                )
                .into());
            }
            self.measured[s].counted_at_end = n;
        }
        Ok(())
    }
}
