//! `basalt sql`: SQL through DataFusion over the database's tables, one
//! statement from the command line, or an interactive shell (line
//! editing and history from rustyline) in the manner of `sqlite3`:
//! statements end with `;`, dot-commands (`.tables`, `.schema`, `.mode`,
//! `.timer`, `.quit`) do the rest. Given a sharded store's directory (one
//! Ray wrote), one statement runs over its table, read only.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::SchemaRef;
use basalt::Db;
use basalt_datafusion::datafusion::prelude::SessionContext;
use clap::{Args, ValueEnum};
use futures::StreamExt;
use rustyline::error::ReadlineError;

use crate::error::{CliError, CliResult};
use crate::open;
use crate::output::{Format, OutputArgs, Sink};

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The database directory.
    db: PathBuf,
    /// The statement to run; without it, an interactive shell.
    query: Option<String>,
    /// Print how long each statement took (on in the shell).
    #[arg(long)]
    timer: bool,
    #[command(flatten)]
    output: OutputArgs,
}

async fn run_statement(ctx: &SessionContext, text: &str, output: &OutputArgs) -> CliResult<u64> {
    let result = run_one(ctx, text, output).await;
    // A statement that fails inside BEGIN … COMMIT fails its block: the
    // COMMIT rolls back (as in PostgreSQL), so a script that goes on after
    // an error never commits half of it.
    if let Err(e) = &result {
        basalt_datafusion::fail_transaction(ctx, &e.to_string());
    }
    result
}

async fn run_one(ctx: &SessionContext, text: &str, output: &OutputArgs) -> CliResult<u64> {
    let frame = basalt_datafusion::sql(ctx, text).await?;
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    let mut stream = frame.execute_stream().await?;
    let mut sink = Sink::new(output, &schema)?;
    while let Some(batch) = stream.next().await {
        sink.write(&batch?)?;
    }
    sink.finish(&schema)
}

pub fn run(args: &SqlArgs, create: bool) -> CliResult<()> {
    if args.db.join(basalt::SHARD_MAP_FILE).exists() {
        return run_sharded(args);
    }
    let db = Arc::new(open::open(&args.db, create)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let ctx = basalt_datafusion::session(Arc::clone(&db));
    let result = match &args.query {
        Some(query) => {
            let started = Instant::now();
            runtime.block_on(run_statement(&ctx, query, &args.output)).map(|_| {
                if args.timer {
                    eprintln!("time: {:.3} s", started.elapsed().as_secs_f64());
                }
            })
        }
        None => shell(&runtime, &ctx, &db, args),
    };
    if basalt_datafusion::in_transaction(&ctx) {
        eprintln!("basalt: the open transaction was rolled back (no COMMIT before the end)");
    }
    drop(ctx);
    drop(runtime);
    if let Ok(db) = Arc::try_unwrap(db) {
        db.close()?;
    }
    result
}

/// One statement over a sharded store (a directory with a shard map):
/// its table, read only, at the version current now.
fn run_sharded(args: &SqlArgs) -> CliResult<()> {
    let Some(query) = &args.query else {
        return Err(CliError::usage(format!(
            "{} is a sharded store: give the statement to run (the shell opens databases)",
            args.db.display()
        )));
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let ctx = basalt_datafusion::sharded_session(&args.db, &basalt::Options::default())?;
    let started = Instant::now();
    runtime.block_on(run_one(&ctx, query, &args.output))?;
    if args.timer {
        eprintln!("time: {:.3} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

const HELP: &str = "\
Statements end with `;` and may span lines. Dot-commands:
  .tables              list the tables
  .schema [TABLE]      columns, primary key and indexes
  .mode FORMAT         table, csv, json, jsonl
  .timer on|off        print each statement's time
  .help                this text
  .quit                leave (or Ctrl-D)";

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".basalt_history"))
}

fn shell(runtime: &tokio::runtime::Runtime, ctx: &SessionContext, db: &Db, args: &SqlArgs) -> CliResult<()> {
    let mut editor =
        rustyline::DefaultEditor::new().map_err(|e| CliError::failure(format!("line editor: {e}")))?;
    // Piped into, the shell runs a script: no banner, no history, and a
    // failed statement makes the exit code 2.
    let interactive = std::io::stdin().is_terminal();
    let history = history_path().filter(|_| interactive);
    if let Some(path) = &history {
        // No history yet is not an error.
        let _ = editor.load_history(path);
    }
    if interactive {
        out!("basalt {} — SQL over {} (.help for help)", env!("CARGO_PKG_VERSION"), args.db.display());
    }
    let mut failures = 0u64;
    let mut output = args.output.clone();
    let mut timer = true;
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() { "basalt> " } else { "   ...> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => {
                // A last statement without its `;`.
                if !pending.trim().is_empty() {
                    let statement = std::mem::take(&mut pending);
                    if let Err(e) = runtime.block_on(run_statement(ctx, statement.trim(), &output)) {
                        eprintln!("error: {e}");
                        failures += 1;
                    }
                }
                break;
            }
            Err(e) => return Err(CliError::failure(format!("reading input: {e}"))),
        };
        let trimmed = line.trim();
        if pending.is_empty() && trimmed.starts_with('.') {
            let _ = editor.add_history_entry(trimmed);
            match dot_command(trimmed, db, &mut output, &mut timer) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    eprintln!("error: {e}");
                    failures += 1;
                }
            }
            continue;
        }
        if trimmed.is_empty() && pending.is_empty() {
            continue;
        }
        pending.push_str(&line);
        pending.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let statement = std::mem::take(&mut pending);
        if interactive {
            let _ = editor.add_history_entry(statement.trim());
        }
        let started = Instant::now();
        match runtime.block_on(run_statement(ctx, statement.trim().trim_end_matches(';'), &output)) {
            Ok(rows) => {
                if timer {
                    eprintln!("{rows} rows in {:.3} s", started.elapsed().as_secs_f64());
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                failures += 1;
            }
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    if failures > 0 && !interactive {
        return Err(CliError::usage(format!("{failures} statements of the script failed")));
    }
    Ok(())
}

/// Runs a dot-command; `false` to leave the shell.
fn dot_command(line: &str, db: &Db, output: &mut OutputArgs, timer: &mut bool) -> CliResult<bool> {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or_default();
    let argument = words.next();
    match (command, argument) {
        (".quit" | ".exit", _) => return Ok(false),
        (".help", _) => out!("{HELP}"),
        (".tables", _) => {
            for name in db.tables().into_iter().filter(|t| t != "default") {
                out!("{name}");
            }
        }
        (".schema", which) => {
            for name in db.tables().into_iter().filter(|t| t != "default" && which.is_none_or(|w| w == t)) {
                let table = db.table(&name)?;
                out!("table {name} (primary key {})", table.primary_key().join(", "));
                for f in table.schema().fields() {
                    out!(
                        "  {} {}{}",
                        f.name(),
                        f.data_type(),
                        if f.is_nullable() { "" } else { " not null" }
                    );
                }
                for i in table.indexes() {
                    out!(
                        "  index {} ({}){}",
                        i.name,
                        i.columns.join(", "),
                        if i.unique { " unique" } else { "" }
                    );
                }
            }
        }
        (".mode", Some(mode)) => {
            let format = Format::from_str(mode, true)
                .map_err(|_| CliError::usage(format!("no output mode {mode}")))?;
            if matches!(format, Format::Arrow | Format::Parquet) {
                return Err(CliError::usage("binary modes need `basalt sql DB QUERY --output FILE`"));
            }
            output.format = format;
        }
        (".timer", Some("on")) => *timer = true,
        (".timer", Some("off")) => *timer = false,
        _ => return Err(CliError::usage(format!("unknown command {line:?} (.help lists them)"))),
    }
    Ok(true)
}
