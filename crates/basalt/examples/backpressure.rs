//! Write back-pressure, measured: the same write load with and without a
//! write-buffer budget, each in its own child process so its peak RSS is
//! its own.
//!
//! ```text
//! cargo run --release --example backpressure -- [--records N] [--value-bytes B] [--budget-mib M]
//! ```
//!
//! Seed 002's scenario is `--records 50000 --value-bytes 1024 --budget-mib 32`;
//! a sustained overload is `--records 1000000` (1 GB through 32 MiB).

use std::process::Command;
use std::time::Instant;

use basalt::{Db, Options, WriteBatch};
use clap::Parser;

#[derive(Parser, Clone)]
#[command(about = "Throughput, memory and stalls with and without a write-buffer budget")]
struct Args {
    /// Records to write.
    #[arg(long, default_value_t = 50_000)]
    records: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Records per write batch.
    #[arg(long, default_value_t = 100)]
    batch: u64,
    /// Write-buffer budget in MiB for the limited run.
    #[arg(long, default_value_t = 32)]
    budget_mib: usize,
    /// Internal: run one configuration in this process ("limited" or "unlimited").
    #[arg(long, hide = true)]
    child: Option<String>,
}

/// Peak resident set size of this process, from /proc (0 where unavailable).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn run_child(args: &Args, limited: bool) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut opts = Options::default();
    if limited {
        opts.write_buffer_bytes_max = args.budget_mib << 20;
    } else {
        // No budget: memtables switch at their usual size and any number may
        // wait for flush.
        opts.write_buffer_bytes_max = usize::MAX / 2;
        opts.immutable_memtables_max = usize::MAX / 2;
    }
    let db = Db::open(dir.path().join("db"), opts)?;
    let value = vec![0x5au8; args.value_bytes];
    let start = Instant::now();
    let mut n = 0u64;
    while n < args.records {
        let mut batch = WriteBatch::new();
        for _ in 0..args.batch.min(args.records - n) {
            batch.put(format!("{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)), &value);
            n += 1;
        }
        db.write(batch)?;
    }
    let secs = start.elapsed().as_secs_f64();
    // Sustained throughput counts the background work the load left behind,
    // including flushing what sits in memtables.
    db.flush()?;
    db.wait_for_background_work()?;
    let settled_secs = start.elapsed().as_secs_f64();
    let s = db.stats();
    println!(
        "RESULT {} {:.0} {:.1} {} {} {} {:.3} {} {:.3} {:.0}",
        if limited { "limited" } else { "unlimited" },
        args.records as f64 / secs,
        (args.records as f64 * (args.value_bytes + 16) as f64) / secs / 1e6,
        s.memtable_bytes_peak,
        peak_rss_bytes(),
        s.write_stalls,
        s.write_stall_time_max.as_secs_f64() * 1e3,
        s.delayed_groups,
        s.write_stall_time.as_secs_f64() * 1e3,
        args.records as f64 / settled_secs,
    );
    eprintln!("{s}");
    db.close()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(which) = &args.child {
        return run_child(&args, which == "limited");
    }
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    for which in ["unlimited", "limited"] {
        let out = Command::new(&exe)
            .args(["--records", &args.records.to_string(), "--value-bytes", &args.value_bytes.to_string()])
            .args(["--batch", &args.batch.to_string(), "--budget-mib", &args.budget_mib.to_string()])
            .args(["--child", which])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("RESULT"))
            .ok_or_else(|| format!("{which} run failed: {}", String::from_utf8_lossy(&out.stderr)))?;
        rows.push(line.split_whitespace().skip(1).map(str::to_string).collect::<Vec<_>>());
    }
    println!(
        "{} records of {} B, batches of {}, budget {} MiB",
        args.records, args.value_bytes, args.batch, args.budget_mib
    );
    println!(
        "{:<10} {:>12} {:>8} {:>14} {:>14} {:>12} {:>7} {:>13} {:>8} {:>13}",
        "run",
        "records/s",
        "MB/s",
        "settled rec/s",
        "peak memtables",
        "peak RSS",
        "stalls",
        "longest stall",
        "delayed",
        "total stalled"
    );
    for r in &rows {
        let mib = |s: &str| s.parse::<f64>().unwrap_or(0.0) / (1024.0 * 1024.0);
        println!(
            "{:<10} {:>12} {:>8} {:>14} {:>10.1} MiB {:>8.1} MiB {:>7} {:>10} ms {:>8} {:>10} ms",
            r[0],
            r[1],
            r[2],
            r[9],
            mib(&r[3]),
            mib(&r[4]),
            r[5],
            r[6],
            r[7],
            r[8]
        );
    }
    let ratio = rows[1][1].parse::<f64>()? / rows[0][1].parse::<f64>()?;
    let settled = rows[1][9].parse::<f64>()? / rows[0][9].parse::<f64>()?;
    println!(
        "throughput kept with the budget: {ratio:.2} (writes acknowledged), {settled:.2} (until background work settles)"
    );
    Ok(())
}
