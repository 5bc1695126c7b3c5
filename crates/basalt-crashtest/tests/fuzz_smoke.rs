//! The fuzz targets on the stable toolchain: every committed corpus input
//! (`fuzz/corpus/<target>/`) and bug input (`fuzz/regressions/<target>/`),
//! then seeded mutations of them (bit flips,
//! cuts, inserted and deleted bytes, splices) for a few seconds per target.
//! Not coverage-guided, so no substitute for `cargo fuzz`, but it runs in
//! every CI run and replays every crash input committed to a corpus.
//!
//! `BASALT_FUZZ_SMOKE_MS` sets the time per target (default 1000);
//! `BASALT_SEED` the mutation seed. A failing input is written to
//! `target/fuzz-smoke-failures/<target>-<hash>` for `cargo fuzz run`.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use basalt_crashtest::fuzz::{TARGETS, Target};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The seed corpus of `target` and the inputs of the bugs it found
/// (`fuzz/regressions/<target>/`).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = ["corpus", "regressions"]
        .iter()
        .filter_map(|d| std::fs::read_dir(fuzz_dir().join(d).join(target)).ok())
        .flat_map(|entries| entries.filter_map(|e| Some(e.ok()?.path())))
        .collect();
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

/// Runs `f` on `input`; a panic fails the test after saving the input.
fn run_one(target: &str, f: Target, input: &[u8]) {
    if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| f(input))) {
        let path = save_failure(target, input);
        eprintln!("fuzz target {target} failed on {} bytes, saved to {}", input.len(), path.display());
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn fuzz_targets_survive_their_corpora_and_mutations() {
    let budget = Duration::from_millis(
        std::env::var("BASALT_FUZZ_SMOKE_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000),
    );
    let seed: u64 = std::env::var("BASALT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed);
    for (target, f) in TARGETS {
        let inputs = corpus(target);
        assert!(!inputs.is_empty(), "no corpus for {target} in {}", fuzz_dir().display());
        for input in &inputs {
            run_one(target, f, input);
        }
        let mut rng = StdRng::seed_from_u64(seed ^ target.len() as u64);
        let start = Instant::now();
        let mut runs = 0u64;
        while start.elapsed() < budget {
            let a = &inputs[rng.random_range(0..inputs.len())];
            let b = &inputs[rng.random_range(0..inputs.len())];
            run_one(target, f, &mutate(a, b, &mut rng));
            runs += 1;
        }
        eprintln!("fuzz smoke {target}: {} corpus inputs, {runs} mutations in {budget:?}", inputs.len());
    }
}
