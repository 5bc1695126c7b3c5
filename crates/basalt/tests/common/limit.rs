//! Time limits for calls that may hang: the call runs in a thread of its
//! own and the test fails, naming what hung, when no answer comes in time.
//! A hung thread cannot be stopped; it is left behind, blocked, and the test
//! binary exits without it, so CI never waits on it.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The limit for one call or one small scenario on `MemFs`: each takes
/// milliseconds, so only a hang reaches it.
pub const LIMIT: Duration = Duration::from_secs(10);

/// What a call under a time limit did.
#[derive(Debug)]
pub enum Limited<T> {
    /// It returned.
    Done(T),
    /// It panicked, with this message.
    Panicked(String),
    /// No answer within the limit.
    Hung,
}

/// A call running in its own thread. The thread ends by itself once the
/// call returns; a hung one is left behind.
pub struct Pending<T> {
    rx: Receiver<std::thread::Result<T>>,
}

/// Starts `f` in its own thread.
pub fn spawn_limited<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("limited-call".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(f));
            // After a timeout nobody is left to tell.
            let _ = tx.send(result);
        })
        .expect("spawning a thread for a limited call");
    Pending { rx }
}

impl<T> Pending<T> {
    /// The answer, if it comes before `deadline`; `None` if it has not yet.
    pub fn try_wait_until(&self, deadline: Instant) -> Option<Limited<T>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(Ok(value)) => Some(Limited::Done(value)),
            Ok(Err(panic)) => Some(Limited::Panicked(super::guard::panic_message(panic.as_ref()))),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                Some(Limited::Panicked("the thread ended without an answer".into()))
            }
        }
    }

    /// Waits for the answer until `deadline`.
    pub fn wait_until(self, deadline: Instant) -> Limited<T> {
        self.try_wait_until(deadline).unwrap_or(Limited::Hung)
    }
}

/// Runs `f` in its own thread and waits at most `limit` for it.
pub fn run_limited<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Limited<T> {
    spawn_limited(f).wait_until(Instant::now() + limit)
}

/// Runs `f` within `limit`; a hang or a panic fails the test, naming `what`.
pub fn within<T: Send + 'static>(what: &str, limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    match run_limited(limit, f) {
        Limited::Done(value) => value,
        Limited::Panicked(message) => panic!("{what}: {message}"),
        Limited::Hung => panic!("{what}: no answer within {limit:?} (hung)"),
    }
}
