//! `INSERT INTO` a Basalt table: each batch DataFusion hands the sink is
//! one atomic upsert (a row whose primary key exists replaces it).

use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use basalt::Table;
use datafusion::common::{Result, exec_err};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::context::SessionContext;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use datafusion::sql::sqlparser::ast::{Expr, SetExpr, Statement, TableObject, Value};
use futures::StreamExt;

use crate::error::to_df;
use crate::names::last_ident;
use crate::schema::database;

/// Writes the rows of an `INSERT` into a table.
pub(crate) struct BasaltSink {
    table: Table,
    schema: SchemaRef,
}

impl BasaltSink {
    pub fn new(table: Table) -> BasaltSink {
        let schema = table.schema();
        BasaltSink { table, schema }
    }
}

impl fmt::Debug for BasaltSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasaltSink").field("table", &self.table.name()).finish_non_exhaustive()
    }
}

impl DisplayAs for BasaltSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BasaltSink: table={} (upsert by primary key)", self.table.name())
    }
}

#[async_trait]
impl DataSink for BasaltSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let mut rows = 0u64;
        if let Some(slot) = crate::txn::SessionTransaction::of(context.session_config())
            && slot.is_open()
        {
            // Inside `BEGIN … COMMIT`: every row of the statement into the
            // transaction at once, or none of them.
            let mut part = basalt::WriteBatch::new();
            while let Some(batch) = data.next().await {
                let batch = conform(&self.schema, &batch?)?;
                rows += batch.num_rows() as u64;
                part.put_table(&self.table, &batch).map_err(to_df)?;
            }
            let Some(written) = slot.write(self.table.name(), part) else {
                return exec_err!("the transaction ended while INSERT ran");
            };
            return written.map(|()| rows);
        }
        while let Some(batch) = data.next().await {
            let batch = conform(&self.schema, &batch?)?;
            rows += batch.num_rows() as u64;
            let table = self.table.clone();
            // A write waits for its group's WAL append: not on an async worker.
            tokio::task::spawn_blocking(move || table.write(&batch))
                .await
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
                .map_err(to_df)?;
        }
        Ok(rows)
    }
}

/// `batch` under the table's schema (`basalt::conform`): its columns in
/// order, each cast to the column's type where DataFusion's differs (a
/// string literal typed `Utf8View`, an integer literal typed `Int64`); a
/// null in a column the table makes non-nullable is an error naming the
/// column.
pub(crate) fn conform(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch> {
    use basalt::conform::{Casts, Columns, ConformError};
    match basalt::conform::conform(batch, schema, Columns::ByPosition, Casts::Arrow) {
        Ok((batch, _)) => Ok(batch),
        Err(ConformError::Null { column }) => null_in(&column),
        Err(e) => exec_err!("{e}"),
    }
}

/// The error of a null where `column` takes none.
fn null_in<T>(column: &str) -> Result<T> {
    exec_err!("column {column} cannot be null (a primary-key column, or declared NOT NULL)")
}

/// Refuses an `INSERT … VALUES` with a literal `NULL` where the table's
/// column takes none, naming the column. DataFusion plans the VALUES under
/// the table's nullability with its own column names, and such a row would
/// fail as "Column 'column1' is declared as non-nullable" — a name the
/// user never wrote. A NULL reached any other way (an expression, a
/// SELECT) still meets [`conform`] or DataFusion's own check.
pub(crate) fn check_literal_nulls(ctx: &SessionContext, statement: &Statement) -> Result<()> {
    let Statement::Insert(insert) = statement else { return Ok(()) };
    let (TableObject::TableName(name), Some(source)) = (&insert.table, &insert.source) else {
        return Ok(());
    };
    let SetExpr::Values(values) = source.body.as_ref() else { return Ok(()) };
    // An unknown table or column is DataFusion's to report, as always.
    let Ok(db) = database(ctx) else { return Ok(()) };
    let Ok(table) = db.table(&last_ident(name)?) else { return Ok(()) };
    let schema = table.schema();
    let targets: Vec<String> = if insert.columns.is_empty() {
        schema.fields().iter().map(|f| f.name().clone()).collect()
    } else {
        insert.columns.iter().map(last_ident).collect::<Result<_>>()?
    };
    // A column list that leaves out a column taking no null and having no
    // default fills it with nulls: refused the same way, before DataFusion
    // names it by position.
    if !insert.columns.is_empty()
        && let Some(left_out) = schema.fields().iter().find(|f| {
            !f.is_nullable() && !targets.contains(f.name()) && table.column_default(f.name()).is_none()
        })
    {
        return null_in(left_out.name());
    }
    for row in &values.rows {
        for (value, column) in row.content.iter().zip(&targets) {
            if is_null_literal(value) && schema.field_with_name(column).is_ok_and(|f| !f.is_nullable()) {
                return null_in(column);
            }
        }
    }
    Ok(())
}

/// `NULL`, `(NULL)` or `CAST(NULL AS …)`.
fn is_null_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Value(v) => v.value == Value::Null,
        Expr::Nested(inner) | Expr::Cast { expr: inner, .. } => is_null_literal(inner),
        _ => false,
    }
}
