//! Reading rows: `get` by primary key, `scan` over a key range (with a
//! projection, a `--where` filter, a limit, in either order) and `query`
//! through a secondary index.

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{RecordBatch, UInt32Array};
use arrow_schema::SchemaRef;
use basalt::{IndexPredicate, KeyValue, LookupOptions, OwnedKeyValue, ScanOptions, Table};
use clap::Args;

use crate::error::{CliError, CliResult};
use crate::output::{OutputArgs, Sink};
use crate::{filter, open, value};

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// Primary-key values: one per key column, repeated for more rows
    /// (a key of two columns takes two values per row).
    #[arg(required = true, allow_negative_numbers = true)]
    key: Vec<String>,
    /// Read as of a past point: a seqno, or a time (RFC 3339, e.g.
    /// 2026-11-29T10:00:00Z) the table's history window holds.
    #[arg(long, value_name = "SEQNO|TIME")]
    as_of: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// The row's primary-key values, one per key column.
    #[arg(required = true, allow_negative_numbers = true)]
    key: Vec<String>,
    /// At most this many versions (newest first).
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// Changes after this seqno (0: from the oldest kept).
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// At most this many changes.
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// Start at this key (inclusive); fewer values than key columns is a
    /// prefix.
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    from: Vec<String>,
    /// End at this key (inclusive: a prefix takes every key starting with
    /// it).
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    to: Vec<String>,
    /// Columns to show, in this order (default: all).
    #[arg(long, value_name = "A,B")]
    columns: Option<String>,
    /// Only rows satisfying comparisons joined by `and`:
    /// `score >= 10 and name = 'x' and note is not null`.
    #[arg(long = "where", value_name = "EXPR")]
    filter: Option<String>,
    /// At most this many rows.
    #[arg(long)]
    limit: Option<u64>,
    /// Descending key order.
    #[arg(long)]
    reverse: bool,
    /// Read as of a past point: a seqno, or an RFC 3339 time.
    #[arg(long, value_name = "SEQNO|TIME")]
    as_of: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("predicate").required(true).args(["eq", "prefix", "range"])))]
pub struct QueryArgs {
    /// The database directory.
    db: PathBuf,
    /// The table.
    table: String,
    /// The index to read.
    #[arg(long)]
    index: String,
    /// Rows whose indexed columns equal these values (one per column).
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    eq: Vec<String>,
    /// Rows whose leading indexed columns equal these values.
    #[arg(long, num_args = 1.., value_name = "VALUE", allow_negative_numbers = true)]
    prefix: Vec<String>,
    /// Rows whose first indexed column lies in [LO, HI].
    #[arg(long, num_args = 2, value_names = ["LO", "HI"], allow_negative_numbers = true)]
    range: Vec<String>,
    /// Print how many rows match (from the index alone), not the rows.
    #[arg(long)]
    count: bool,
    /// Columns to show, in this order (default: all).
    #[arg(long, value_name = "A,B")]
    columns: Option<String>,
    /// At most this many rows.
    #[arg(long)]
    limit: Option<usize>,
    /// Descending index order.
    #[arg(long)]
    reverse: bool,
    #[command(flatten)]
    output: OutputArgs,
}

fn projected_schema(table: &Table, columns: Option<&Vec<String>>) -> CliResult<SchemaRef> {
    let schema = table.schema();
    let Some(columns) = columns else {
        return Ok(schema);
    };
    let indices = columns
        .iter()
        .map(|c| {
            schema
                .index_of(c)
                .map_err(|_| CliError::usage(format!("table {} has no column {c}", table.name())))
        })
        .collect::<CliResult<Vec<_>>>()?;
    Ok(Arc::new(schema.project(&indices)?))
}

pub fn get(args: &GetArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let key_columns = table.primary_key();
    if !args.key.len().is_multiple_of(key_columns.len()) {
        return Err(CliError::usage(format!(
            "the key of {} has {} columns ({}): give {} values per row, not {}",
            args.table,
            key_columns.len(),
            key_columns.join(", "),
            key_columns.len(),
            args.key.len()
        )));
    }
    let snapshot = args.as_of.as_deref().map(|p| as_of(&db, p)).transpose()?;
    let opts = basalt::ReadOptions::default().snapshot(snapshot.as_ref());
    let mut sink = Sink::new(&args.output, &schema)?;
    for texts in args.key.chunks(key_columns.len()) {
        let key = value::key_values(&schema, &key_columns, texts)?;
        if let Some(row) = table.get_opt(&value::borrowed(&key), &opts)? {
            sink.write(&row)?;
        }
    }
    sink.finish(&schema)?;
    Ok(())
}

/// A snapshot at `point`: a seqno, or an RFC 3339 time.
fn as_of(db: &basalt::Db, point: &str) -> CliResult<basalt::Snapshot> {
    let at = if let Ok(seqno) = point.parse::<u64>() {
        basalt::AsOf::Seqno(seqno)
    } else {
        let t = chrono::DateTime::parse_from_rfc3339(point).map_err(|e| {
            CliError::usage(format!(
                "--as-of {point}: a seqno or an RFC 3339 time (2026-11-29T10:00:00Z): {e}"
            ))
        })?;
        basalt::AsOf::Time(t.into())
    };
    Ok(db.snapshot_at(at)?)
}

/// The versions of one row, newest first.
pub fn history(args: &HistoryArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let key = value::key_values(&schema, &table.primary_key(), &args.key)?;
    let rows = table.history(&value::borrowed(&key), basalt::HistoryOptions::default().limit(args.limit))?;
    let mut sink = Sink::new(&args.output, &rows.schema())?;
    sink.write(&rows)?;
    sink.finish(&rows.schema())?;
    Ok(())
}

/// The table's changes after a seqno, in commit order, read in parts.
pub fn changes(args: &ChangesArgs, create: bool) -> CliResult<()> {
    const PART_ROWS: usize = 65_536;
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let mut left = args.limit.unwrap_or(usize::MAX);
    let mut since = args.since;
    let first = table.changes(since, left.min(PART_ROWS))?;
    let schema = first.schema();
    let mut sink = Sink::new(&args.output, &schema)?;
    let mut part = first;
    loop {
        let n = part.num_rows();
        if n == 0 {
            break;
        }
        sink.write(&part)?;
        left -= n;
        let seqnos = part.column(1).as_any().downcast_ref::<arrow_array::UInt64Array>();
        since = seqnos.map_or(since, |s| s.value(n - 1));
        if left == 0 {
            break;
        }
        part = table.changes(since, left.min(PART_ROWS))?;
    }
    sink.finish(&schema)?;
    Ok(())
}

fn bound(values: &[OwnedKeyValue]) -> Bound<Vec<OwnedKeyValue>> {
    if values.is_empty() { Bound::Unbounded } else { Bound::Included(values.to_vec()) }
}

/// Batch `batch` with its rows in reverse order.
fn reversed(batch: &RecordBatch) -> CliResult<RecordBatch> {
    let n = batch.num_rows() as u32;
    let order = UInt32Array::from_iter_values((0..n).rev());
    Ok(arrow_select::take::take_record_batch(batch, &order)?)
}

pub fn scan(args: &ScanArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let key_columns = table.primary_key();
    let from = value::key_values(&schema, &key_columns, &args.from)?;
    let to = value::key_values(&schema, &key_columns, &args.to)?;
    let columns = args.columns.as_deref().map(value::names).transpose()?;
    let out_schema = projected_schema(&table, columns.as_ref())?;
    // The filter may name columns the projection leaves out.
    let filter = args.filter.as_deref().map(|f| filter::parse(f, &schema)).transpose()?;
    let mut sink = Sink::new(&args.output, &out_schema)?;
    let mut left = args.limit.unwrap_or(u64::MAX);
    let range = (bound(&from), bound(&to));
    let mut emit = |batch: RecordBatch, left: &mut u64| -> CliResult<()> {
        let take = (batch.num_rows() as u64).min(*left) as usize;
        if take > 0 {
            sink.write(&batch.slice(0, take))?;
            *left -= take as u64;
        }
        Ok(())
    };
    let snapshot = args.as_of.as_deref().map(|p| as_of(&db, p)).transpose()?;
    let scan_part = |range: &basalt::OwnedKeyValueRange| -> CliResult<basalt::TableScan> {
        let opts = ScanOptions::default()
            .range(value::borrowed_range(range))
            .projection(columns.clone())
            .filter(filter.clone())
            .snapshot(snapshot.as_ref());
        Ok(table.scan(opts)?)
    };
    if args.reverse {
        // The engine scans forward: walk the range's parts (cut at SST
        // boundaries) from the last, each reversed in memory, so memory
        // holds one part, not the table.
        let rows = table.estimate()?.rows;
        let parts = usize::try_from(rows / 65_536 + 1).unwrap_or(usize::MAX).min(4096);
        for part in table.split_range(&value::borrowed_range(&range), parts)?.iter().rev() {
            if left == 0 {
                break;
            }
            let batches = scan_part(part)?.collect::<basalt::Result<Vec<_>>>()?;
            for batch in batches.iter().rev() {
                emit(reversed(batch)?, &mut left)?;
            }
        }
    } else {
        for batch in scan_part(&range)? {
            if left == 0 {
                break;
            }
            emit(batch?, &mut left)?;
        }
    }
    sink.finish(&out_schema)?;
    Ok(())
}

fn nullable(values: Vec<OwnedKeyValue>) -> Vec<Option<OwnedKeyValue>> {
    values.into_iter().map(Some).collect()
}

fn borrowed_nullable(values: &[Option<OwnedKeyValue>]) -> Vec<Option<KeyValue<'_>>> {
    values.iter().map(|v| v.as_ref().map(OwnedKeyValue::as_value)).collect()
}

pub fn query(args: &QueryArgs, create: bool) -> CliResult<()> {
    let db = open::open(&args.db, create)?;
    let table = open::table(&db, &args.table)?;
    let schema = table.schema();
    let Some(info) = table.indexes().into_iter().find(|i| i.name == args.index) else {
        let names: Vec<String> = table.indexes().into_iter().map(|i| i.name).collect();
        return Err(CliError::usage(format!(
            "table {} has no index {} (indexes: {})",
            args.table,
            args.index,
            if names.is_empty() { "none".into() } else { names.join(", ") }
        )));
    };
    let (lo, hi);
    let eq;
    let predicate = if !args.eq.is_empty() {
        if args.eq.len() != info.columns.len() {
            return Err(CliError::usage(format!(
                "index {} has {} columns ({}): --eq takes one value each (--prefix takes fewer)",
                info.name,
                info.columns.len(),
                info.columns.join(", ")
            )));
        }
        eq = nullable(value::key_values(&schema, &info.columns, &args.eq)?);
        IndexPredicate::Eq(borrowed_nullable(&eq))
    } else if !args.prefix.is_empty() {
        eq = nullable(value::key_values(&schema, &info.columns, &args.prefix)?);
        IndexPredicate::Prefix(borrowed_nullable(&eq))
    } else {
        let first = &info.columns[..1];
        lo = nullable(value::key_values(&schema, first, &args.range[..1])?);
        hi = nullable(value::key_values(&schema, first, &args.range[1..])?);
        IndexPredicate::Range(
            Bound::Included(borrowed_nullable(&lo)),
            Bound::Included(borrowed_nullable(&hi)),
        )
    };
    if args.count {
        out!("{}", table.count(&args.index, predicate)?);
        return Ok(());
    }
    let columns = args.columns.as_deref().map(value::names).transpose()?;
    let out_schema = projected_schema(&table, columns.as_ref())?;
    let opts = LookupOptions::default().projection(columns).limit(args.limit).reverse(args.reverse);
    let rows = table.lookup(&args.index, predicate, opts)?;
    let mut sink = Sink::new(&args.output, &out_schema)?;
    sink.write(&rows)?;
    sink.finish(&out_schema)?;
    Ok(())
}
