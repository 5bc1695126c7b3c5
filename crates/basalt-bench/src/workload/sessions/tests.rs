use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use super::super::Workload;
use super::super::tests::metric_of;
use super::*;

/// A short run: a TTL of 1.2 s, 4 s of 300 new sessions a second.
fn params() -> Params {
    Params { run_ms: 4_000, ttl_ms: 1_200, new_per_s: 300 }
}

fn job() -> Job {
    let mut job = super::super::tests::job(Workload::Sessions, 4, &[]);
    job.sessions = Some(params());
    job
}

#[test]
fn a_short_run_expires_sessions_and_measures_both_stores() {
    for nth in [0, 1] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = job();
        j.run = nth;
        let mut sink = Sink::new(&j);
        run(&j, dir.path(), &mut sink).expect("run");
        for store in ["basalt", NO_TTL_ENGINE] {
            let value = |metric: &str| metric_of(&sink.records, store, metric);
            for metric in ["get_p50_us", "get_p99_us", "put_p50_us", "ops_per_s", "disk_at_100pct_bytes"] {
                assert!(value(metric) > 0.0, "{store} {metric}");
            }
            assert!(value("reads_checked") > 1_000.0, "{store}");
            assert!(value("expired_checked") > 0.0, "{store}: sessions past the TTL checked");
            assert!(value("new_sessions_per_s") > 100.0, "{store}");
            if store == "basalt" {
                assert!(value("get_p50_ratio_ttl_over_no_ttl") > 0.0);
                assert!(value("sessions_counted_at_end") < value("live_sessions_expected_at_end") * 2.0);
            } else {
                assert!(value("sessions_counted_at_end") > 1_000.0);
            }
        }
        let counted = |store: &str| metric_of(&sink.records, store, "sessions_counted_at_end");
        assert!(counted("basalt") < counted(NO_TTL_ENGINE), "the TTL store holds fewer sessions");
        assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none(), "databases removed");
    }
}

#[test]
fn the_params_pick_their_windows() {
    let p = Params::default();
    assert_eq!(
        (p.run(), p.ttl(), p.recent()),
        (Duration::from_mins(10), Duration::from_mins(1), Duration::from_secs(30))
    );
    assert_eq!(p.sample_every(), SAMPLE_EVERY_MAX);
    assert_eq!(margin(p.ttl()), MARGIN_MAX);
    assert_eq!(p.name(), "ttl-60s");
    assert_eq!(params().name(), "ttl-1200ms");
    assert_eq!(margin(params().ttl()), Duration::from_millis(300));
}

/// How a broken store breaks.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    /// The TTL store keeps everything (no TTL set).
    NeverExpires,
    /// The TTL store expires after a third of the TTL.
    ExpiresEarly,
    /// Every 50th rewrite of a session is acknowledged but not written.
    DropsTouches,
}

struct Broken {
    inner: BasaltSessions,
    fault: Fault,
    puts: Cell<u64>,
    written: RefCell<HashSet<Vec<u8>>>,
}

impl SessionStore for Broken {
    fn put(&self, key: &[u8], value: &[u8]) -> crate::engine::Result<()> {
        let rewrite = !self.written.borrow_mut().insert(key.to_vec());
        self.puts.set(self.puts.get() + 1);
        if self.fault == Fault::DropsTouches && rewrite && self.puts.get().is_multiple_of(50) {
            return Ok(());
        }
        self.inner.put(key, value)
    }
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> crate::engine::Result<bool> {
        self.inner.get(key, out)
    }
    fn count(&self) -> crate::engine::Result<u64> {
        self.inner.count()
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
    fn dir(&self) -> &Path {
        self.inner.dir()
    }
}

#[test]
fn a_store_that_expires_wrong_or_loses_a_touch_fails_the_run() {
    let p = params();
    for (fault, says) in [
        (Fault::NeverExpires, "past its TTL"),
        (Fault::ExpiresEarly, "not found"),
        (Fault::DropsTouches, "stale version"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let ttl = match fault {
            Fault::NeverExpires => None,
            Fault::ExpiresEarly => Some(p.ttl() / 3),
            Fault::DropsTouches => Some(p.ttl()),
        };
        let inner = BasaltSessions::open(&dir.path().join("ttl"), 8 << 20, ttl).expect("open");
        let broken = Broken { inner, fault, puts: Cell::new(0), written: RefCell::default() };
        let plain = BasaltSessions::open(&dir.path().join("plain"), 8 << 20, None).expect("open");
        let err = drive(&p, [&broken, &plain], 7, 0).expect_err("a broken store fails").to_string();
        assert!(err.contains("ttl store") && err.contains(says), "{fault:?}: {err}");
    }
}
