//! The wall clock, behind a trait like the file system: commits are
//! stamped with its time (history windows and times to live read them),
//! and a test moves a [`ManualClock`] to a TTL's boundaries instead of
//! sleeping.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the engine reads the time of day.
pub trait WallClock: Send + Sync {
    /// Milliseconds since the unix epoch. May go backwards (a clock set
    /// back); the engine never lets its own times do so.
    fn unix_ms(&self) -> u64;
}

impl std::fmt::Debug for dyn WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WallClock")
    }
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn unix_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that shows the time it was set to, for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    /// A clock showing `unix_ms`.
    pub fn new(unix_ms: u64) -> ManualClock {
        ManualClock { ms: AtomicU64::new(unix_ms) }
    }

    /// Sets the time shown.
    pub fn set(&self, unix_ms: u64) {
        self.ms.store(unix_ms, Ordering::SeqCst);
    }

    /// Moves the time shown forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl WallClock for ManualClock {
    fn unix_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }
}
