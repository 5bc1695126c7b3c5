//! Issue 43: read-modify-write transactions. Loads `scale` accounts (8-byte
//! keys, a balance in the first 8 bytes of each value), then runs two
//! kinds of transaction with each engine's own transactions: `rmw` (YCSB
//! F's shape: read one account, write it back plus one) and `transfer`
//! (read two accounts, move one unit from the first to the second), each
//! at low contention (accounts drawn uniformly from all of them) and high
//! contention (from 16 hot accounts), with 1 and 2 client threads. An
//! optimistic engine's commit may be refused for a conflict: the client
//! runs the transaction again, and the run records aborts per commit.
//! The harness checks at the end that the balances add up: the load's
//! total plus one per committed `rmw` (a lost update or a torn transfer
//! fails the run).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Job, Opener, Sink, load, rate};
use crate::engine::{Engine, Result};

/// Each account's balance after the load.
const OPENING_BALANCE: i64 = 1_000;
/// Accounts the high-contention phases draw from.
const HOT_ACCOUNTS: u64 = 16;
/// Rows per batch in the load.
const LOAD_BATCH_ROWS: usize = 1_000;

fn key(account: u64) -> [u8; 8] {
    account.to_be_bytes()
}

fn balance(value: Option<&[u8]>) -> i64 {
    value.and_then(|v| v.get(..8)).map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// A value holding `balance`, padded to `bytes`.
fn value(balance: i64, bytes: usize) -> Vec<u8> {
    let mut v = balance.to_le_bytes().to_vec();
    v.resize(bytes.max(8), b'.');
    v
}

/// Runs the workload; see the module docs.
pub fn run(job: &Job, open: &Opener<'_>, dir: &Path, sink: &mut Sink) -> Result<()> {
    let engine = open(dir)?;
    let accounts = job.scale.max(HOT_ACCOUNTS);
    let value_bytes = job.value_bytes.max(8);
    load(engine.as_ref(), accounts, LOAD_BATCH_ROWS, |i, row| {
        row.0 = key(i).to_vec();
        row.1 = value(OPENING_BALANCE, value_bytes);
    })?;
    engine.settle()?;
    let mut increments = 0u64;
    for (contention, pool) in [("low", accounts), ("high", HOT_ACCOUNTS)] {
        for op in ["rmw", "transfer"] {
            for &threads in &job.threads {
                let phase = Phase { engine: engine.as_ref(), pool, value_bytes, seed: job.seed };
                let (took, commits, aborts) = phase.run(op, threads, job.ops)?;
                if op == "rmw" {
                    increments += commits;
                }
                let name = format!("{op}-{contention}");
                sink.put_in("transactions", &name, threads, "txn_per_s", rate(commits, took), "txn/s");
                sink.put_in(
                    "transactions",
                    &name,
                    threads,
                    "aborts_per_commit",
                    aborts as f64 / commits.max(1) as f64,
                    "ratio",
                );
            }
        }
    }
    check_total(engine.as_ref(), accounts, increments)
}

/// The balances must add up to the load's total plus one per committed
/// `rmw`.
fn check_total(engine: &dyn Engine, accounts: u64, increments: u64) -> Result<()> {
    let mut reader = engine.reader()?;
    let mut total = 0i64;
    for a in 0..accounts {
        let mut b = 0;
        if !reader.get(&key(a), &mut |v| b = balance(Some(v)))? {
            return Err(format!("account {a} is missing after the transactions").into());
        }
        total += b;
    }
    let expected = accounts as i64 * OPENING_BALANCE + increments as i64;
    if total != expected {
        return Err(
            format!("balances add up to {total}, not {expected}: a lost update or a torn transfer").into()
        );
    }
    Ok(())
}

/// One timed phase's shared settings.
struct Phase<'a> {
    engine: &'a dyn Engine,
    /// Accounts drawn from: `0..pool`.
    pool: u64,
    value_bytes: usize,
    seed: u64,
}

impl Phase<'_> {
    /// Runs `ops` transactions of kind `op` split over `threads` clients;
    /// returns the wall time, the commits and the aborts.
    fn run(&self, op: &str, threads: usize, ops: u64) -> Result<(std::time::Duration, u64, u64)> {
        let aborts = AtomicU64::new(0);
        let per_thread = ops / threads as u64;
        let start = Instant::now();
        std::thread::scope(|s| -> Result<()> {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let aborts = &aborts;
                    s.spawn(move || -> Result<()> {
                        let mut rng = StdRng::seed_from_u64(self.seed ^ ((t as u64 + 1) * 0x9e37_79b9));
                        for _ in 0..per_thread {
                            aborts.fetch_add(self.one(op, &mut rng)?, Ordering::Relaxed);
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a client thread panicked")??;
            }
            Ok(())
        })?;
        Ok((start.elapsed(), per_thread * threads as u64, aborts.load(Ordering::Relaxed)))
    }

    /// One transaction, run again until it commits; returns its aborts.
    fn one(&self, op: &str, rng: &mut StdRng) -> Result<u64> {
        let a = rng.random_range(0..self.pool);
        let keys_owned: Vec<[u8; 8]> = if op == "rmw" {
            vec![key(a)]
        } else {
            vec![key(a), key((a + rng.random_range(1..self.pool)) % self.pool)]
        };
        let keys: Vec<&[u8]> = keys_owned.iter().map(<[u8; 8]>::as_slice).collect();
        let bytes = self.value_bytes;
        let mut aborts = 0;
        loop {
            let mut update = |i: usize, old: Option<&[u8]>| {
                let b = balance(old);
                let delta = match (op, i) {
                    ("rmw", _) | (_, 1) => 1,
                    _ => -1,
                };
                value(b + delta, bytes)
            };
            if self.engine.transact(&keys, &mut update)? {
                return Ok(aborts);
            }
            aborts += 1;
            if aborts > 1_000_000 {
                return Err("a transaction aborted a million times in a row".into());
            }
        }
    }
}
