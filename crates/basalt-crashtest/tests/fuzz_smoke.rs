//! The fuzz targets on the stable toolchain: every committed corpus input
//! (`fuzz/corpus/<target>/`), then seeded mutations of them (bit flips,
//! cuts, inserted and deleted bytes, splices) for a few seconds per target.
//! Not coverage-guided, so no substitute for `cargo fuzz`, but it runs in
//! every CI run and replays every crash input committed to a corpus.
//!
//! `BASALT_FUZZ_SMOKE_MS` sets the time per target (default 1000);
//! `BASALT_SEED` the mutation seed. A failing input is written to
//! `target/fuzz-smoke-failures/<target>-<hash>` for `cargo fuzz run`.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use basalt_crashtest::fuzz::TARGETS;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(corpus_dir(target)) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn mutate(input: &[u8], other: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = out.len();
        match rng.random_range(0..6) {
            0 | 1 if len > 0 => {
                let i = rng.random_range(0..len);
                out[i] ^= 1 << rng.random_range(0..8);
            }
            2 if len > 0 => out.truncate(rng.random_range(0..len)),
            3 => {
                let i = rng.random_range(0..=len);
                out.insert(i, rng.random());
            }
            4 if len > 0 => {
                out.remove(rng.random_range(0..len));
            }
            _ if !other.is_empty() => {
                // Splice: a piece of another input over this one.
                let (a, b) = (rng.random_range(0..other.len()), rng.random_range(0..other.len()));
                let piece = &other[a.min(b)..a.max(b)];
                let at = rng.random_range(0..=len);
                out.splice(at..(at + piece.len()).min(len), piece.iter().copied());
            }
            _ => {}
        }
    }
    out
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-smoke-failures");
    let _ = std::fs::create_dir_all(&dir);
    let hash =
        input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let path = dir.join(format!("{target}-{hash:016x}"));
    let _ = std::fs::write(&path, input);
    path
}

/// Known bugs a target still hits: (target, source file the panic comes
/// from). Their inputs are counted, not failed on, so the target keeps
/// guarding everything else; each has an ignored regression test in
/// `tests/regressions.rs`. Remove an entry when its bug is fixed.
const KNOWN_BUGS: [(&str, &str); 1] = [("arrow_schema", "arrow-ipc")];

thread_local! {
    /// The target running on this thread, and where its last panic was.
    static RUNNING: RefCell<(&'static str, String)> = const { RefCell::new(("", String::new())) };
}

fn is_known(target: &str, location: &str) -> bool {
    KNOWN_BUGS.iter().any(|(t, file)| *t == target && location.contains(file))
}

/// Records where panics happen; prints only those of no known bug.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info.location().map(ToString::to_string).unwrap_or_default();
        let target = RUNNING.with(|r| {
            let mut r = r.borrow_mut();
            r.1.clone_from(&location);
            r.0
        });
        if !is_known(target, &location) {
            previous(info);
        }
    }));
}

/// Runs `f` on `input`; true if it hit a known bug.
fn run_one(target: &'static str, f: fn(&[u8]), input: &[u8]) -> bool {
    RUNNING.with(|r| *r.borrow_mut() = (target, String::new()));
    if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| f(input))) {
        if RUNNING.with(|r| is_known(target, &r.borrow().1)) {
            return true;
        }
        let path = save_failure(target, input);
        eprintln!("fuzz target {target} failed on {} bytes, saved to {}", input.len(), path.display());
        std::panic::resume_unwind(panic);
    }
    false
}

#[test]
fn fuzz_targets_survive_their_corpora_and_mutations() {
    let budget = Duration::from_millis(
        std::env::var("BASALT_FUZZ_SMOKE_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000),
    );
    let seed: u64 = std::env::var("BASALT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed);
    install_panic_hook();
    for (target, f) in TARGETS {
        let inputs = corpus(target);
        assert!(!inputs.is_empty(), "no corpus for {target} in {}", corpus_dir(target).display());
        let mut known = 0u64;
        for input in &inputs {
            known += u64::from(run_one(target, f, input));
        }
        let mut rng = StdRng::seed_from_u64(seed ^ target.len() as u64);
        let start = Instant::now();
        let mut runs = 0u64;
        while start.elapsed() < budget {
            let a = &inputs[rng.random_range(0..inputs.len())];
            let b = &inputs[rng.random_range(0..inputs.len())];
            known += u64::from(run_one(target, f, &mutate(a, b, &mut rng)));
            runs += 1;
        }
        eprintln!(
            "fuzz smoke {target}: {} corpus inputs, {runs} mutations in {budget:?}, {known} hit a known bug",
            inputs.len()
        );
    }
}
