//! `basalt`: the command line of the Basalt storage engine.

mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "basalt", version, about = "The Basalt storage engine's command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a database over the PostgreSQL wire protocol, for psql and any
    /// PostgreSQL driver (SQL through DataFusion; docs/sql.md).
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("basalt: {error}");
            ExitCode::FAILURE
        }
    }
}
