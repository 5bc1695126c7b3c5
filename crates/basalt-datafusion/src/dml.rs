//! DELETE and UPDATE on a Basalt table. The rows the statement's filters
//! select are read through a pushed-down scan (key range, index, zone maps),
//! filters the engine cannot evaluate are applied here, and every change
//! goes into one write batch: a statement is atomic, and holds its changes
//! in memory until it commits (the engine takes batches up to its write
//! batch limit).

use std::fmt;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, Table, WriteBatch};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result, exec_err, internal_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

use crate::error::to_df;
use crate::exec::BasaltScanExec;
use crate::insert::conform;
use crate::pushdown::predicates_of;
use crate::table::BasaltTable;

/// What a statement does to the rows it selects.
#[derive(Debug, Clone)]
pub(crate) enum DmlKind {
    Delete,
    /// Column names and their new values.
    Update(Vec<(String, Expr)>),
}

/// A DELETE or UPDATE, run when executed (EXPLAIN changes nothing).
#[derive(Clone)]
pub(crate) struct DmlExec {
    db: Arc<Db>,
    table: Table,
    /// Reads the candidate rows (every column).
    scan: Arc<BasaltScanExec>,
    /// Filters the scan did not apply.
    residual: Vec<Arc<dyn PhysicalExpr>>,
    /// For UPDATE: each column's new value (`None`: unchanged).
    assignments: Option<Vec<Option<Arc<dyn PhysicalExpr>>>>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for DmlExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmlExec").field("table", &self.table.name()).finish_non_exhaustive()
    }
}

impl DmlExec {
    pub fn try_new(
        provider: &BasaltTable,
        state: &dyn Session,
        kind: DmlKind,
        filters: Vec<Expr>,
    ) -> Result<Self> {
        let table = provider.table()?;
        let schema = table.schema();
        let df_schema = DFSchema::try_from_qualified_schema(table.name(), &schema)?;
        let (pushed, residual): (Vec<Expr>, Vec<Expr>) =
            filters.into_iter().partition(|f| predicates_of(&schema, f).is_some());
        let residual = residual
            .into_iter()
            .map(|e| state.create_physical_expr(e, &df_schema))
            .collect::<Result<Vec<_>>>()?;
        let assignments = match kind {
            DmlKind::Delete => None,
            DmlKind::Update(assignments) => {
                let mut by_column = vec![None; schema.fields().len()];
                for (name, expr) in assignments {
                    let Ok(i) = schema.index_of(&name) else {
                        return exec_err!("UPDATE of {}: no column {name}", table.name());
                    };
                    // DataFusion passes every column, unchanged ones as themselves.
                    if matches!(&expr, Expr::Column(c) if c.name == name) {
                        continue;
                    }
                    by_column[i] = Some(state.create_physical_expr(expr, &df_schema)?);
                }
                Some(by_column)
            }
        };
        let scan = Arc::new(provider.scan_plan(1, None, &pushed, None)?);
        let count = Arc::new(Schema::new(vec![Field::new("count", DataType::UInt64, false)]));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(count),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Ok(DmlExec {
            db: provider.db().clone(),
            table,
            scan,
            residual,
            assignments,
            properties: Arc::new(properties),
        })
    }

    /// Adds the statement's changes to `rows` to `batch`; returns how many
    /// rows it changes.
    fn change(&self, rows: &RecordBatch, batch: &mut WriteBatch) -> Result<u64> {
        let mut rows = rows.clone();
        for expr in &self.residual {
            let mask = expr.evaluate(&rows)?.into_array(rows.num_rows())?;
            let Some(mask) = mask.as_any().downcast_ref::<arrow_array::BooleanArray>() else {
                return internal_err!("a filter of {} is not boolean", self.table.name());
            };
            rows = filter_record_batch(&rows, mask)?;
        }
        if rows.num_rows() == 0 {
            return Ok(0);
        }
        let schema = self.table.schema();
        let key_columns: Vec<usize> = self
            .table
            .primary_key()
            .iter()
            .map(|n| schema.index_of(n))
            .collect::<std::result::Result<_, _>>()?;
        match &self.assignments {
            None => batch.delete_table(&self.table, &rows.project(&key_columns)?).map_err(to_df)?,
            Some(by_column) => {
                let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
                for (i, expr) in by_column.iter().enumerate() {
                    if let Some(expr) = expr {
                        let value = expr.evaluate(&rows)?.into_array(rows.num_rows())?;
                        columns[i] = cast(&value, schema.field(i).data_type())?;
                    }
                }
                let changed_key = key_columns.iter().any(|&i| by_column[i].is_some());
                if changed_key {
                    // The old keys go; the new rows (possibly at other keys) come after.
                    batch.delete_table(&self.table, &rows.project(&key_columns)?).map_err(to_df)?;
                }
                let new_rows = conform(&schema, &RecordBatch::try_new(schema.clone(), columns)?)?;
                batch.put_table(&self.table, &new_rows).map_err(to_df)?;
            }
        }
        Ok(rows.num_rows() as u64)
    }
}

impl DisplayAs for DmlExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.assignments.is_some() { "UPDATE" } else { "DELETE" };
        write!(f, "BasaltDmlExec: {what} {} (one atomic write) reading ", self.table.name())?;
        self.scan.fmt_as(t, f)
    }
}

impl ExecutionPlan for DmlExec {
    fn name(&self) -> &'static str {
        "BasaltDmlExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    crate::exec::leaf_plan!();

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("BasaltDmlExec has one partition, not {partition}");
        }
        let out: SchemaRef = self.properties.eq_properties.schema().clone();
        let this = Arc::new(self.clone());
        let input = self.scan.execute(0, context)?;
        let schema = out.clone();
        let stream = futures::stream::once(async move {
            let mut input = input;
            let mut batch = WriteBatch::new();
            let mut changed = 0u64;
            while let Some(rows) = input.next().await {
                changed += this.change(&rows?, &mut batch)?;
            }
            let db = this.db.clone();
            tokio::task::spawn_blocking(move || db.write(batch))
                .await
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
                .map_err(to_df)?;
            Ok(RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![changed]))])?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(out, stream)))
    }
}
