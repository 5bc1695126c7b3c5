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
    let mut sink = Sink::new(&args.output, &schema)?;
    for texts in args.key.chunks(key_columns.len()) {
        let key = value::key_values(&schema, &key_columns, texts)?;
        if let Some(row) = table.get(&value::borrowed(&key))? {
            sink.write(&row)?;
        }
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
    let scan_part = |range: &basalt::OwnedKeyValueRange| -> CliResult<basalt::TableScan> {
        let opts = ScanOptions::default()
            .range(value::borrowed_range(range))
            .projection(columns.clone())
            .filter(filter.clone());
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
