//! `basalt load`: files into a table, streamed in batches (memory bounded
//! whatever the file size), the table created from the first file's
//! schema when it does not exist, indexes built once the rows are in.
//!
//! A load is all or nothing for the table: a bad row (with
//! `--skip-bad-rows`: anything else that fails) ends it and puts the
//! table back as it was — a table the load created is dropped; in an
//! existing one every row the load wrote is restored from a snapshot
//! taken before its first write (re-reading the files to know which
//! rows those were). The database's lock keeps other processes out
//! meanwhile. A table the load creates is filled by one
//! `Table::bulk_load` (rows straight into SSTs, installed at once: a crash
//! mid-load leaves an empty table); an existing one by one atomic write
//! per batch (a crash mid-load leaves the batches written so far).
//!
//! A reader thread parses and types the next batches while the main
//! thread writes, so a load keeps both cores busy.

mod conform;
mod source;

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, IndexOptions, ReadOptions, ScanOptions, Snapshot, Table, TableOptions, WriteBatch};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use self::conform::{BadRow, Conformer};
pub use self::source::{InputFormat, Source, TextOptions, read_schema_file};
use crate::error::{CliError, CliResult, Exit};
use crate::output::{bytes, grouped};
use crate::{open, value};

/// The key column a load numbers rows in when no `--primary-key` is given.
const ROW_ID: &str = "row_id";
/// Bad rows shown one by one under `--skip-bad-rows`; the rest are counted.
const BAD_ROWS_SHOWN: usize = 10;

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The database directory.
    db: PathBuf,
    /// The table (created when missing).
    table: String,
    /// Files to load, in order: CSV, TSV, JSON lines, Parquet, Arrow IPC.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The files' format (default: from each file's extension).
    #[arg(long, value_enum)]
    input_format: Option<InputFormat>,
    /// Column types of a new table instead of inference: one `name: Type`
    /// per line (`score: Int64`, `at: Timestamp(Microsecond, None)`).
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Primary-key columns of a new table. Without it, the table gets a
    /// `row_id` key numbering the rows in load order.
    #[arg(long, value_name = "A,B")]
    primary_key: Option<String>,
    /// Create an index once the rows are in: `NAME=COL[,COL…]`
    /// (repeatable).
    #[arg(long = "index", value_name = "NAME=COLS")]
    indexes: Vec<String>,
    /// Leave out rows that cannot be stored (a value of the wrong type, a
    /// null key) instead of stopping; they are counted and the first ones
    /// shown.
    #[arg(long)]
    skip_bad_rows: bool,
    /// CSV field delimiter (default: `,`, a tab for .tsv).
    #[arg(long)]
    delimiter: Option<char>,
    /// Text that stands for null in CSV (besides the empty field), e.g.
    /// `NA`.
    #[arg(long, value_name = "TEXT")]
    null: Option<String>,
    /// The CSV files have no header line (columns are named `column_1`…).
    #[arg(long)]
    no_header: bool,
    /// Rows per batch (each batch is one atomic write).
    #[arg(long, default_value_t = 16_384, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    batch_rows: u32,
    /// Memory for the engine's write buffer and block cache during the
    /// load, in MiB: memtables take 3/4 (writers wait for flushes beyond
    /// it), the cache the rest (at most 64 MiB).
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    memory_mib: usize,
    /// Store the loaded rows zstd-compressed (`Options::settled_compression`):
    /// a table several times smaller, point reads through the block cache
    /// (docs/bytes-on-disk.md). Applies to the files this load writes.
    #[arg(long)]
    zstd: bool,
    /// Rows of a text file read to infer its column types.
    #[arg(long, default_value_t = 100_000)]
    infer_rows: usize,
    /// Set the table's time to live first (`90s`, `30m`, `1h`, `7d`, or
    /// seconds; `off` turns it off): each row vanishes from every read that
    /// long after its write.
    #[arg(long, value_name = "DURATION", value_parser = crate::manage::parse_ttl)]
    ttl: Option<crate::manage::Ttl>,
}

/// What to read and how to type it: everything the reader thread and a
/// replay (for undoing) need to produce the same batches.
#[derive(Clone)]
struct Plan {
    files: Vec<(PathBuf, InputFormat)>,
    text: TextOptions,
    target: SchemaRef,
    key: Vec<String>,
    row_id: Option<String>,
    first_row_id: u64,
    skip_bad_rows: bool,
}

/// One batch ready to write.
struct Ready {
    batch: RecordBatch,
    bad: Vec<(usize, BadRow)>,
    /// Bytes of all files read so far.
    bytes_done: u64,
}

impl Plan {
    /// Reads every file in order, handing each conformed batch to `each`
    /// (which returns whether to go on).
    fn batches(&self, mut each: impl FnMut(Ready) -> bool) -> CliResult<()> {
        let mut next_row_id = self.first_row_id;
        let mut bytes_before = 0;
        for (file_index, (path, format)) in self.files.iter().enumerate() {
            let mut source = Source::open(path, *format, &self.text)?;
            let conformer = Conformer::new(
                self.target.clone(),
                &self.key,
                &source.schema.clone(),
                self.row_id.as_deref(),
            )
            .map_err(|e| e.context(path.display()))?;
            loop {
                let first_row = source.rows;
                let Some(batch) = source.next_batch()? else { break };
                let (batch, bad) = conformer.conform(&batch, first_row, &mut next_row_id)?;
                if !self.skip_bad_rows
                    && let Some(first) = bad.first()
                {
                    return Err(CliError::new(
                        Exit::BadData,
                        format!("{} row {}: {}", path.display(), first.row, first.reason),
                    ));
                }
                let bad = bad.into_iter().map(|b| (file_index, b)).collect();
                if !each(Ready { batch, bad, bytes_done: bytes_before + source.bytes_done() }) {
                    return Ok(());
                }
            }
            bytes_before += source.size;
        }
        Ok(())
    }
}

fn parse_index_spec(spec: &str) -> CliResult<(String, Vec<String>)> {
    let (name, columns) = spec
        .split_once('=')
        .ok_or_else(|| CliError::usage(format!("--index {spec:?}: expected NAME=COL[,COL…]")))?;
    Ok((name.trim().to_owned(), value::names(columns)?))
}

/// The schema of a new table: the file's columns (typed by `--schema` if
/// given; `create_table` makes the key columns not null), `row_id` first when the load numbers rows.
fn new_table_schema(
    file: &Schema,
    typed: Option<&Schema>,
    key: &[String],
    row_id: bool,
) -> CliResult<SchemaRef> {
    let mut fields = Vec::new();
    if row_id {
        if file.index_of(ROW_ID).is_ok() {
            return Err(CliError::usage(format!(
                "the file has a {ROW_ID} column: name the key with --primary-key"
            )));
        }
        fields.push(Field::new(ROW_ID, DataType::UInt64, false));
    }
    for f in file.fields() {
        let data_type = match typed {
            Some(t) => t
                .field_with_name(f.name())
                .map_err(|_| {
                    CliError::usage(format!("--schema does not name the file's column {}", f.name()))
                })?
                .data_type()
                .clone(),
            None => f.data_type().clone(),
        };
        // Nullable: `create_table` makes the key columns non-nullable.
        fields.push(Field::new(f.name(), data_type, true));
    }
    for k in key {
        if !fields.iter().any(|f| f.name() == k) {
            return Err(CliError::usage(format!("--primary-key names {k}, which the file lacks")));
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The largest `row_id` of a table keyed by it (the last key).
fn last_row_id(table: &Table) -> CliResult<Option<u64>> {
    let all = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
    let parts = table.split_range(&all, 64)?;
    for part in parts.iter().rev() {
        let opts = ScanOptions::default()
            .range(value::borrowed_range(part))
            .projection(Some(vec![ROW_ID.to_owned()]));
        let mut last = None;
        for batch in table.scan(opts)? {
            let batch = batch?;
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            if !ids.is_empty() {
                last = Some(ids.value(ids.len() - 1));
            }
        }
        if last.is_some() {
            return Ok(last);
        }
    }
    Ok(None)
}

/// `basalt load` (and `import`, with `create`): options, the table (found
/// or made), the rows, the indexes, the summary; all or nothing.
pub fn run(args: &LoadArgs, create: bool) -> CliResult<()> {
    let started = Instant::now();
    let options = db_options(args)?;
    let text = text_options(args)?;
    let files = args
        .files
        .iter()
        .map(|f| Ok((f.clone(), args.input_format.map_or_else(|| InputFormat::of(f), Ok)?)))
        .collect::<CliResult<Vec<_>>>()?;
    let typed = args.schema.as_deref().map(read_schema_file).transpose()?;
    let indexes = args.indexes.iter().map(|s| parse_index_spec(s)).collect::<CliResult<Vec<_>>>()?;
    for (path, _) in &files {
        if !path.is_file() {
            return Err(CliError::usage(format!("{}: no such file", path.display())));
        }
    }
    // Opened (and with --create, made) once the arguments are known good.
    let db = open::open_with(&args.db, create, options.clone())?;
    let existing = db.tables().iter().any(|t| t == &args.table);
    // Into a table with indexes every row is an upsert that reads the row
    // it replaces, and through the load's cache each read copied a 64 KiB
    // block and checked its checksum (3M upserts in random key order into
    // a 3M-row table with four indexes: 86.5 s; mapped, 62.9 s): such a
    // load reads its files in place, as any get does.
    let db = if existing && db.table(&args.table).is_ok_and(|t| !t.indexes().is_empty()) {
        db.close()?;
        open::open_with(&args.db, false, options.mmap_reads(true))?
    } else {
        db
    };
    let (table, key, row_id) = if existing {
        existing_table(&db, args, typed.is_some())?
    } else {
        new_table(&db, args, &files[0], &text, typed.as_deref())?
    };
    let schema = table.schema();
    if let Err(e) = check_index_specs(&table, &args.table, &indexes) {
        return Err(undo_created(&db, table, existing, e));
    }
    if let Some(crate::manage::Ttl(ttl)) = args.ttl
        && let Err(e) = table.set_ttl(ttl)
    {
        return Err(undo_created(&db, table, existing, e.into()));
    }
    let first_row_id = match &row_id {
        Some(_) if existing => match last_row_id(&table)? {
            None => 0,
            Some(id) => id.checked_add(1).ok_or_else(|| {
                CliError::usage(format!("{ROW_ID} of table {} is at its largest value", args.table))
            })?,
        },
        _ => 0,
    };
    let plan = Plan {
        files,
        text,
        target: schema.clone(),
        key,
        row_id,
        first_row_id,
        skip_bad_rows: args.skip_bad_rows,
    };
    let total_bytes: u64 = plan.files.iter().map(|(p, _)| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
    // In an existing table, the state before each batch's write, to undo
    // it by (a table the load created is simply dropped).
    let mut before = existing.then(Vec::new);
    let result = write_all(&db, &table, &plan, total_bytes, before.as_mut());
    let loaded = match result.and_then(|loaded| build_indexes(&table, &indexes).map(|()| loaded)) {
        Ok(loaded) => loaded,
        Err(e) => {
            let e = match &before {
                None => undo_created(&db, table, false, e),
                Some(snapshots) => undo_written(&db, &table, &plan, snapshots, &indexes, e),
            };
            return Err(e);
        }
    };
    db.sync_wal()?;
    drop(before);
    // What the table takes on disk once loaded: the rows written to
    // memtables (into an existing table) are flushed first. The load is
    // done: a figure that fails only leaves it out.
    let stored = db.flush().and_then(|()| table.bytes_on_disk()).ok();
    // Into a new table keyed by --primary-key, a row whose key came again
    // later in the input was replaced by it: the table holds fewer rows
    // than were read, and the summary says so (counted from SST metadata
    // where it tells, as after this load).
    // The load is done: a count that fails only leaves the line out.
    let held = if existing || plan.row_id.is_some() {
        None
    } else {
        table.count_rows(&(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), None).ok()
    };
    drop(table);
    db.close()?;
    let report = Report { stored, created: !existing, held, elapsed: started.elapsed() };
    out!("{}", summary(args, &plan, total_bytes, &loaded, &indexes, &report));
    Ok(())
}

/// The database options of a load: writes buffered in three quarters of
/// `--memory-mib`, a block cache in the rest.
fn db_options(args: &LoadArgs) -> CliResult<basalt::Options> {
    if args.memory_mib < 16 {
        return Err(CliError::usage("--memory-mib must be at least 16"));
    }
    let memory =
        args.memory_mib.checked_mul(1 << 20).ok_or_else(|| CliError::usage("--memory-mib is too large"))?;
    // Reads (compaction's) through the bounded block cache, not a memory
    // map: mapped file pages count in the process's resident memory. (An
    // upsert into a table with indexes maps them: `run`.)
    let settled = if args.zstd { basalt::Compression::Zstd } else { basalt::Compression::None };
    Ok(basalt::Options::default()
        .write_buffer_bytes_max(memory / 4 * 3)
        .block_cache_bytes((memory / 4).min(64 << 20))
        .mmap_reads(false)
        .settled_compression(settled))
}

/// How CSV and JSON files are read.
fn text_options(args: &LoadArgs) -> CliResult<TextOptions> {
    Ok(TextOptions {
        delimiter: args
            .delimiter
            .map(|d| u8::try_from(d).map_err(|_| CliError::usage("--delimiter must be one ASCII character")))
            .transpose()?,
        header: !args.no_header,
        null: args.null.clone(),
        batch_rows: args.batch_rows as usize,
        infer_rows: args.infer_rows.max(1),
    })
}

/// The table a load goes into, already there: its key must be the one
/// asked for (if one was), and `--schema` does not apply. Returns the
/// table, its key, and the generated row-id column if it has one.
fn existing_table(db: &Db, args: &LoadArgs, typed: bool) -> CliResult<(Table, Vec<String>, Option<String>)> {
    let table = db.table(&args.table)?;
    let key = table.primary_key();
    if let Some(asked) = &args.primary_key
        && value::names(asked)? != key
    {
        return Err(CliError::usage(format!(
            "table {} exists with primary key ({}), not ({asked})",
            args.table,
            key.join(", ")
        )));
    }
    if typed {
        return Err(CliError::usage(format!(
            "table {} exists: --schema applies only to a new table",
            args.table
        )));
    }
    let schema = table.schema();
    let numbered =
        key == [ROW_ID] && schema.field_with_name(ROW_ID).is_ok_and(|f| f.data_type() == &DataType::UInt64);
    Ok((table, key, numbered.then(|| ROW_ID.to_owned())))
}

/// Creates the table a load goes into, its schema from the first file
/// (typed by `--schema` if given), keyed by `--primary-key` or by a
/// generated row id.
fn new_table(
    db: &Db,
    args: &LoadArgs,
    (path, format): &(PathBuf, InputFormat),
    text: &TextOptions,
    typed: Option<&Schema>,
) -> CliResult<(Table, Vec<String>, Option<String>)> {
    let mut source = Source::open(path, *format, text)?;
    if typed.is_none() && matches!(format, InputFormat::Csv | InputFormat::Tsv | InputFormat::Jsonl) {
        for note in source.look_at_window(text.infer_rows, *format) {
            eprintln!("basalt: note: {note}");
        }
    }
    let file_schema = source.schema.clone();
    let (key, row_id) = match &args.primary_key {
        Some(k) => (value::names(k)?, None),
        None => (vec![ROW_ID.to_owned()], Some(ROW_ID.to_owned())),
    };
    let schema = new_table_schema(&file_schema, typed, &key, row_id.is_some())?;
    let key_refs: Vec<&str> = key.iter().map(String::as_str).collect();
    let table = db.create_table(&args.table, schema, &key_refs, TableOptions::default())?;
    Ok((table, key, row_id))
}

/// Refuses `--index` specs naming an index the table has or a column it
/// lacks.
fn check_index_specs(table: &Table, name: &str, indexes: &[(String, Vec<String>)]) -> CliResult<()> {
    let schema = table.schema();
    for (index, columns) in indexes {
        if table.indexes().iter().any(|i| &i.name == index) {
            return Err(CliError::usage(format!("table {name} already has an index {index}")));
        }
        if let Some(c) = columns.iter().find(|c| schema.index_of(c).is_err()) {
            return Err(CliError::usage(format!("--index {index}: no column {c}")));
        }
    }
    Ok(())
}

/// The line a finished load prints.
fn summary(
    args: &LoadArgs,
    plan: &Plan,
    total_bytes: u64,
    loaded: &Loaded,
    indexes: &[(String, Vec<String>)],
    report: &Report,
) -> String {
    let elapsed = report.elapsed;
    let rate = loaded.rows as f64 / elapsed.as_secs_f64().max(1e-9);
    let mut line = format!(
        "loaded {} rows into {} from {} file{} ({}) in {:.2} s: {} rows/s",
        grouped(loaded.rows),
        args.table,
        plan.files.len(),
        if plan.files.len() == 1 { "" } else { "s" },
        bytes(total_bytes),
        elapsed.as_secs_f64(),
        grouped(rate as u64)
    );
    if loaded.bad > 0 {
        let _ = write!(line, "; {} bad rows skipped", grouped(loaded.bad));
    }
    if let Some(held) = report.held
        && held < loaded.rows
    {
        let replaced = loaded.rows - held;
        let _ = write!(
            line,
            "; {} {} the key of an earlier row and replaced it: the table holds {} rows",
            grouped(replaced),
            if replaced == 1 { "row repeated" } else { "rows repeated" },
            grouped(held)
        );
    }
    if !indexes.is_empty() {
        let names: Vec<&str> = indexes.iter().map(|(n, _)| n.as_str()).collect();
        let _ = write!(line, "; indexes {} created", names.join(", "));
    }
    if let Some(stored) = &report.stored {
        let _ = write!(line, "; {}", on_disk(stored, report.created.then_some(total_bytes)));
    }
    line
}

/// What a table takes on disk, in words: in all, against the input's size
/// when the load made the table (`input`), then its rows and each index
/// (`the table takes 25.00 MiB (4.24x the 5.90 MiB input): rows 21.90 MiB,
/// index by_x 3.10 MiB`).
fn on_disk(stored: &basalt::TableBytes, input: Option<u64>) -> String {
    let mut text = format!("the table takes {}", bytes(stored.total()));
    if let Some(input) = input.filter(|&b| b > 0) {
        let _ = write!(text, " ({:.2}x the {} input)", stored.total() as f64 / input as f64, bytes(input));
    }
    if !stored.indexes.is_empty() {
        let _ = write!(text, ": rows {}", bytes(stored.rows.total()));
        for (name, size) in &stored.indexes {
            let _ = write!(text, ", index {name} {}", bytes(size.total()));
        }
    }
    text
}

/// What the finished load found of the table.
struct Report {
    /// Bytes it takes on disk.
    stored: Option<basalt::TableBytes>,
    /// Whether the load made it (its bytes are then the input's alone).
    created: bool,
    /// Rows it holds, where that can differ from the rows read (a new
    /// table keyed by `--primary-key`).
    held: Option<u64>,
    elapsed: std::time::Duration,
}

struct Loaded {
    rows: u64,
    bad: u64,
    batches: u64,
}

fn progress_bar(total_bytes: u64) -> ProgressBar {
    // Only for a person watching: hidden when stdout is a pipe or file.
    let target = if std::io::stdout().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total_bytes), target);
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] [{wide_bar}] {binary_bytes}/{binary_total_bytes} {msg} (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Writes every batch of the plan. Into a table the load created (`before`
/// is `None`: nothing to undo but the table) the rows go straight into
/// SSTs by one `Table::bulk_load`, all or nothing and durable when it
/// returns; into an existing table, one atomic write per batch, with the
/// state before each kept in `before` for the undo.
fn write_all(
    db: &Db,
    table: &Table,
    plan: &Plan,
    total_bytes: u64,
    before: Option<&mut Vec<Snapshot>>,
) -> CliResult<Loaded> {
    let bar = progress_bar(total_bytes);
    let started = Instant::now();
    // `Err(())` after the last batch: the reader failed (its error comes
    // from joining it), so a bulk load must not install what came before.
    let (send, receive) = mpsc::sync_channel::<Result<Ready, ()>>(2);
    let mut loaded = Loaded { rows: 0, bad: 0, batches: 0 };
    let result = std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            let read = plan.batches(|ready| send.send(Ok(ready)).is_ok());
            if read.is_err() {
                let _ = send.send(Err(()));
            }
            read
        });
        // Counts and reports each batch as it goes by.
        let took = |ready: &Ready, loaded: &mut Loaded| {
            for (file, bad) in &ready.bad {
                if loaded.bad < BAD_ROWS_SHOWN as u64 {
                    bar.suspend(|| {
                        eprintln!(
                            "basalt: skipped {} row {}: {}",
                            plan.files[*file].0.display(),
                            bad.row,
                            bad.reason
                        );
                    });
                }
                loaded.bad += 1;
            }
            loaded.rows += ready.batch.num_rows() as u64;
            loaded.batches += 1;
            bar.set_position(ready.bytes_done);
            let rate = loaded.rows as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{} rows, {} rows/s", grouped(loaded.rows), grouped(rate as u64)));
        };
        let mut failed = None;
        match before {
            None => {
                let batches = receive.iter().map(|ready| {
                    let ready = ready
                        .map_err(|()| basalt::Error::InvalidArgument("reading the input failed".into()))?;
                    took(&ready, &mut loaded);
                    Ok::<_, basalt::Error>(ready.batch)
                });
                if let Err(e) = table.bulk_load_from(batches) {
                    failed = Some(CliError::from(e).context("loading the rows"));
                }
            }
            Some(snapshots) => {
                for ready in &receive {
                    let Ok(ready) = ready else { break };
                    snapshots.push(db.snapshot());
                    if let Err(e) = table.write(&ready.batch) {
                        failed = Some(CliError::from(e).context(format!(
                            "writing rows {}..{}",
                            loaded.rows + loaded.bad + 1,
                            loaded.rows + loaded.bad + ready.batch.num_rows() as u64
                        )));
                        break;
                    }
                    took(&ready, &mut loaded);
                }
            }
        }
        // Dropping the receiver ends a reader still sending.
        drop(receive);
        let read = reader.join().unwrap_or_else(|_| Err(CliError::failure("the reader thread panicked")));
        // The reader's own error first: it is why a bulk load stopped.
        match (failed, read) {
            (_, Err(e)) | (Some(e), Ok(())) => Err(e),
            (None, Ok(())) => Ok(()),
        }
    });
    bar.finish_and_clear();
    if loaded.bad > BAD_ROWS_SHOWN as u64 {
        eprintln!("basalt: … and {} more bad rows skipped", grouped(loaded.bad - BAD_ROWS_SHOWN as u64));
    }
    result.map(|()| loaded)
}

fn build_indexes(table: &Table, indexes: &[(String, Vec<String>)]) -> CliResult<()> {
    for (name, columns) in indexes {
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        table
            .create_index(name, &columns, IndexOptions::default())
            .map_err(|e| CliError::from(e).context(format!("index {name}")))?;
    }
    Ok(())
}

/// Drops a table the load created (its handle first: a table in use
/// cannot be dropped); the error says so.
fn undo_created(db: &Db, table: Table, existing: bool, e: CliError) -> CliError {
    if existing {
        return e;
    }
    let name = table.name().to_owned();
    drop(table);
    match db.drop_table(&name) {
        Ok(()) => e.context_after(format!("table {name} was not created")),
        Err(drop) => e.context_after(format!("and dropping the half-loaded table {name} failed: {drop}")),
    }
}

/// Puts back every row the batches written (one snapshot taken before
/// each) changed, newest batch first, each to its state just before that
/// batch — so every step passes through a state that existed, and a
/// unique index never sees two rows holding one value — then drops the
/// indexes the load created and syncs the WAL. The files are read again
/// to know the batches' keys (only keys are kept).
fn undo_written(
    db: &Db,
    table: &Table,
    plan: &Plan,
    before: &[Snapshot],
    indexes: &[(String, Vec<String>)],
    e: CliError,
) -> CliError {
    let restore = || -> CliResult<()> {
        for (name, _) in indexes {
            if table.indexes().iter().any(|i| &i.name == name) {
                table.drop_index(name)?;
            }
        }
        let schema = table.schema();
        let key: Vec<usize> = plan.key.iter().map(|k| schema.index_of(k)).collect::<Result<_, _>>()?;
        let mut keys: Vec<RecordBatch> = Vec::with_capacity(before.len());
        if !before.is_empty() {
            // Stops after the last batch whose write was tried: the one
            // after it may be the bad one.
            let mut failed = None;
            plan.batches(|ready| {
                match ready.batch.project(&key) {
                    Ok(k) => keys.push(k),
                    Err(e) => failed = Some(CliError::from(e)),
                }
                failed.is_none() && keys.len() < before.len()
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        for (batch_keys, snapshot) in keys.iter().zip(before).rev() {
            restore_batch(db, table, batch_keys, snapshot)?;
        }
        db.sync_wal()?;
        Ok(())
    };
    match restore() {
        Ok(()) => e.context_after(format!("table {} is as it was before the load", table.name())),
        Err(undo) => e.context_after(format!("and restoring table {} failed: {undo}", table.name())),
    }
}

/// Restores the rows of `keys` (a batch of key columns) as they were at
/// `before`: rows that existed are written back, rows that did not are
/// deleted, in one atomic write.
fn restore_batch(db: &Db, table: &Table, keys: &RecordBatch, before: &Snapshot) -> CliResult<()> {
    let mut old_rows = Vec::new();
    let mut absent = Vec::new();
    let opts = ReadOptions::default().snapshot(Some(before));
    for row in 0..keys.num_rows() {
        let values = keys
            .columns()
            .iter()
            .map(|c| value::key_value(c.slice(row, 1).as_ref()))
            .collect::<CliResult<Vec<_>>>()?;
        match table.get_opt(&value::borrowed(&values), &opts)? {
            Some(old) => old_rows.push(old),
            None => absent.push(row as u32),
        }
    }
    let mut undo = WriteBatch::new();
    for old in &old_rows {
        undo.put_table(table, old)?;
    }
    if !absent.is_empty() {
        undo.delete_table(table, &arrow_select::take::take_record_batch(keys, &UInt32Array::from(absent))?)?;
    }
    db.write(undo)?;
    Ok(())
}
