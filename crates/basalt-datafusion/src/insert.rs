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
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;

use crate::error::to_df;

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
        _context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let mut rows = 0u64;
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
        Err(ConformError::Null { column }) => {
            exec_err!("column {column} cannot be null (a primary-key column, or declared NOT NULL)")
        }
        Err(e) => exec_err!("{e}"),
    }
}
