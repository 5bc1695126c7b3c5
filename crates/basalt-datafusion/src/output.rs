//! What running a statement comes to: its rows with their schema, or
//! the name of a table that changed since the statement was planned.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::common::{Result, exec_err};

/// What a statement returned: its schema (known also when no rows came)
/// and its batches.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    /// The result's columns.
    pub schema: SchemaRef,
    /// The rows, in the order the statement gave them.
    pub batches: Vec<RecordBatch>,
}

impl QueryOutput {
    /// Rows in all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// What running a statement came to: its output, or the name of a table
/// it reads that was dropped or made again differently since it was
/// planned (nothing was run then).
pub(crate) enum Ran {
    Output(QueryOutput),
    Changed(String),
}

impl Ran {
    pub(crate) fn output(self) -> Result<QueryOutput> {
        match self {
            Ran::Output(output) => Ok(output),
            Ran::Changed(table) => exec_err!(
                "table {table} was dropped or changed since the statement was prepared; prepare it again"
            ),
        }
    }
}

pub(crate) async fn collect(frame: datafusion::dataframe::DataFrame) -> Result<QueryOutput> {
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    Ok(QueryOutput { schema, batches })
}
