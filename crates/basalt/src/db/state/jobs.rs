//! The background jobs' shared state: what the flush and compaction
//! threads wait on, the first error any job or the WAL met (after which
//! writes stop), the slot that lets one compaction run at a time, and the
//! drain rate that paces writers. Its locks are taken here only; the rest
//! of the database calls the operations below.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Condvar;

use crate::error::Error;
use crate::ranked::{Rank, RankedGuard, RankedMutex};

#[derive(Debug, Default)]
struct State {
    /// The first error of a background job or of the WAL; once set the
    /// database refuses writes (it cannot know what reached the disk).
    error: Option<Error>,
    /// Set by a close: the threads return, waiters give up.
    stopping: bool,
}

/// Why a wait for background work ended without what it waited for.
#[derive(Debug)]
pub(crate) enum Interrupted {
    /// A job (or the WAL) failed: writes stopped with this error.
    Failed(Error),
    /// The database is closing: the threads that would do the work are
    /// gone or going.
    Stopping,
}

impl Interrupted {
    /// The error a caller that waited gets: the one that stopped writes,
    /// or [`Error::Closed`].
    pub(crate) fn into_error(self) -> Error {
        match self {
            Interrupted::Failed(e) => e,
            Interrupted::Stopping => Error::Closed("database is shutting down".into()),
        }
    }
}

pub(crate) struct Jobs {
    state: RankedMutex<State>,
    /// Notified under `state` whenever something a waiter may wait for
    /// changed: a memtable switched or flushed, a compaction installed, an
    /// error, a close.
    changed: Condvar,
    /// Held while a compaction runs: one at a time, automatic or manual.
    compaction: RankedMutex<()>,
    /// Held by the flush thread through a whole flush, install and
    /// collection included: a waiter for background work takes it once
    /// to know the thread no longer holds a version it read.
    flush: RankedMutex<()>,
    /// Memtable bytes flushed per second of flushing, recent flushes
    /// weighted most: what paces writers in the write buffer's soft zone.
    drain_bytes_per_sec: AtomicU64,
}

impl Jobs {
    pub(crate) fn new() -> Jobs {
        Jobs {
            state: RankedMutex::new(Rank::Jobs, State::default()),
            changed: Condvar::new(),
            compaction: RankedMutex::new(Rank::Compaction, ()),
            flush: RankedMutex::new(Rank::Flush, ()),
            drain_bytes_per_sec: AtomicU64::new(0),
        }
    }

    /// The error that stopped writes, if one did.
    pub(crate) fn error(&self) -> Option<Error> {
        self.state.lock().error.as_ref().map(Error::duplicate)
    }

    /// Whether an error stopped writes.
    pub(crate) fn failed(&self) -> bool {
        self.state.lock().error.is_some()
    }

    /// Records `e` as the error that stops writes, unless one already
    /// did, wakes every waiter, and returns `e`.
    pub(crate) fn fail(&self, e: Error) -> Error {
        let mut state = self.state.lock();
        if state.error.is_none() {
            state.error = Some(e.duplicate());
        }
        self.changed.notify_all();
        e
    }

    /// Wakes the threads and every waiter: something they wait for may
    /// have changed. Notified under the lock they check under, so no
    /// wake-up falls between a check and a wait.
    pub(crate) fn wake(&self) {
        let _state = self.state.lock();
        self.changed.notify_all();
    }

    /// Asks the threads to return and every waiter to give up.
    pub(crate) fn stop(&self) {
        let mut state = self.state.lock();
        state.stopping = true;
        self.changed.notify_all();
    }

    /// Whether a close asked the jobs to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.state.lock().stopping
    }

    /// For a background thread: blocks until `due()` (asked while no error
    /// stopped writes) says there is work, returning true, or until a
    /// close asks the thread to stop, returning false; `due()` is asked
    /// again every `recheck` if given (work that time alone makes).
    pub(crate) fn wait_for_work(&self, recheck: Option<Duration>, mut due: impl FnMut() -> bool) -> bool {
        let mut state = self.state.lock();
        loop {
            if state.stopping {
                return false;
            }
            if state.error.is_none() && due() {
                return true;
            }
            match recheck {
                Some(timeout) => state.wait_for(&self.changed, timeout),
                None => state.wait(&self.changed),
            }
        }
    }

    /// For a caller: blocks while `waiting()` says what it waits for has
    /// not happened, looking again at least every `recheck` if given. Gives
    /// up when an error stops writes or a close stops the jobs.
    pub(crate) fn wait_while(
        &self,
        recheck: Option<Duration>,
        mut waiting: impl FnMut() -> bool,
    ) -> Result<(), Interrupted> {
        let mut state = self.state.lock();
        loop {
            if let Some(e) = &state.error {
                return Err(Interrupted::Failed(e.duplicate()));
            }
            if !waiting() {
                return Ok(());
            }
            if state.stopping {
                return Err(Interrupted::Stopping);
            }
            match recheck {
                Some(timeout) => state.wait_for(&self.changed, timeout),
                None => state.wait(&self.changed),
            }
        }
    }

    /// The compaction slot, waited for: one compaction (automatic or
    /// manual) or a bulk load's install at a time.
    pub(crate) fn compaction_slot(&self) -> RankedGuard<'_, ()> {
        self.compaction.lock()
    }

    /// The compaction slot if it comes free within `timeout`.
    pub(crate) fn try_compaction_slot(&self, timeout: Duration) -> Option<RankedGuard<'_, ()>> {
        self.compaction.try_lock_for(timeout)
    }

    /// The flush slot: the flush thread holds it through each flush.
    pub(crate) fn flush_slot(&self) -> RankedGuard<'_, ()> {
        self.flush.lock()
    }

    /// Memtable bytes the flushes drain per second (0 before the first).
    pub(crate) fn drain_rate(&self) -> u64 {
        self.drain_bytes_per_sec.load(Ordering::Relaxed)
    }

    /// Folds a flush of `bytes` of memtables in `took` into the drain rate
    /// (half the last flush, half the ones before).
    pub(crate) fn record_drain(&self, bytes: usize, took: Duration) {
        let rate = (bytes as f64 / took.as_secs_f64().max(1e-6)) as u64;
        let before = self.drain_bytes_per_sec.load(Ordering::Relaxed);
        let next = if before == 0 { rate } else { before / 2 + rate / 2 };
        self.drain_bytes_per_sec.store(next, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_ends_on_its_condition_an_error_or_a_stop() {
        let jobs = std::sync::Arc::new(Jobs::new());
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (jobs, flag) = (jobs.clone(), flag.clone());
            std::thread::spawn(move || jobs.wait_while(None, || !flag.load(Ordering::SeqCst)))
        };
        flag.store(true, Ordering::SeqCst);
        jobs.wake();
        assert!(waiter.join().expect("the waiter does not panic").is_ok());

        let waiter = {
            let jobs = jobs.clone();
            std::thread::spawn(move || jobs.wait_while(None, || true))
        };
        jobs.stop();
        assert!(matches!(waiter.join().expect("the waiter does not panic"), Err(Interrupted::Stopping)));
        assert!(!jobs.wait_for_work(None, || true), "a stopped thread returns");

        let failed = Jobs::new();
        assert!(!failed.failed());
        failed.fail(Error::Closed("first".into()));
        failed.fail(Error::Closed("second".into()));
        assert!(failed.error().is_some_and(|e| e.to_string().contains("first")), "the first error stays");
        assert!(matches!(failed.wait_while(None, || true), Err(Interrupted::Failed(_))));
        assert!(failed.wait_while(None, || false).is_err(), "an error ends a wait before its condition");
    }

    #[test]
    fn the_drain_rate_weighs_the_last_flush_half() {
        let jobs = Jobs::new();
        assert_eq!(jobs.drain_rate(), 0);
        jobs.record_drain(1000, Duration::from_secs(1));
        assert_eq!(jobs.drain_rate(), 1000);
        jobs.record_drain(3000, Duration::from_secs(1));
        assert_eq!(jobs.drain_rate(), 2000);
    }
}
