//! Managing a database: listing tables, creating and dropping indexes
//! and tables, statistics, compaction and export.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use basalt::{IndexOptions, ScanOptions};
use clap::Args;

use crate::error::{CliError, CliResult};
use crate::open;
use crate::output::{Format, OutputArgs, Sink, bytes, grouped};

#[derive(Debug, Args)]
pub struct DbArgs {
    /// The database directory.
    pub db: PathBuf,
}

#[derive(Debug, Args)]
pub struct TablesArgs {
    /// The database directory.
    db: PathBuf,
    /// One line per table, however long its column and index lists (by
    /// default a table printed to a terminal, or with COLUMNS set, wraps
    /// them to fit its width).
    #[arg(long)]
    wide: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CreateIndexArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// The index's name.
    name: String,
    /// Indexed columns, in key order.
    #[arg(required = true)]
    columns: Vec<String>,
    /// At most one row per indexed value (rows with a null take no part).
    #[arg(long)]
    unique: bool,
    /// Columns stored in the index, so queries needing only them never
    /// read the table.
    #[arg(long, num_args = 1.., value_name = "COLUMN")]
    include: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DropIndexArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// The index.
    name: String,
}

#[derive(Debug, Args)]
pub struct TableArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The database directory.
    db: PathBuf,
    /// Only this table (default: every table and the key-value space).
    table: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// The file to write.
    file: PathBuf,
    /// Its format (default: from its extension: .parquet, .csv, .arrow,
    /// .json, .jsonl).
    #[arg(long, value_enum)]
    format: Option<Format>,
}

fn text_column(name: &str, values: Vec<String>) -> (Field, ArrayRef) {
    (Field::new(name, DataType::Utf8, false), Arc::new(StringArray::from(values)))
}

fn number_column(name: &str, values: Vec<u64>) -> (Field, ArrayRef) {
    (Field::new(name, DataType::UInt64, false), Arc::new(UInt64Array::from(values)))
}

/// The width `basalt tables` fits: the terminal's, or `COLUMNS` when set
/// (`None`: printed whole, as to a pipe or file).
fn terminal_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()) {
        return Some(columns);
    }
    console::Term::stdout().size_checked().map(|(_rows, columns)| usize::from(columns))
}

/// Wraps the column and index lists so that the printed table fits
/// `width`: the other cells (`numbers`: each number column's header and
/// cells) keep their width, the index lists take up to a
/// third of what is left.
fn fit_lists(
    width: usize,
    names: &[String],
    schemas: &mut [Vec<String>],
    keys: &[String],
    indexes: &mut [Vec<String>],
    numbers: &[(&str, &[u64])],
) {
    let widest = |header: &str, cells: &mut dyn Iterator<Item = usize>| cells.fold(header.len(), usize::max);
    let fixed = widest("table", &mut names.iter().map(|s| s.chars().count()))
        + widest("primary_key", &mut keys.iter().map(|s| s.chars().count()))
        + numbers
            .iter()
            .map(|(header, cells)| widest(header, &mut cells.iter().map(|n| n.to_string().len())))
            .sum::<usize>();
    // "| " before each cell, " " after it, and the last "|".
    let borders = (4 + numbers.len()) * 3 + 1;
    let left = width.saturating_sub(fixed + borders);
    let natural = widest("indexes", &mut indexes.iter().map(|l| l.join("; ").chars().count()));
    let index_width = natural.min((left / 3).max("indexes".len()));
    for list in indexes.iter_mut() {
        *list = vec![wrap_list(list, ';', index_width)];
    }
    // A name longer than its share widens the index cell: the columns take
    // what it really left.
    let index_width =
        widest("indexes", &mut indexes.iter().flatten().flat_map(|s| s.lines()).map(|l| l.chars().count()));
    let column_width = left.saturating_sub(index_width).max(16);
    for list in schemas.iter_mut() {
        *list = vec![wrap_list(list, ',', column_width)];
    }
}

/// `items` joined by `separator` as lines of at most `width` characters,
/// broken between items; an item longer than a line is broken at its own
/// spaces and after its opening parentheses (a type's parameters, an
/// index's column list). A single name longer than `width` keeps its line.
fn wrap_list(items: &[String], separator: char, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    // Appends `word` (after a space when `spaced`), on a new line if it
    // would not fit.
    let mut place = |word: &str, spaced: bool, line: &mut String| {
        let space = usize::from(spaced && !line.is_empty());
        if !line.is_empty() && line.chars().count() + space + word.chars().count() > width {
            lines.push(std::mem::take(line));
        } else if space == 1 {
            line.push(' ');
        }
        line.push_str(word);
    };
    for (i, item) in items.iter().enumerate() {
        let item = if i + 1 < items.len() { format!("{item}{separator}") } else { item.clone() };
        if item.chars().count() <= width {
            place(&item, true, &mut line);
            continue;
        }
        for (w, word) in item.split(' ').enumerate() {
            for (p, piece) in word.split_inclusive('(').enumerate() {
                place(piece, w == 0 || p == 0, &mut line);
            }
        }
    }
    lines.push(line);
    lines.join("\n")
}

/// An index as `basalt tables` lists it: its name, columns, options and
/// bytes on disk (`by_email(email) unique include(name): 1.50 MiB`).
fn describe_index(index: &basalt::IndexInfo, on_disk: &basalt::TableBytes) -> String {
    let mut s = format!("{}({})", index.name, index.columns.join(", "));
    if index.unique {
        s.push_str(" unique");
    }
    if !index.include.is_empty() {
        let _ = write!(s, " include({})", index.include.join(", "));
    }
    let size = on_disk.indexes.iter().find(|(name, _)| name == &index.name).map_or(0, |(_, b)| b.total());
    let _ = write!(s, ": {}", bytes(size));
    s
}

pub fn tables(args: &TablesArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let (mut names, mut schemas, mut keys, mut indexes, mut rows, mut sizes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut index_sizes, mut histories) = (Vec::new(), Vec::new());
    for name in db.tables() {
        let table = db.table(&name)?;
        let estimate = table.estimate()?;
        // The key-value space's table face is listed only when it holds data.
        if name == "default" && estimate.rows == 0 {
            continue;
        }
        // Opening flushed the WALs' writes: the files hold every row.
        let on_disk = table.bytes_on_disk()?;
        let schema = table.schema();
        let columns: Vec<String> =
            schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect();
        let index_list: Vec<String> = table.indexes().iter().map(|i| describe_index(i, &on_disk)).collect();
        names.push(name);
        schemas.push(columns);
        keys.push(table.primary_key().join(", "));
        indexes.push(index_list);
        rows.push(estimate.rows);
        sizes.push(on_disk.rows.total());
        index_sizes.push(on_disk.total() - on_disk.rows.total());
        histories.push(table.history_info().map(|h| describe_history(&h)).unwrap_or_default());
    }
    if !args.wide
        && args.output.format == Format::Table
        && args.output.output.is_none()
        && let Some(width) = terminal_width()
    {
        // The history column, when shown, is never cut: the lists give
        // up its width.
        let history_width =
            histories.iter().map(|h| h.chars().count()).max().filter(|&w| w > 0).map_or(0, |w| w.max(7) + 3);
        fit_lists(
            width.saturating_sub(history_width),
            &names,
            &mut schemas,
            &keys,
            &mut indexes,
            &[("rows_stored", &rows), ("bytes", &sizes), ("index_bytes", &index_sizes)],
        );
    }
    let any_history = histories.iter().any(|h| !h.is_empty());
    let mut columns = vec![
        text_column("table", names),
        text_column("columns", schemas.iter().map(|l| l.join(", ")).collect()),
        text_column("primary_key", keys),
        text_column("indexes", indexes.iter().map(|l| l.join("; ")).collect()),
        // Stored row versions: overwritten and deleted rows count until
        // compaction drops them (and a history window keeps).
        number_column("rows_stored", rows),
        // Bytes on disk: the rows' SSTs (and blob values), and all the
        // indexes' together (each index's is in its `indexes` entry).
        number_column("bytes", sizes),
        number_column("index_bytes", index_sizes),
    ];
    if any_history {
        columns.push(text_column("history", histories));
    }
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    let mut sink = Sink::new(&args.output, &schema)?;
    sink.write(&batch)?;
    sink.finish(&schema)?;
    Ok(())
}

pub fn create_index(args: &CreateIndexArgs, create: bool) -> CliResult<()> {
    let started = Instant::now();
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let columns: Vec<&str> = args.columns.iter().map(String::as_str).collect();
    let opts = IndexOptions::default().unique(args.unique).include(args.include.clone());
    table.create_index(&args.name, &columns, opts)?;
    db.close()?;
    out!(
        "created index {} on {}({}) in {:.2} s",
        args.name,
        args.table,
        args.columns.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn drop_index(args: &DropIndexArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    table.drop_index(&args.name)?;
    db.close()?;
    out!("dropped index {} of {}", args.name, args.table);
    Ok(())
}

#[derive(Debug, Args)]
pub struct TtlArgs {
    /// The database directory.
    db: PathBuf,
    /// The table (or keyspace, with --keyspace).
    name: String,
    /// The time to live to set (`90s`, `30m`, `1h`, `7d`, or seconds;
    /// `off` turns it off); without it, the current one is printed.
    #[arg(value_parser = parse_ttl)]
    ttl: Option<Ttl>,
    /// NAME is a keyspace, not a table.
    #[arg(long)]
    keyspace: bool,
}

/// A time to live given on the command line (`None`: `off`).
#[derive(Debug, Clone, Copy)]
pub struct Ttl(pub Option<std::time::Duration>);

/// A time to live from the command line: a number with a unit (`ms`, `s`,
/// `m`, `h`, `d`), a plain number of seconds, or `off` (none).
pub fn parse_ttl(text: &str) -> Result<Ttl, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") || text.eq_ignore_ascii_case("none") {
        return Ok(Ttl(None));
    }
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration like 90s, 30m, 1h or 7d"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        "d" => number * 86_400.0,
        other => return Err(format!("unknown unit {other:?} in {text:?}: ms, s, m, h or d")),
    };
    let ttl =
        std::time::Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is out of range"))?;
    if ttl.is_zero() {
        return Err("a time to live must be at least 1 ms (off turns it off)".to_string());
    }
    Ok(Ttl(Some(ttl)))
}

/// Prints or sets the time to live of a table or keyspace.
pub fn ttl(args: &TtlArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let shown =
        |ttl: Option<std::time::Duration>| ttl.map_or_else(|| "off".to_string(), |d| format!("{d:?}"));
    match (args.ttl, args.keyspace) {
        (None, true) => out!("{}", shown(db.keyspace(&args.name)?.ttl())),
        (None, false) => out!("{}", shown(open::table(&db, &args.name)?.ttl())),
        (Some(Ttl(ttl)), keyspace) => {
            if keyspace {
                db.keyspace(&args.name)?.set_ttl(ttl)?;
            } else {
                open::table(&db, &args.name)?.set_ttl(ttl)?;
            }
            out!("time to live of {}: {}", args.name, shown(ttl));
        }
    }
    db.close()?;
    Ok(())
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("span").required(true).multiple(true).args(["from", "to", "all"])))]
pub struct DeleteRangeArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// From this key (inclusive); fewer values than key columns is a
    /// prefix.
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    from: Vec<String>,
    /// To this key (inclusive: a prefix takes every key starting with it).
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    to: Vec<String>,
    /// Every row (no --from or --to).
    #[arg(long, conflicts_with_all = ["from", "to"])]
    all: bool,
    /// Sync the write to disk before returning.
    #[arg(long)]
    sync: bool,
}

/// Deletes a key range of a table as one write (one range tombstone).
pub fn delete_range(args: &DeleteRangeArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let key_columns = table.primary_key();
    let bound = |texts: &[String]| -> CliResult<std::ops::Bound<Vec<basalt::OwnedKeyValue>>> {
        Ok(if texts.is_empty() {
            std::ops::Bound::Unbounded
        } else {
            std::ops::Bound::Included(crate::value::key_values(&schema, &key_columns, texts)?)
        })
    };
    let range = (bound(&args.from)?, bound(&args.to)?);
    let started = Instant::now();
    let rows = table.count_rows(&crate::value::borrowed_range(&range), None)?;
    table.delete_range_opt(
        crate::value::borrowed_range(&range),
        &basalt::WriteOptions::default().sync(args.sync),
    )?;
    drop(table);
    db.close()?;
    out!("deleted {} rows of {} in {:.1?}", grouped(rows), args.table, started.elapsed());
    Ok(())
}

pub fn drop_table(args: &TableArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    open::table(&db, &args.table)?;
    db.drop_table(&args.table)?;
    db.close()?;
    out!("dropped table {}", args.table);
    Ok(())
}

pub fn compact(args: &CompactArgs, create: bool) -> CliResult<()> {
    let started = Instant::now();
    let db = open::open(&args.db, create)?;
    let sst_bytes = |db: &basalt::Db| basalt::inspect::files(db).iter().map(|f| f.size).sum::<u64>();
    let before = sst_bytes(&db);
    if let Some(name) = &args.table {
        open::table(&db, name)?.compact()?;
    } else {
        for name in db.tables() {
            if name != "default" {
                db.table(&name)?.compact()?;
            }
        }
        db.compact_range::<&[u8]>(..)?;
    }
    let after = sst_bytes(&db);
    db.close()?;
    out!(
        "compacted in {:.2} s: {} of SSTs before, {} after",
        started.elapsed().as_secs_f64(),
        bytes(before),
        bytes(after)
    );
    Ok(())
}

/// `stats`' lines on each table's bytes on disk: its rows' and each
/// index's (the key-value space's table face only when it holds data).
fn tables_on_disk(db: &basalt::Db) -> CliResult<()> {
    let (mut lines, mut total) = (Vec::new(), 0);
    for name in db.tables() {
        let on_disk = db.table(&name)?.bytes_on_disk()?;
        if name == "default" && on_disk.total() == 0 {
            continue;
        }
        total += on_disk.total();
        lines.push(format!("  {name:<22} {:>12}", bytes(on_disk.total())));
        if !on_disk.indexes.is_empty() {
            lines.push(format!("    {:<20} {:>12}", "rows", bytes(on_disk.rows.total())));
        }
        for (index, size) in &on_disk.indexes {
            lines.push(format!("    {:<20} {:>12}", format!("index {index}"), bytes(size.total())));
        }
    }
    out!("tables on disk  {} (rows and indexes)", bytes(total));
    for line in lines {
        out!("{line}");
    }
    Ok(())
}

pub fn stats(args: &DbArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let stats = db.stats();
    out!("database        {}", args.db.display());
    out!("last seqno      {}", grouped(stats.last_seqno));
    // Every tree's files (tables, indexes, keyspaces), level by level.
    let files = basalt::inspect::files(&db);
    let mut levels = vec![(0usize, 0u64); files.iter().map(|f| f.level + 1).max().unwrap_or(1)];
    for f in &files {
        levels[f.level].0 += 1;
        levels[f.level].1 += f.size;
    }
    out!("level   files   bytes");
    for (level, (count, size)) in levels.iter().enumerate() {
        out!("L{level:<6} {count:>6}   {}", bytes(*size));
    }
    out!("total   {:>6}   {}", files.len(), bytes(files.iter().map(|f| f.size).sum()));
    // The same files by tree (a table, an index, a keyspace), exact bytes.
    let mut trees: Vec<(&str, usize, u64)> = Vec::new();
    for f in &files {
        match trees.iter_mut().find(|t| t.0 == f.tree) {
            Some(t) => {
                t.1 += 1;
                t.2 += f.size;
            }
            None => trees.push((&f.tree, 1, f.size)),
        }
    }
    trees.sort_unstable();
    out!("tree            files   bytes");
    for (tree, count, size) in &trees {
        out!("  {tree:<13} {count:>6}   {size}");
    }
    out!(
        "memtables       {} ({} immutable)",
        bytes(stats.memtable_bytes_total as u64),
        stats.immutable_memtables
    );
    tables_on_disk(&db)?;
    if stats.history_trees > 0 {
        let oldest = stats.oldest_commit_time.map_or_else(
            || "none".into(),
            |t| chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        );
        out!(
            "history         {} trees keep history; {} commit-time marks, the oldest {oldest}",
            stats.history_trees,
            grouped(stats.commit_time_marks as u64)
        );
    }
    // Each tree's bytes over its last level's: what a full compaction of
    // every tree would leave, at best.
    let mut deepest: std::collections::HashMap<&str, (usize, u64)> = std::collections::HashMap::new();
    for f in &files {
        let d = deepest.entry(f.tree.as_str()).or_insert((0, 0));
        if f.level > d.0 {
            *d = (f.level, 0);
        }
        if f.level == d.0 {
            d.1 += f.size;
        }
    }
    let last: u64 = deepest.values().map(|d| d.1).sum();
    let total: u64 = files.iter().map(|f| f.size).sum();
    let amplification = if last == 0 { 0.0 } else { total as f64 / last as f64 };
    out!("space amplification  {amplification:.2} (SST bytes over each tree's last level's)");
    // Counters below are this process's: `basalt stats` has just opened the
    // database, so they say what opening it cost, not its history.
    out!("since this open:");
    out!("  write amplification   {:.2}", stats.write_amplification());
    out!("  files probed per get  {:.2}", stats.files_probed_per_get());
    let rate = |hits: u64, misses: u64| {
        if hits + misses == 0 {
            "-".to_owned()
        } else {
            format!("{:.1}%", 100.0 * hits as f64 / (hits + misses) as f64)
        }
    };
    out!(
        "  block cache           {} of {} used, hit rate {}",
        bytes(stats.block_cache_bytes),
        bytes(stats.block_cache_capacity_bytes),
        rate(stats.block_cache_hits, stats.block_cache_misses)
    );
    out!("  row cache hit rate    {}", rate(stats.row_cache_hits, stats.row_cache_misses));
    out!("  write stalls          {} ({:.3} s)", stats.write_stalls, stats.write_stall_time.as_secs_f64());
    out!("  flushes, compactions  {}, {}", stats.flushes, stats.compactions);
    db.close()?;
    Ok(())
}

pub fn export(args: &ExportArgs, create: bool) -> CliResult<()> {
    let started = Instant::now();
    let format = match args.format {
        Some(f) => f,
        None => {
            match args.file.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase().as_str() {
                "parquet" | "pq" => Format::Parquet,
                "csv" => Format::Csv,
                "arrow" | "ipc" | "feather" => Format::Arrow,
                // JSON lines, which `load` reads back (`--format json`
                // writes one array).
                "json" | "jsonl" | "ndjson" => Format::Jsonl,
                _ => {
                    return Err(CliError::usage(format!(
                        "cannot tell the format of {} from its name: give --format",
                        args.file.display()
                    )));
                }
            }
        }
    };
    if format == Format::Table {
        return Err(CliError::usage("export writes parquet, csv, arrow, json or jsonl"));
    }
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let mut sink = Sink::to(format, Some(&args.file), &schema)?;
    for batch in table.scan(ScanOptions::default())? {
        sink.write(&batch?)?;
    }
    let rows = sink.finish(&schema)?;
    out!(
        "exported {} rows of {} to {} in {:.2} s",
        grouped(rows),
        args.table,
        args.file.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A history window in a few words: `keep 1h, 10 versions, from seqno 5`.
fn describe_history(h: &basalt::HistoryInfo) -> String {
    let mut parts = Vec::new();
    if let Some(d) = h.window.keep_for {
        let ms = d.as_millis();
        let span = match ms {
            ms if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
            ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
            ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
            ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
            ms => format!("{ms}ms"),
        };
        parts.push(format!("keep {span}"));
    }
    if let Some(n) = h.window.keep_versions {
        parts.push(format!("{n} versions"));
    }
    if let Some(oldest) = h.oldest_seqno {
        parts.push(format!("from seqno {oldest}"));
    }
    parts.join(", ")
}
