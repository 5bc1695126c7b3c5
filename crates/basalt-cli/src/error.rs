//! Exit codes and one-line messages a script can rely on. Every failure
//! of the command line ends here: a message on stderr (`basalt: …`) and
//! the exit code of its kind; nothing panics on bad input.

use std::fmt;
use std::process::ExitCode;

/// Writing the output failed: quietly done for a closed pipe (a reader
/// like `head` went away), a one-line error and exit code 1 otherwise.
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("basalt: writing the output: {e}");
    std::process::exit(Exit::Failure as i32);
}

/// What kind of failure ended the command (docs/cli.md lists the codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Anything else: an I/O error, an engine error.
    Failure = 1,
    /// A bad argument: an unknown table, column or index, a value that
    /// does not parse as its column's type, a bad file format (clap's own
    /// usage errors exit 2 as well).
    Usage = 2,
    /// No database at the path, and `--create` was not given.
    Missing = 3,
    /// Another process (or handle) holds the database.
    Locked = 4,
    /// `--where` did not parse, or names a column the table lacks.
    Where = 5,
    /// Damaged bytes: a checksum or invariant failed (`check` found
    /// damage, or a read met it).
    Corruption = 6,
    /// A load met a bad row (a value of the wrong type, a null key, a
    /// unique index violated); the table is as it was before the load.
    BadData = 7,
}

/// A failure: its kind and one line saying what happened.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError { exit, message: message.into() }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    /// The same failure, its message prefixed with where it happened.
    pub fn context(self, what: impl fmt::Display) -> Self {
        CliError { exit: self.exit, message: format!("{what}: {}", self.message) }
    }

    /// The same failure, with what followed from it appended.
    pub fn context_after(self, what: impl fmt::Display) -> Self {
        CliError { exit: self.exit, message: format!("{}; {what}", self.message) }
    }

    pub fn code(&self) -> ExitCode {
        ExitCode::from(self.exit as u8)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line: a multi-line message from a dependency is folded.
        let mut first = true;
        for line in self.message.lines().filter(|l| !l.trim().is_empty()) {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(line.trim())?;
            first = false;
        }
        Ok(())
    }
}

/// The exit code of an engine error.
fn exit_of(e: &basalt::Error) -> Exit {
    match e {
        basalt::Error::Corruption { .. } => Exit::Corruption,
        basalt::Error::Locked(_) => Exit::Locked,
        // A point outside a history window is asked for, as a bad argument.
        basalt::Error::InvalidArgument(_)
        | basalt::Error::SchemaMismatch(_)
        | basalt::Error::HistoryUnavailable { .. } => Exit::Usage,
        basalt::Error::UniqueViolation { .. } => Exit::BadData,
        _ => Exit::Failure,
    }
}

impl std::error::Error for CliError {}

impl From<basalt::Error> for CliError {
    fn from(e: basalt::Error) -> Self {
        CliError::new(exit_of(&e), e.to_string())
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::failure(e.to_string())
    }
}

impl From<arrow_schema::ArrowError> for CliError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        match e {
            arrow_schema::ArrowError::ExternalError(inner) => match inner.downcast::<basalt::Error>() {
                Ok(basalt) => CliError::from(*basalt),
                Err(other) => CliError::failure(other.to_string()),
            },
            arrow_schema::ArrowError::IoError(_, io) => CliError::failure(io.to_string()),
            other => CliError::usage(other.to_string()),
        }
    }
}

impl From<parquet::errors::ParquetError> for CliError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        CliError::usage(format!("parquet: {e}"))
    }
}

impl From<basalt_datafusion::datafusion::error::DataFusionError> for CliError {
    fn from(e: basalt_datafusion::datafusion::error::DataFusionError) -> Self {
        use basalt_datafusion::datafusion::error::DataFusionError as E;
        let root = e.find_root();
        // The engine's own error, wherever DataFusion wrapped it, keeps
        // its exit code.
        if let E::External(inner) = root
            && let Some(basalt) = inner.downcast_ref::<basalt::Error>()
        {
            return CliError::new(exit_of(basalt), basalt.to_string());
        }
        // A statement that fails while it runs on the user's values (a
        // division by zero, a cast that cannot hold a value) is as much a
        // SQL error as one that does not plan: docs/cli.md gives both
        // exit code 2. I/O, resources and DataFusion's own bugs stay 1.
        let exit = match root {
            E::SQL(..) | E::Plan(_) | E::SchemaError(..) | E::NotImplemented(_) | E::Execution(_) => {
                Exit::Usage
            }
            E::ArrowError(arrow, _)
                if !matches!(
                    **arrow,
                    arrow_schema::ArrowError::IoError(..)
                        | arrow_schema::ArrowError::ExternalError(_)
                        | arrow_schema::ArrowError::MemoryError(_)
                ) =>
            {
                Exit::Usage
            }
            _ => Exit::Failure,
        };
        CliError::new(exit, e.strip_backtrace())
    }
}
