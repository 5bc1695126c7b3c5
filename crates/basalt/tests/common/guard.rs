//! Guards for tests that feed the engine damaged files or failing I/O: a
//! watchdog that turns a hang into a failure, and a panic hook that catches
//! panics of the engine's background threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

/// Panics of the engine's own threads (named `basalt-…`): `Db::drop` joins
/// the flush thread and drops its panic, so the hook records them.
static BACKGROUND_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub fn record_background_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("");
            if name.starts_with("basalt") {
                BACKGROUND_PANICS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(format!("{name}: {info}"));
            }
            previous(info);
        }));
    });
}

pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_default()
}
/// Background panics recorded since the last call.
pub fn take_background_panics() -> Vec<String> {
    std::mem::take(&mut *BACKGROUND_PANICS.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// Aborts the process when one trial runs too long: a hang is a failure.
pub struct Watchdog {
    current: Arc<Mutex<(Instant, String)>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn new(limit: Duration) -> Watchdog {
        let current = Arc::new(Mutex::new((Instant::now(), String::new())));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (current.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                let (since, what) = &*c.lock().expect("watchdog lock");
                if since.elapsed() > limit {
                    eprintln!("hang: {what} ran for over {limit:?}");
                    std::process::abort();
                }
            }
        });
        Watchdog { current, stop, thread: Some(thread) }
    }

    pub fn start(&self, what: String) {
        *self.current.lock().expect("watchdog lock") = (Instant::now(), what);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
