//! Basalt's reliability harness.
//!
//! - The **kill test** (`basalt-crashtest`): a driver starts a writer process
//!   that commits random batches and records each one in an expected-state
//!   log, kills it with `SIGKILL` at a random moment (during writes,
//!   flushes, compactions or its own recovery), reopens the database and
//!   checks it against the log. See [`driver`] and [`writer`].
//! - What is written and checked is a [`workload::Workload`]: the key-value
//!   store ([`kv`]) and Arrow tables ([`tables`]) today; later features add
//!   their own.
//! - The bodies of the fuzz targets ([`fuzz`]), shared by the cargo-fuzz
//!   crate in `fuzz/` and a stable smoke test that replays their corpora.

pub mod driver;
pub mod expected;
pub mod fuzz;
pub mod indexed;
pub mod kv;
pub mod options;
pub mod tables;
pub mod transfers;
pub mod workload;
pub mod writer;

/// Mixes numbers into one seed (splitmix64 over each in turn), so that every
/// batch of every writer of every cycle gets its own reproducible stream.
pub fn mix(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for &p in parts {
        h ^= p;
        h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h = z ^ (z >> 31);
    }
    h
}
