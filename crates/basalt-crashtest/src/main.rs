//! `basalt-crashtest`: the kill test. See the crate docs and
//! `docs/RELIABILITY.md`.
//!
//! ```text
//! basalt-crashtest --cycles 20 --seed 1 --dir /tmp/crash
//! ```
//!
//! Exits 0 only when every check held; the last line is a summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use basalt_crashtest::driver::{self, DriverConfig};
use basalt_crashtest::workload;
use basalt_crashtest::writer::{self, WriterConfig};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    about = "Kill a Basalt writer with SIGKILL again and again; check every acknowledged write after each kill"
)]
struct Cli {
    /// Kill cycles to run.
    #[arg(long, default_value_t = 20)]
    cycles: u64,
    /// Seed of everything random (batches, options, kill times).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A directory that does not exist yet, or is empty: the database and
    /// the expected-state logs go there, and stay for inspection.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Workloads, comma-separated (kv, tables, indexed, transfers).
    #[arg(long, default_value = "kv,tables,indexed,transfers", value_delimiter = ',')]
    workloads: Vec<String>,
    /// Writer threads per workload.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// Kills land up to this many milliseconds after the writer starts.
    #[arg(long, default_value_t = 600)]
    kill_ms_max: u64,
    /// Share of batches written without sync (a process kill must not lose
    /// them either).
    #[arg(long, default_value_t = 0.3)]
    unsynced_share: f64,
    /// Print a line per cycle to stderr.
    #[arg(long)]
    verbose: bool,
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// The writer process the driver starts and kills (not for direct use).
    #[command(hide = true)]
    Writer {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        cycle: u64,
        #[arg(long, value_delimiter = ',')]
        workloads: Vec<String>,
        #[arg(long)]
        threads: u32,
        #[arg(long)]
        unsynced_share: f64,
    },
    /// Writes the seed corpora of the fuzz targets to `out` (`fuzz/corpus`).
    FuzzSeeds {
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Mode::FuzzSeeds { out }) = &cli.mode {
        return match basalt_crashtest::fuzz::seeds::write_all(out) {
            Ok(n) => {
                println!("wrote {n} seed inputs under {}", out.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", out.display());
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Mode::Writer { dir, seed, cycle, workloads, threads, unsynced_share }) = cli.mode {
        let config = WriterConfig {
            dir,
            seed,
            cycle,
            workloads,
            threads,
            unsynced_share,
            lifetime: Duration::from_secs(60),
        };
        // The writer only returns on an error; the driver reports it.
        if let Err(e) = writer::run(&config) {
            eprintln!("writer (cycle {cycle}): {e}");
        }
        return ExitCode::from(2);
    }
    let Some(dir) = cli.dir else {
        eprintln!("--dir is required");
        return ExitCode::from(2);
    };
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        eprintln!("{} is not empty; give a new or empty directory", dir.display());
        return ExitCode::from(2);
    }
    if let Some(bad) = cli.workloads.iter().find(|w| !workload::ALL.contains(&w.as_str())) {
        eprintln!("unknown workload {bad}; known: {}", workload::ALL.join(", "));
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cannot find this binary to start writers: {e}");
            return ExitCode::from(2);
        }
    };
    let config = DriverConfig {
        dir,
        cycles: cli.cycles,
        seed: cli.seed,
        workloads: cli.workloads,
        threads: cli.threads,
        kill_ms_max: cli.kill_ms_max,
        unsynced_share: cli.unsynced_share,
        verbose: cli.verbose,
    };
    let summary = driver::run(&config, &exe);
    for v in &summary.violations {
        eprintln!("VIOLATION: {v}");
    }
    println!("{}", summary.line());
    if summary.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
