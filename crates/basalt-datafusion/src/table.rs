//! A Basalt table as a DataFusion table: scans push their filters, key
//! range, projection and limit into the engine; inserts are atomic upserts
//! of each batch. DELETE and UPDATE run in `dml.rs`, not here.

use std::sync::Arc;

use arrow_schema::SchemaRef;
use async_trait::async_trait;
use basalt::{Db, Table};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{
    Column, Constraint, Constraints, DFSchema, DataFusionError, Result, ScalarValue, Statistics,
    not_impl_err, plan_err,
};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExecBuilder;

use crate::error::to_df;
use crate::exec::{BasaltScanExec, ScanSpec};
use crate::insert::BasaltSink;
use crate::pushdown::{borrowed, predicates_of, pushdown};
use crate::stats::column_statistics;

/// A Basalt table, for DataFusion. It holds the table's name, not a handle:
/// each scan, insert or change opens one for as long as it runs, so that
/// `DROP TABLE` (which the engine refuses while a handle is open) works
/// while DataFusion still holds the provider it looked up.
#[derive(Debug)]
pub struct BasaltTable {
    db: Arc<Db>,
    name: String,
    schema: SchemaRef,
    /// Column indexes of the primary key.
    primary_key: Vec<usize>,
    constraints: Constraints,
    /// The defaults of columns added with one (`ALTER TABLE … ADD COLUMN
    /// … DEFAULT`), which an `INSERT` that leaves them out writes too.
    defaults: std::collections::HashMap<String, Expr>,
    /// Read as of this past point (`as_of('t', …)`, `history.rs`): every
    /// scan takes a snapshot there, and nothing is written through it.
    as_of: Option<basalt::AsOf>,
}

impl BasaltTable {
    /// The table `name` of `db`.
    pub fn try_new(db: Arc<Db>, name: &str) -> basalt::Result<BasaltTable> {
        let table = db.table(name)?;
        // The schema and its defaults from one load of the table's state.
        let (schema, column_defaults) = table.schema_with_defaults();
        let primary_key = key_columns(&schema, &table);
        let constraints = Constraints::new_unverified(vec![Constraint::PrimaryKey(primary_key.clone())]);
        let defaults = schema
            .fields()
            .iter()
            .zip(column_defaults)
            .filter_map(|(f, value)| {
                let scalar = ScalarValue::try_from_array(&value?, 0).ok()?;
                Some((f.name().clone(), Expr::Literal(scalar, None)))
            })
            .collect();
        Ok(BasaltTable {
            db,
            name: name.to_string(),
            schema,
            primary_key,
            constraints,
            defaults,
            as_of: None,
        })
    }

    /// Whether it reads as of a past point.
    pub(crate) fn is_past(&self) -> bool {
        self.as_of.is_some()
    }

    /// The table read as of `point`, a past seqno or time (refused at scan
    /// time where its history window does not hold it).
    #[must_use]
    pub fn as_of(self, point: basalt::AsOf) -> BasaltTable {
        BasaltTable { as_of: Some(point), ..self }
    }

    /// A handle to the table (open while it is held).
    pub fn table(&self) -> Result<Table> {
        self.db.table(&self.name).map_err(to_df)
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema the provider was made with.
    pub(crate) fn schema_ref(&self) -> &SchemaRef {
        &self.schema
    }

    /// Column indexes of the primary key.
    pub(crate) fn primary_key(&self) -> &[usize] {
        &self.primary_key
    }

    /// Whether `table` (a handle opened now) is the table this provider was
    /// made from: the same schema and primary key. A table dropped and made
    /// again differently is not.
    pub(crate) fn made_from(&self, table: &Table) -> bool {
        table.schema() == self.schema && key_columns(&self.schema, table) == self.primary_key
    }

    /// The plan of a scan, as [`TableProvider::scan`] makes it.
    pub(crate) fn scan_plan(
        &self,
        state: &dyn Session,
        partitions: usize,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<BasaltScanExec> {
        let pushed = pushdown(&self.schema, &self.primary_key, filters);
        let (columns, schema) = match projection {
            None => (self.schema.fields().iter().map(|f| f.name().clone()).collect(), self.schema.clone()),
            Some(p) => (
                p.iter().map(|&i| self.schema.field(i).name().clone()).collect(),
                Arc::new(self.schema.project(p)?),
            ),
        };
        // A LIMIT reads its rows from the front of the range: one part.
        let parts = if limit.is_some() { 1 } else { partitions };
        let table = self.table()?;
        // The plan was made with this provider's columns; a table changed
        // since (a plan kept across an ALTER) is not read under them. A
        // change after this check is caught by the scan (`exec.rs`).
        if !self.made_from(&table) {
            return Err(datafusion::error::DataFusionError::Plan(format!(
                "table {} was dropped or changed since the statement was planned; prepare it again",
                self.name
            )));
        }
        let parts = table.split_range(&borrowed(&pushed.range), parts).map_err(to_df)?;
        // The snapshot first: the estimate's exact row count is the
        // snapshot's, which the scan reads. Inside `BEGIN … COMMIT`, the
        // transaction's (`txn.rs`).
        let in_block = match crate::txn::SessionTransaction::of(state.config()) {
            Some(slot) if self.as_of.is_none() => slot.read_view(&table),
            _ => None,
        };
        let (snapshot, overlay) = match (in_block, self.as_of) {
            (Some((snapshot, overlay)), _) => (snapshot, overlay),
            (None, Some(point)) => (self.db.snapshot_at(point).map_err(to_df)?, None),
            (None, None) => (self.db.snapshot(), None),
        };
        let snapshot = Arc::new(snapshot);
        let estimate = table.estimate_opt(Some(&snapshot)).ok().map(|mut estimate| {
            // The block's own writes change the count metadata gives.
            if overlay.is_some() {
                estimate.exact_rows = None;
            }
            estimate
        });
        let column_stats = column_statistics(&table, &schema);
        let spec = ScanSpec {
            table,
            snapshot,
            columns,
            schema,
            filter: pushed.filter(),
            limit,
            range: pushed.range,
            estimate,
            column_stats,
            overlay,
        };
        BasaltScanExec::try_new(spec, parts)
    }

    /// A scan whose filters include some the engine cannot evaluate,
    /// although they were accepted as exact: DataFusion's optimizer may
    /// rewrite a filter after [`TableProvider::supports_filters_pushdown`]
    /// accepted it (`bo = false` into `NOT bo`, say), and nothing above
    /// the scan would evaluate it then. Those are evaluated here, in a
    /// filter over the scan, never dropped; the scan reads the columns they
    /// need and the filter projects them away again.
    fn scan_filtered(
        &self,
        state: &dyn Session,
        partitions: usize,
        projection: Option<&Vec<usize>>,
        exact: &[Expr],
        rewritten: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let wanted: Vec<usize> =
            projection.cloned().unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let mut read = wanted.clone();
        for filter in &rewritten {
            for column in filter.column_refs() {
                let i = self.schema.index_of(&column.name)?;
                if !read.contains(&i) {
                    read.push(i);
                }
            }
        }
        // No limit: rows the filter drops would count against it.
        let scan = Arc::new(self.scan_plan(state, partitions, Some(&read), exact, None)?);
        let schema = DFSchema::try_from(scan.schema().as_ref().clone())?;
        let unqualified = rewritten.into_iter().map(|f| {
            f.transform(|e| {
                Ok(match e {
                    Expr::Column(c) => Transformed::yes(Expr::Column(Column::new_unqualified(c.name))),
                    other => Transformed::no(other),
                })
            })
            .data()
        });
        let predicate = conjunction(unqualified.collect::<Result<Vec<_>>>()?)
            .ok_or_else(|| DataFusionError::Internal("no filter to evaluate".into()))?;
        let predicate = state.create_physical_expr(predicate, &schema)?;
        let filter =
            FilterExecBuilder::new(predicate, scan).apply_projection(Some((0..wanted.len()).collect()))?;
        Ok(Arc::new(filter.build()?))
    }
}

/// Positions in `schema` of `table`'s primary-key columns.
fn key_columns(schema: &SchemaRef, table: &Table) -> Vec<usize> {
    table.primary_key().iter().filter_map(|name| schema.index_of(name).ok()).collect()
}

#[async_trait]
impl TableProvider for BasaltTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn constraints(&self) -> Option<&Constraints> {
        Some(&self.constraints)
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(column)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let partitions = state.config().target_partitions();
        let (exact, rewritten): (Vec<Expr>, Vec<Expr>) =
            filters.iter().cloned().partition(|f| predicates_of(&self.schema, f).is_some());
        if rewritten.is_empty() {
            return Ok(Arc::new(self.scan_plan(state, partitions, projection, &exact, limit)?));
        }
        self.scan_filtered(state, partitions, projection, &exact, rewritten)
    }

    /// `Exact` for every filter the engine evaluates itself (comparisons of
    /// a column with a literal, ranges, null tests, and conjunctions of
    /// them): it bounds the key range, picks an index or skips blocks by
    /// their zone maps, then applies the filter to each row with the same
    /// Arrow kernels DataFusion would use. Evaluating it again above the
    /// scan would only cost time, so none is `Inexact`.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if predicates_of(&self.schema, f).is_some() {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    /// Row and byte counts from the SSTs' metadata and the memtables, and
    /// per column null counts and bounds from the zone maps: estimates,
    /// since a key written twice is counted per stored version.
    /// (DataFusion's planner reads a scan's statistics from the plan, which
    /// gives the same figures: `BasaltScanExec::statistics_from_inputs`.)
    fn statistics(&self) -> Option<Statistics> {
        let table = self.table().ok()?;
        let estimate = table.estimate().ok()?;
        let mut stats = Statistics::new_unknown(&self.schema);
        stats.column_statistics = column_statistics(&table, &self.schema);
        stats.num_rows = Precision::Inexact(estimate.rows as usize);
        stats.total_byte_size = Precision::Inexact(estimate.bytes as usize);
        Some(stats)
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.as_of.is_some() {
            return plan_err!("table {} as of a past point is read-only", self.name);
        }
        if insert_op != InsertOp::Append {
            return not_impl_err!(
                "INSERT {insert_op} into Basalt table {}: INSERT is an upsert by primary key, use plain INSERT INTO",
                self.name
            );
        }
        // The input was planned with this provider's columns: a table
        // changed since would take its values by position into others (a
        // change after this check is refused by the write path, which
        // takes no rows encoded under an older schema version).
        let table = self.table()?;
        if !self.made_from(&table) {
            return Err(datafusion::error::DataFusionError::Plan(format!(
                "table {} was dropped or changed since the statement was planned; prepare it again",
                self.name
            )));
        }
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(BasaltSink::new(table)), None)))
    }

    /// Refused: DataFusion's DML path gives a provider only the filters
    /// left in the optimized plan, and a filter folded away would delete
    /// every row. [`crate::sql`] runs DELETE safely (`dml.rs`).
    async fn delete_from(&self, _state: &dyn Session, _filters: Vec<Expr>) -> Result<Arc<dyn ExecutionPlan>> {
        not_impl_err!("DELETE on Basalt table {}: run it through basalt_datafusion::sql", self.name)
    }

    /// Refused, as [`TableProvider::delete_from`]; [`crate::sql`] runs UPDATE.
    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        not_impl_err!("UPDATE on Basalt table {}: run it through basalt_datafusion::sql", self.name)
    }
}
