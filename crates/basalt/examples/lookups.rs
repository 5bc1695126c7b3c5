//! Point lookups alone, for profiling the read path: fills a database with
//! 8-byte big-endian keys (the `omendb` workload's shape), settles it, then
//! times uniform random lookups of present keys and of missing keys. Only
//! the lookup phases run long enough to dominate a profile:
//!
//! ```text
//! cargo run --release --example lookups -- [--keys N] [--gets N] [--random] [--fences] [--copy] [--no-mmap] [--block-cache-mib M] [--row-cache-mib M]
//! perf record -g target/release/examples/lookups --keys 1000000 --gets 20000000 --random
//! ```

use std::time::Instant;

use basalt::{Db, Options, WriteBatch, WriteOptions};
use clap::Parser;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

#[derive(Parser)]
#[command(about = "Fill a Basalt database, then time random point lookups")]
#[expect(clippy::struct_excessive_bools, reason = "command-line switches")]
struct Args {
    /// Keys to load.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Lookups of present keys (and as many of missing keys).
    #[arg(long, default_value_t = 2_000_000)]
    gets: u64,
    /// Value bytes per key.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Insert in random order (default: ascending).
    #[arg(long)]
    random: bool,
    /// Keys spread over the whole `u64` range (mixed) instead of dense.
    #[arg(long)]
    spread: bool,
    /// Switch the learned index off.
    #[arg(long)]
    fences: bool,
    /// Print the latency breakdown (times every lookup, which slows it).
    #[arg(long)]
    timing: bool,
    /// Draw lookups from this many keys chosen at random (hot keys scattered
    /// over every block, the row cache's case); 0: from every key.
    #[arg(long, default_value_t = 0)]
    hot_keys: u64,
    /// Threads doing the lookups (each does `gets / threads`).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Look up with `Db::get`, which copies each value out, instead of
    /// `Db::get_with`, which lends it.
    #[arg(long)]
    copy: bool,
    /// The learned index's error bound (default: the engine's).
    #[arg(long)]
    epsilon: Option<u32>,
    /// Read SSTs with `pread` instead of memory maps.
    #[arg(long)]
    no_mmap: bool,
    /// Block cache in MiB.
    #[arg(long, default_value_t = 64)]
    block_cache_mib: usize,
    /// Row cache in MiB (0: off, the default).
    #[arg(long, default_value_t = 0)]
    row_cache_mib: usize,
    /// Seed of the key order and the lookups.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Key number `i` as 8 big-endian bytes: `2i` (dense; odd numbers are
/// missing keys), or with `spread` the bijective mix of `i` (keys spread
/// over the whole `u64` range as the `omendb` benchmark's random keys are;
/// the mixes of `n..2n` are the missing keys).
fn key(i: u64, spread: bool) -> [u8; 8] {
    if spread { mix64(i) } else { i * 2 }.to_be_bytes()
}

/// `SplitMix64`'s finalizer, a bijection on `u64`.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let options = Options::default()
        .learned_index(!args.fences)
        .timing_stats(args.timing)
        .row_cache_bytes(args.row_cache_mib << 20)
        .mmap_reads(!args.no_mmap)
        .learned_index_epsilon(args.epsilon.unwrap_or(Options::default().learned_index_epsilon))
        .block_cache_bytes(args.block_cache_mib << 20);
    let db = Db::open(dir.path(), options)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut order: Vec<u64> = (0..args.keys).collect();
    if args.random {
        order.shuffle(&mut rng);
    }
    let mut value = vec![0u8; args.value_bytes];
    let t = Instant::now();
    for chunk in order.chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            value[..8.min(args.value_bytes)].copy_from_slice(&i.to_le_bytes()[..8.min(args.value_bytes)]);
            batch.put(key(i, args.spread), &value);
        }
        db.write_opt(batch, &WriteOptions::default().sync(false))?;
    }
    db.flush()?;
    db.wait_for_background_work()?;
    println!("loaded {} keys in {:.2?}", args.keys, t.elapsed());

    let hot: Vec<u64> = (0..args.hot_keys).map(|_| rng.random_range(0..args.keys)).collect();
    let threads = args.threads.max(1);
    for (name, offset) in [("present", 0u64), ("missing", 1)] {
        let t = Instant::now();
        // Each thread does its share of the lookups with its own generator.
        let found = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let (db, hot) = (&db, &hot);
                    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed ^ (thread as u64 + 1) << 32);
                    scope.spawn(move || -> Result<u64, basalt::Error> {
                        let mut found = 0u64;
                        for _ in 0..args.gets / threads as u64 {
                            let i = if hot.is_empty() {
                                rng.random_range(0..args.keys)
                            } else {
                                hot[rng.random_range(0..hot.len())]
                            };
                            let k = if args.spread {
                                key(i + offset * args.keys, true)
                            } else {
                                (i * 2 + offset).to_be_bytes()
                            };
                            found += u64::from(if args.copy {
                                db.get(k)?.is_some()
                            } else {
                                db.get_with(k, |v| std::hint::black_box(v.len()))?.is_some()
                            });
                        }
                        Ok(found)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("lookup thread panicked")).sum::<Result<u64, _>>()
        })?;
        let took = t.elapsed();
        let gets = args.gets / threads as u64 * threads as u64;
        let expect = if offset == 0 { gets } else { 0 };
        if found != expect {
            return Err(format!("{name}: found {found} of {gets} lookups, expected {expect}").into());
        }
        println!(
            "{name:>8} keys: {:.0}K lookups/s with {threads} thread(s) ({:.3} us each per thread)",
            gets as f64 / took.as_secs_f64() / 1e3,
            took.as_secs_f64() * 1e6 * threads as f64 / gets as f64
        );
    }
    println!("{}", db.stats());
    Ok(())
}
