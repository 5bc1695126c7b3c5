//! The scan of a Basalt table as a DataFusion execution plan: one partition
//! per key range, each an engine scan streamed from a blocking thread (the
//! engine reads files synchronously, and DataFusion's async workers must
//! not wait on it). The engine's scans are opened when the plan is built,
//! so EXPLAIN reports the access path each one chose (key range or index)
//! and every partition reads as of one snapshot.

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions, UInt32Array};
use arrow_schema::{DataType, SchemaRef, SortOptions};
use basalt::{Filter, OwnedKeyValueRange, ScanOptions, ScanPlan, Snapshot, Table, TableEstimate, TableScan};
use datafusion::arrow::compute::{BatchCoalescer, take_record_batch};
use datafusion::common::stats::ColumnStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
    SortOrderPushdownResult,
};
use parking_lot::Mutex;

use crate::error::to_df;
use crate::pushdown::{borrowed, describe_predicate, describe_range};

/// The `ExecutionPlan` methods of a plan without children or expressions
/// of its own (a scan, a DML statement's single step).
macro_rules! leaf_plan {
    () => {
        fn children(&self) -> Vec<&std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
            Vec::new()
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &std::sync::Arc<dyn datafusion::physical_expr::PhysicalExpr>,
            ) -> datafusion::common::Result<
                datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> datafusion::common::Result<datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }

        fn replace_children(
            self: std::sync::Arc<Self>,
            _children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
            _options: datafusion::physical_plan::ReplaceChildrenOptions,
        ) -> datafusion::common::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
            Ok(self)
        }

        fn with_new_children(
            self: std::sync::Arc<Self>,
            _children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
        ) -> datafusion::common::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
            Ok(self)
        }
    };
}
pub(crate) use leaf_plan;

/// What every partition of a scan reads.
#[derive(Debug, Clone)]
pub(crate) struct ScanSpec {
    pub table: Table,
    pub snapshot: Arc<Snapshot>,
    /// Columns the engine returns (empty: the query needs only row counts,
    /// and the scan reads the first key column to count rows).
    pub columns: Vec<String>,
    /// The schema handed to DataFusion.
    pub schema: SchemaRef,
    pub filter: Option<Filter>,
    pub limit: Option<usize>,
    /// The whole key range, for EXPLAIN.
    pub range: OwnedKeyValueRange,
    /// The table's size, for the planner's statistics.
    pub estimate: Option<TableEstimate>,
    /// Null counts and bounds of the columns of `schema`, from zone maps.
    pub column_stats: Vec<ColumnStatistics>,
    /// Inside `BEGIN … COMMIT`, the block's own writes to the table, read
    /// over the snapshot (`txn.rs`).
    pub overlay: Option<basalt::TableOverlay>,
}

/// The share of a table's rows a pushed filter is assumed to keep: the
/// default selectivity DataFusion gives a filter it cannot estimate.
const FILTER_SELECTIVITY: f64 = 0.2;

/// A scan of one Basalt table.
pub(crate) struct BasaltScanExec {
    spec: Arc<ScanSpec>,
    parts: Vec<OwnedKeyValueRange>,
    /// Each partition's engine scan, opened at planning and taken by its
    /// first execution (a later execution opens a new one).
    opened: Vec<Mutex<Option<TableScan>>>,
    /// The access path of the first partition's scan.
    plan: ScanPlan,
    /// Each partition's rows in descending key order (the partitions in
    /// reverse order too): `ORDER BY key DESC` pushed into the scan.
    reverse: bool,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// Rows a reversed scan reads in its first chunk at most (its limit if
/// smaller), doubling per chunk up to [`REVERSE_CHUNK_MAX`] rows and about
/// [`REVERSE_CHUNK_BYTES`] (by the rows read so far).
const REVERSE_CHUNK_MIN: usize = 1024;
const REVERSE_CHUNK_MAX: usize = 64 << 10;
const REVERSE_CHUNK_BYTES: usize = 32 << 20;

impl fmt::Debug for BasaltScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasaltScanExec").field("table", &self.spec.table.name()).finish_non_exhaustive()
    }
}

impl BasaltScanExec {
    /// A scan of `spec` split into the key ranges `parts`.
    pub fn try_new(spec: ScanSpec, parts: Vec<OwnedKeyValueRange>) -> Result<Self> {
        let spec = Arc::new(spec);
        let opened = if spec.counts_only() {
            parts.iter().map(|_| Mutex::new(None)).collect()
        } else {
            parts.iter().map(|p| open(&spec, p).map(|s| Mutex::new(Some(s)))).collect::<Result<Vec<_>>>()?
        };
        let plan = opened
            .first()
            .and_then(|s| s.lock().as_ref().map(|s| s.plan().clone()))
            .unwrap_or(ScanPlan::KeyRange);
        let properties = PlanProperties::new(
            EquivalenceProperties::new_with_orderings(spec.schema.clone(), key_order(&spec)),
            Partitioning::UnknownPartitioning(parts.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(BasaltScanExec {
            spec,
            parts,
            opened,
            plan,
            reverse: false,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// This scan reading each partition from the end of its key range
    /// (`spec`'s limit, if any, per partition). Its engine scans are opened
    /// as it runs: chunk by chunk, from the end.
    fn reversed(&self, spec: Arc<ScanSpec>) -> BasaltScanExec {
        let mut parts = self.parts.clone();
        if !self.reverse {
            parts.reverse();
        }
        let descending = key_order(&spec)
            .into_iter()
            .map(|order| {
                order
                    .into_iter()
                    .map(|e| {
                        PhysicalSortExpr::new(e.expr, SortOptions { descending: true, nulls_first: true })
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        let properties = PlanProperties::new(
            EquivalenceProperties::new_with_orderings(spec.schema.clone(), descending),
            Partitioning::UnknownPartitioning(parts.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        BasaltScanExec {
            opened: parts.iter().map(|_| Mutex::new(None)).collect(),
            spec,
            parts,
            plan: self.plan.clone(),
            reverse: true,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Whether `order` asks for this scan's key order reversed: descending
    /// on the leading key columns it returns (key columns hold no nulls,
    /// so where nulls go does not matter).
    fn asks_reverse_key_order(&self, order: &[PhysicalSortExpr]) -> bool {
        let Some(keys) = key_order(&self.spec).into_iter().next() else { return false };
        !order.is_empty()
            && order.len() <= keys.len()
            && order.iter().zip(&keys).all(|(o, k)| {
                let same = match (o.expr.downcast_ref::<Column>(), k.expr.downcast_ref::<Column>()) {
                    (Some(a), Some(b)) => a == b,
                    _ => false,
                };
                same && o.options.descending
            })
    }
}

/// The order each partition's rows come in, as DataFusion states it: the
/// primary key's leading columns the scan returns, ascending (every access
/// path yields rows in key order: a key range, an index plan's sorted
/// keys, a transaction's own writes merged in). Declared only for key
/// types whose engine order is Arrow's (`ORDER BY` then needs no sort,
/// and a `LIMIT` reads from the front); floats are left out (the engine
/// orders `-0.0` before `0.0` by their bits, which Arrow's sort may not).
fn key_order(spec: &ScanSpec) -> Vec<Vec<PhysicalSortExpr>> {
    let mut order = Vec::new();
    for name in spec.table.primary_key() {
        let Ok(i) = spec.schema.index_of(&name) else { break };
        if !orders_as_arrow(spec.schema.field(i).data_type()) {
            break;
        }
        let ascending = SortOptions { descending: false, nulls_first: false };
        order.push(PhysicalSortExpr::new(Arc::new(Column::new(&name, i)), ascending));
    }
    if order.is_empty() { Vec::new() } else { vec![order] }
}

/// Whether the engine's key encoding orders values of `t` as Arrow's sort
/// does.
fn orders_as_arrow(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Boolean
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(..)
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Binary
                | DataType::LargeBinary
        )
}

impl ScanSpec {
    /// Whether the scan is asked for row counts only (no column, no
    /// filter, as `count(*)` asks): the engine counts them
    /// (`Table::count_rows`, from SST metadata where it can) instead of
    /// reading a key column.
    fn counts_only(&self) -> bool {
        // Metadata knows nothing of a block's own writes.
        self.columns.is_empty() && self.filter.is_none() && self.overlay.is_none()
    }
}

/// Opens the engine scan of one key range.
fn open(spec: &ScanSpec, part: &OwnedKeyValueRange) -> Result<TableScan> {
    // No columns asked for (`count(*)`): batches of row counts alone, so
    // nothing is copied through a filter's mask (the key column was, and
    // then coalesced, for nothing: a tenth of a filtered count).
    let opts = ScanOptions::default()
        .range(borrowed(part))
        .projection(Some(spec.columns.clone()))
        .filter(spec.filter.clone())
        .snapshot(Some(&spec.snapshot))
        .overlay(spec.overlay.clone());
    spec.table.scan(opts).map_err(to_df)
}

impl DisplayAs for BasaltScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = &self.spec;
        let access = match &self.plan {
            _ if spec.counts_only() => "row count".to_string(),
            ScanPlan::Index { index, entries } => format!("index {index} ({entries} entries)"),
            _ => "key range".to_string(),
        };
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "BasaltScanExec: table={}, access={access}, key_range={}",
                    spec.table.name(),
                    describe_range(&spec.range)
                )?;
                write!(f, ", partitions={}", self.parts.len())?;
                if self.reverse {
                    write!(f, ", order=key descending")?;
                }
                if let Some(filter) = &spec.filter {
                    let ps: Vec<String> = filter.predicates.iter().map(describe_predicate).collect();
                    write!(f, ", filter=[{}]", ps.join(" AND "))?;
                }
                write!(f, ", projection=[{}]", spec.columns.join(", "))?;
                if let Some(limit) = spec.limit {
                    write!(f, ", limit={limit}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "table={}", spec.table.name())?;
                writeln!(f, "access={access}")?;
                write!(f, "key_range={}", describe_range(&spec.range))
            }
        }
    }
}

impl ExecutionPlan for BasaltScanExec {
    fn name(&self) -> &'static str {
        "BasaltScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    crate::exec::leaf_plan!();

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// `ORDER BY` the key columns descending: the scan read backwards
    /// (exact: no sort is needed). Not when it reads a transaction's own
    /// writes, which a backward read does not merge in, nor with a filter:
    /// finding each chunk walks the range's keys backwards whatever the
    /// filter keeps (a general merge, several times a forward scan's cost
    /// per row), so a filter that keeps few rows would walk most of the
    /// table, where a forward scan under DataFusion's top-k reads it once.
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> Result<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        if self.reverse
            || self.spec.overlay.is_some()
            || self.spec.filter.is_some()
            || self.spec.counts_only()
            || !self.asks_reverse_key_order(order)
        {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        Ok(SortOrderPushdownResult::Exact { inner: Arc::new(self.reversed(self.spec.clone())) })
    }

    /// A reversed scan takes the limit (each partition reads only that many
    /// rows from its end); a forward one reads from the front and is cut by
    /// the operators above.
    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        if !self.reverse {
            return None;
        }
        let mut spec = (*self.spec).clone();
        spec.limit = match (spec.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Some(Arc::new(self.reversed(Arc::new(spec))))
    }

    fn fetch(&self) -> Option<usize> {
        if self.reverse { self.spec.limit } else { None }
    }

    /// Rows and bytes from the table's estimate (SST metadata and
    /// memtables), column bounds and null counts from its zone maps: all
    /// inexact; a pushed filter is assumed to keep a fifth of the rows, a
    /// projection its share of the bytes, and a partition its share of the
    /// scan. The row count of the whole scan is exact where the engine's
    /// metadata alone knows the rows at the scan's snapshot and the scan
    /// reads them all (no filter, no key range): DataFusion then answers
    /// `count(*)` from it without running the scan. Plans are made per
    /// execution (the plan cache keeps logical plans), so the figure is
    /// never older than the query.
    fn statistics_from_inputs(
        &self,
        _input: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let spec = &self.spec;
        let mut stats = Statistics::new_unknown(&spec.schema);
        if let Some(estimate) = spec.estimate {
            let share = if args.partition().is_some() { 1.0 / self.parts.len().max(1) as f64 } else { 1.0 };
            let kept = if spec.filter.is_some() { FILTER_SELECTIVITY } else { 1.0 };
            let mut rows = (estimate.rows as f64 * kept * share).ceil() as usize;
            if let Some(limit) = spec.limit {
                rows = rows.min(limit);
            }
            let columns = spec.columns.len() as f64 / spec.table.schema().fields().len().max(1) as f64;
            let whole = spec.filter.is_none()
                && matches!(spec.range, (Bound::Unbounded, Bound::Unbounded))
                && (args.partition().is_none() || self.parts.len() <= 1)
                // A reversed scan's limit holds per partition.
                && (!self.reverse || self.parts.len() <= 1);
            stats.num_rows = match estimate.exact_rows.filter(|_| whole) {
                Some(exact) => Precision::Exact((exact as usize).min(spec.limit.unwrap_or(usize::MAX))),
                None => Precision::Inexact(rows),
            };
            // Bounds hold for any part of the table; null counts scale
            // with the rows.
            stats.column_statistics = spec
                .column_stats
                .iter()
                .map(|c| ColumnStatistics {
                    null_count: c.null_count.map(|n| ((n as f64 * kept * share).ceil() as usize).min(rows)),
                    ..c.clone()
                })
                .collect();
            stats.total_byte_size =
                Precision::Inexact((estimate.bytes as f64 * kept * share * columns) as usize);
        }
        Ok(Arc::new(stats))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let Some(part) = self.parts.get(partition) else {
            return datafusion::common::internal_err!("BasaltScanExec has no partition {partition}");
        };
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let spec = self.spec.clone();
        let batch_rows = context.session_config().batch_size().max(1);
        let mut builder = RecordBatchReceiverStreamBuilder::new(spec.schema.clone(), 2);
        let tx = builder.tx();
        if spec.counts_only() {
            let part = part.clone();
            builder.spawn_blocking(move || {
                let rows = spec.table.count_rows(&borrowed(&part), Some(&spec.snapshot)).map_err(to_df)?;
                let mut left =
                    usize::try_from(rows).unwrap_or(usize::MAX).min(spec.limit.unwrap_or(usize::MAX));
                while left > 0 {
                    let n = left.min(batch_rows);
                    output_rows.add(n);
                    if tx.blocking_send(Ok(rows_only(&spec.schema, n)?)).is_err() {
                        break;
                    }
                    left -= n;
                }
                Ok(())
            });
            return Ok(builder.build());
        }
        if self.reverse {
            let (part, output_rows) = (part.clone(), output_rows.clone());
            builder.spawn_blocking(move || read_backwards(&spec, part, batch_rows, &tx, &output_rows));
            return Ok(builder.build());
        }
        let scan = match self.opened[partition].lock().take() {
            Some(scan) => scan,
            None => open(&self.spec, part)?,
        };
        let blocks_skipped = MetricBuilder::new(&self.metrics).counter("blocks_skipped", partition);
        builder.spawn_blocking(move || {
            let mut scan = scan;
            let mut left = spec.limit.unwrap_or(usize::MAX);
            // Zero-copy batches are one SST block each (tens of rows of a
            // wide table): DataFusion's operators pay per batch, so small
            // ones are copied together into batches of the session's size;
            // batches of half that size or more pass through untouched.
            let mut coalescer: Option<BatchCoalescer> = None;
            let mut counted = 0;
            let send = |batch: RecordBatch| -> Result<bool> {
                output_rows.add(batch.num_rows());
                Ok(tx.blocking_send(Ok(batch)).is_ok())
            };
            let mut open = true;
            // A consumer gone (a LIMIT above met, the query dropped) ends the scan.
            while open && left > 0 && !tx.is_closed() {
                let Some(batch) = scan.next() else { break };
                let mut batch = batch.map_err(to_df)?;
                check_columns(&spec.schema, &batch, spec.table.name())?;
                if batch.num_rows() > left {
                    batch = batch.slice(0, left);
                }
                left -= batch.num_rows();
                if spec.columns.is_empty() {
                    // Row counts: added up, sent in batches of the session's size.
                    counted += batch.num_rows();
                    while open && counted >= batch_rows {
                        open = send(rows_only(&spec.schema, batch_rows)?)?;
                        counted -= batch_rows;
                    }
                    continue;
                }
                let c = coalescer.get_or_insert_with(|| {
                    BatchCoalescer::new(batch.schema(), batch_rows)
                        .with_biggest_coalesce_batch_size(Some(batch_rows / 2))
                });
                c.push_batch(batch)?;
                while open && let Some(done) = c.next_completed_batch() {
                    open = send(done)?;
                }
            }
            if open && counted > 0 {
                open = send(rows_only(&spec.schema, counted)?)?;
            }
            if let Some(c) = coalescer.as_mut().filter(|_| open) {
                c.finish_buffered_batch()?;
                while open && let Some(done) = c.next_completed_batch() {
                    open = send(done)?;
                }
            }
            blocks_skipped.add(scan.blocks_skipped() as usize);
            // The stream ends when `tx` drops: the scan goes first, so that
            // whatever it does when dropped is done when the query is.
            drop(scan);
            drop(tx);
            Ok(())
        });
        Ok(builder.build())
    }
}

/// Sends the rows of key range `part` in descending key order (at most the
/// scan's limit): chunks read from the end, each located by
/// [`Table::nth_last_key`], read forward by the engine's scan (filter,
/// projection and snapshot as every partition's) and reversed.
fn read_backwards(
    spec: &ScanSpec,
    part: OwnedKeyValueRange,
    batch_rows: usize,
    tx: &tokio::sync::mpsc::Sender<Result<RecordBatch>>,
    output_rows: &datafusion::physical_plan::metrics::Count,
) -> Result<()> {
    let mut left = spec.limit.unwrap_or(usize::MAX);
    let (lower, mut upper) = part;
    let mut chunk = left.clamp(1, REVERSE_CHUNK_MIN);
    while left > 0 && !tx.is_closed() {
        let owned = (lower.clone(), upper.clone());
        let from =
            spec.table.nth_last_key(&borrowed(&owned), chunk as u64, Some(&spec.snapshot)).map_err(to_df)?;
        let start = from.clone().map_or_else(|| lower.clone(), Bound::Included);
        let mut batches = Vec::new();
        for batch in open(spec, &(start, upper.clone()))? {
            let batch = batch.map_err(to_df)?;
            check_columns(&spec.schema, &batch, spec.table.name())?;
            batches.push(batch);
        }
        // Each batch reversed on its own, the batches sent last first (no
        // concatenation: a chunk's strings may pass 2 GiB together).
        let (rows, bytes) = batches
            .iter()
            .fold((0usize, 0usize), |(r, b), x| (r + x.num_rows(), b + x.get_array_memory_size()));
        for batch in batches.iter().rev() {
            if left == 0 {
                break;
            }
            let backwards = UInt32Array::from_iter_values((0..batch.num_rows() as u32).rev().take(left));
            let batch = take_record_batch(batch, &backwards)?;
            left -= batch.num_rows();
            let mut at = 0;
            while at < batch.num_rows() {
                let piece = batch.slice(at, batch_rows.min(batch.num_rows() - at));
                at += piece.num_rows();
                output_rows.add(piece.num_rows());
                if tx.blocking_send(Ok(piece)).is_err() {
                    return Ok(());
                }
            }
        }
        let row_bytes = bytes.checked_div(rows).unwrap_or(1).max(1);
        match from {
            Some(key) => upper = Bound::Excluded(key),
            None => break,
        }
        chunk = (chunk * 2).min(REVERSE_CHUNK_MAX).min((REVERSE_CHUNK_BYTES / row_bytes).max(1));
    }
    Ok(())
}

/// A batch of no columns and `rows` rows.
/// Refuses a batch whose columns are not the ones the plan was made for:
/// the table's columns changed between planning (or a prepared
/// statement's check) and the scan, which reads the version current when
/// it opened (scans opened when the plan was made read the version it was
/// made for; this catches one opened at a later run). Names and types, in
/// order: a comparison per column, per batch.
fn check_columns(planned: &SchemaRef, batch: &RecordBatch, table: &str) -> Result<()> {
    let got = batch.schema_ref();
    if Arc::ptr_eq(got, planned) {
        return Ok(());
    }
    let same = got.fields().len() == planned.fields().len()
        && got
            .fields()
            .iter()
            .zip(planned.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if same {
        return Ok(());
    }
    Err(datafusion::error::DataFusionError::Execution(format!(
        "the columns of table {table} changed while this statement ran or since it was prepared; prepare it again"
    )))
}

fn rows_only(schema: &SchemaRef, rows: usize) -> Result<RecordBatch> {
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(schema.clone(), Vec::new(), &opts)?)
}
