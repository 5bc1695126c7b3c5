//! A tour of Basalt's key-value API with throughput for each step: fill with
//! sequential and random keys, close and reopen, read every key back, scan
//! a range.
//!
//! ```text
//! cargo run --release --example tour -- [--keys N] [--path DIR] [--sync]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use basalt::{Db, Options, WriteBatch, WriteOptions};
use clap::Parser;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const KEY_BYTES: usize = 24;
const VALUE_BYTES: usize = 150;
const BATCH_KEYS: usize = 1000;

#[derive(Parser)]
#[command(about = "Fill, reopen, read back and scan a Basalt database, printing throughput")]
struct Args {
    /// Number of keys to write in each fill.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Database directory (default: a temporary directory, removed at exit).
    #[arg(long)]
    path: Option<PathBuf>,
    /// Fsync every batch (sync = true) instead of leaving it to the OS.
    #[arg(long)]
    sync: bool,
    /// Target data block size in bytes (default: `Options::default()`).
    #[arg(long)]
    block_bytes: Option<usize>,
    /// Switch the learned index off (lookups binary-search fence keys).
    #[arg(long)]
    fences: bool,
    /// Time every phase of point lookups (printed with the stats).
    #[arg(long)]
    timing: bool,
    /// Block cache in MiB (default: `Options::default()`).
    #[arg(long)]
    cache_mib: Option<usize>,
    /// Seed of the random key order.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Key `i` as 24 bytes: the number zero-padded, so byte order is numeric order.
fn key(i: usize) -> [u8; KEY_BYTES] {
    let mut k = [0u8; KEY_BYTES];
    let s = format!("{i:0KEY_BYTES$}");
    k.copy_from_slice(s.as_bytes());
    k
}

fn value(i: usize, rng: &mut impl Rng) -> Vec<u8> {
    let mut v = vec![0u8; VALUE_BYTES];
    rng.fill(&mut v[..]);
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

fn report(step: &str, ops: usize, took: Duration, bytes_per_op: usize) {
    let secs = took.as_secs_f64();
    let mb = (ops * bytes_per_op) as f64 / secs / 1e6;
    println!("{step:<28} {ops:>10} ops  {secs:>8.3} s  {:>12.0} ops/s  {mb:>8.1} MB/s", ops as f64 / secs);
}

fn fill(db: &Db, order: &[usize], sync: bool, rng: &mut impl Rng) -> basalt::Result<()> {
    let opts = WriteOptions::default().sync(sync);
    for chunk in order.chunks(BATCH_KEYS) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), value(i, rng));
        }
        db.write_opt(batch, &opts)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // Removed when `tmp` drops at the end of main.
    let tmp = tempfile::tempdir()?;
    let path = args.path.clone().unwrap_or_else(|| tmp.path().join("tour-db"));
    let n = args.keys;
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    println!("basalt tour: {n} keys of {KEY_BYTES} B with {VALUE_BYTES} B values at {}", path.display());
    let row = KEY_BYTES + VALUE_BYTES;

    let mut options = Options::default();
    if let Some(b) = args.block_bytes {
        options.block_bytes_target = b;
    }
    if let Some(m) = args.cache_mib {
        options.block_cache_bytes = m << 20;
    }
    options.learned_index = !args.fences;
    options.timing_stats = args.timing;
    let db = Db::open(&path, options.clone())?;
    let sequential: Vec<usize> = (0..n).collect();
    let t = Instant::now();
    fill(&db, &sequential, args.sync, &mut rng)?;
    report("fill sequential", n, t.elapsed(), row);

    let mut random: Vec<usize> = (n..2 * n).collect();
    random.shuffle(&mut rng);
    let t = Instant::now();
    fill(&db, &random, args.sync, &mut rng)?;
    report("fill random", n, t.elapsed(), row);

    let t = Instant::now();
    db.wait_for_background_work()?;
    report("flush + compaction settle", 1, t.elapsed(), 0);
    println!("\nwrite path:\n{}", db.stats());

    let t = Instant::now();
    db.close()?;
    let db = Db::open(&path, options)?;
    report("close + reopen (WAL replay)", 1, t.elapsed(), 0);

    let mut order: Vec<usize> = (0..2 * n).collect();
    order.shuffle(&mut rng);
    let t = Instant::now();
    for &i in &order {
        let got = db.get(key(i))?.ok_or_else(|| format!("key {i} missing after reopen"))?;
        if got[..8] != (i as u64).to_le_bytes() {
            return Err(format!("key {i} has a wrong value").into());
        }
    }
    report("random reads (all keys)", order.len(), t.elapsed(), row);

    let t = Instant::now();
    for i in 0..n.min(100_000) {
        let missing = key(2 * n + i);
        if db.get(missing)?.is_some() {
            return Err("found a key never written".into());
        }
    }
    report("random reads (missing)", n.min(100_000), t.elapsed(), KEY_BYTES);

    let (lo, hi) = (n / 2, n / 2 + n);
    let t = Instant::now();
    let mut count = 0usize;
    for kv in db.iter(key(lo)..key(hi)) {
        let (k, _) = kv?;
        if k.as_ref() != key(lo + count) {
            return Err(format!("scan out of order at {count}").into());
        }
        count += 1;
    }
    if count != hi - lo {
        return Err(format!("range scan saw {count} keys, expected {}", hi - lo).into());
    }
    report("range scan", count, t.elapsed(), row);

    let t = Instant::now();
    let rev = db.iter_rev(key(lo)..key(hi)).take(10_000).count();
    report("reverse scan (10k)", rev, t.elapsed(), row);

    println!("\nread path (after reopen):\n{}", db.stats());
    db.close()?;
    Ok(())
}
