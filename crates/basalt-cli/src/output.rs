//! Writing results: aligned tables for people (comfy-table, through
//! Arrow's pretty printer), CSV, JSON, JSON lines, Arrow IPC and Parquet
//! for programs, to stdout or `--output FILE`. Every format but `table`
//! streams batch by batch; a table must see every row to align them.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use clap::{Args, ValueEnum};

use crate::error::{CliError, CliResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns, for reading.
    Table,
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Jsonl,
    /// An Arrow IPC file.
    Arrow,
    Parquet,
}

/// How and where a command writes its rows.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

enum Writer {
    Table(Vec<RecordBatch>, Box<dyn Write + Send>),
    Csv(arrow_csv::Writer<Box<dyn Write + Send>>),
    Json(arrow_json::ArrayWriter<Box<dyn Write + Send>>),
    Jsonl(arrow_json::LineDelimitedWriter<Box<dyn Write + Send>>),
    Arrow(arrow_ipc::writer::FileWriter<Box<dyn Write + Send>>),
    Parquet(parquet::arrow::ArrowWriter<Box<dyn Write + Send>>),
}

/// A writer's result; a closed pipe on stdout ends the program quietly
/// (`basalt scan … | head`).
fn arrow_written<T>(result: Result<T, arrow_schema::ArrowError>) -> CliResult<T> {
    match result {
        Err(arrow_schema::ArrowError::IoError(_, e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            crate::error::stdout_failed(&e)
        }
        other => Ok(other?),
    }
}

fn parquet_written<T>(result: Result<T, parquet::errors::ParquetError>) -> CliResult<T> {
    match result {
        Err(parquet::errors::ParquetError::External(e)) => match e.downcast::<std::io::Error>() {
            Ok(io) if io.kind() == std::io::ErrorKind::BrokenPipe => crate::error::stdout_failed(&io),
            Ok(io) => Err(CliError::failure(io.to_string())),
            Err(other) => Err(CliError::failure(other.to_string())),
        },
        other => Ok(other?),
    }
}

/// A destination for the batches of one result.
pub struct Sink {
    writer: Writer,
    rows: u64,
}

fn open_destination(path: Option<&Path>, binary: bool) -> CliResult<Box<dyn Write + Send>> {
    if let Some(path) = path {
        let file =
            File::create(path).map_err(|e| CliError::failure(format!("creating {}: {e}", path.display())))?;
        return Ok(Box::new(BufWriter::new(file)));
    }
    if binary && std::io::stdout().is_terminal() {
        return Err(CliError::usage("binary output to a terminal: give --output FILE or redirect stdout"));
    }
    Ok(Box::new(BufWriter::new(std::io::stdout())))
}

impl Sink {
    pub fn new(args: &OutputArgs, schema: &SchemaRef) -> CliResult<Sink> {
        Self::to(args.format, args.output.as_deref(), schema)
    }

    pub fn to(format: Format, path: Option<&Path>, schema: &SchemaRef) -> CliResult<Sink> {
        let binary = matches!(format, Format::Arrow | Format::Parquet);
        let out = open_destination(path, binary)?;
        let writer = match format {
            Format::Table => Writer::Table(Vec::new(), out),
            Format::Csv => Writer::Csv(arrow_csv::WriterBuilder::new().with_header(true).build(out)),
            Format::Json => Writer::Json(arrow_json::ArrayWriter::new(out)),
            Format::Jsonl => Writer::Jsonl(arrow_json::LineDelimitedWriter::new(out)),
            Format::Arrow => Writer::Arrow(arrow_ipc::writer::FileWriter::try_new(out, schema)?),
            Format::Parquet => {
                Writer::Parquet(parquet::arrow::ArrowWriter::try_new(out, schema.clone(), None)?)
            }
        };
        Ok(Sink { writer, rows: 0 })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> CliResult<()> {
        self.rows += batch.num_rows() as u64;
        match &mut self.writer {
            Writer::Table(batches, _) => batches.push(batch.clone()),
            Writer::Csv(w) => arrow_written(w.write(batch))?,
            Writer::Json(w) => arrow_written(w.write(batch))?,
            Writer::Jsonl(w) => arrow_written(w.write(batch))?,
            Writer::Arrow(w) => arrow_written(w.write(batch))?,
            Writer::Parquet(w) => parquet_written(w.write(batch))?,
        }
        Ok(())
    }

    /// Ends the output (footers, the table itself) and flushes it.
    pub fn finish(self, schema: &SchemaRef) -> CliResult<u64> {
        let mut out = match self.writer {
            Writer::Table(batches, mut out) => {
                let text = if batches.is_empty() {
                    arrow_cast::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema.clone())])?
                } else {
                    arrow_cast::pretty::pretty_format_batches(&batches)?
                };
                if let Err(e) = writeln!(out, "{text}") {
                    crate::error::stdout_failed(&e);
                }
                out
            }
            Writer::Csv(mut w) => {
                // The header, even for no rows.
                if self.rows == 0 {
                    arrow_written(w.write(&RecordBatch::new_empty(schema.clone())))?;
                }
                w.into_inner()
            }
            Writer::Json(mut w) => {
                arrow_written(w.finish())?;
                w.into_inner()
            }
            Writer::Jsonl(mut w) => {
                arrow_written(w.finish())?;
                w.into_inner()
            }
            Writer::Arrow(mut w) => {
                arrow_written(w.finish())?;
                arrow_written(w.into_inner())?
            }
            Writer::Parquet(w) => parquet_written(w.into_inner())?,
        };
        if let Err(e) = out.flush() {
            crate::error::stdout_failed(&e);
        }
        Ok(self.rows)
    }
}

/// `n` with thousands separators.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn bytes(n: u64) -> String {
    indicatif::BinaryBytes(n).to_string()
}
