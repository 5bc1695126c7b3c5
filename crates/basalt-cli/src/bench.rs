//! `basalt bench …`: the benchmark suite's workloads from the front door.
//! The suite is its own binary (`basalt-bench`, with the peers' client
//! libraries this program should not carry); this runs the one built
//! beside it, with the same arguments, or says how to build it.

use std::ffi::OsString;
use std::process::Command;

use clap::Args;

use crate::error::{CliError, CliResult, Exit};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The suite's subcommand and options (`quick`, `ycsb --scale 1000000`,
    /// `tpch --scale 1`…; `basalt bench --help` for the list).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

pub fn run(args: &BenchArgs) -> CliResult<()> {
    let exe = std::env::current_exe()?;
    let suite = exe.with_file_name(format!("basalt-bench{}", std::env::consts::EXE_SUFFIX));
    if !suite.is_file() {
        let profile = if cfg!(debug_assertions) { "" } else { " --release" };
        return Err(CliError::failure(format!(
            "the benchmark suite is not built beside {}: cargo build{profile} -p basalt-bench",
            exe.display()
        )));
    }
    let status = Command::new(&suite).args(&args.args).status()?;
    match status.code() {
        Some(0) => Ok(()),
        // clap's usage errors keep their code.
        Some(2) => Err(CliError::new(Exit::Usage, "the benchmark suite refused its arguments")),
        _ => Err(CliError::failure(format!("the benchmark suite failed ({status})"))),
    }
}
