//! Fitting a file's batches to the table: columns matched by name, cast
//! to the table's types by the engine's conform (`basalt::conform`,
//! `Casts::Parse`), a generated `row_id` key filled in, and every row that
//! cannot be stored — a value that does not parse as its column's type or
//! would change in the cast, a null in a key or non-null column — reported
//! with its row number in its file and the reason, worded here.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{Schema, SchemaRef};
use basalt::conform::{Casts, Columns, ConformError, RowProblem, conform};

use crate::error::{CliError, CliResult, Exit};

/// A row left out of the load, and why.
#[derive(Debug, Clone)]
pub struct BadRow {
    /// 1-based data row of its file (a CSV header is not counted).
    pub row: u64,
    pub reason: String,
}

/// How one file's batches become the table's.
pub struct Conformer {
    target: SchemaRef,
    key: Vec<usize>,
    /// The table column the load numbers (`--primary-key` not given).
    row_id: Option<usize>,
}

impl Conformer {
    /// Matches `file` (the columns a source yields) to `target` by name.
    pub fn new(
        target: SchemaRef,
        key: &[String],
        file: &Schema,
        row_id: Option<&str>,
    ) -> CliResult<Conformer> {
        let extra: Vec<&str> = file
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|name| target.index_of(name).is_err())
            .collect();
        if !extra.is_empty() {
            return Err(CliError::usage(format!(
                "the file has columns the table lacks: {} (the table has: {})",
                extra.join(", "),
                target.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        let row_id = row_id
            .and_then(|name| target.index_of(name).ok())
            .filter(|&i| file.index_of(target.field(i).name()).is_err());
        for (i, field) in target.fields().iter().enumerate() {
            if file.index_of(field.name()).is_err() && Some(i) != row_id && !field.is_nullable() {
                return Err(CliError::usage(format!(
                    "the file lacks column {}, which cannot be null",
                    field.name()
                )));
            }
        }
        let key = key
            .iter()
            .map(|k| target.index_of(k).map_err(|_| CliError::usage(format!("no key column {k}"))))
            .collect::<CliResult<Vec<_>>>()?;
        Ok(Conformer { target, key, row_id })
    }

    /// `batch` as the table's columns: the rows that fit, and those that
    /// do not. `first_row` is the number of the batch's first row in its
    /// file; generated row ids continue from `next_row_id`.
    pub fn conform(
        &self,
        batch: &RecordBatch,
        first_row: u64,
        next_row_id: &mut u64,
    ) -> CliResult<(RecordBatch, Vec<BadRow>)> {
        // The file's columns (matched by name in `new`); the generated key
        // is filled in after.
        let fields: Vec<_> = self
            .target
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != self.row_id)
            .map(|(_, f)| f.clone())
            .collect();
        let from_file = Arc::new(Schema::new(fields));
        let (fitted, bad) =
            conform(batch, &from_file, Columns::ByName, Casts::Parse).map_err(|e| match e {
                ConformError::Uncastable { column, to, why, .. } => CliError::usage(format!(
                    "column {column} cannot become {to}: {}",
                    why.unwrap_or_else(|| "no cast".to_string())
                )),
                other => CliError::new(Exit::BadData, other.to_string()),
            })?;
        let bad: Vec<BadRow> = bad
            .into_iter()
            .map(|b| {
                let reason = match &b.problem {
                    RowProblem::NotA { value, data_type } => {
                        format!("column {}: {value:?} is not a {data_type}", b.column)
                    }
                    RowProblem::Inexact { value, data_type } => {
                        format!("column {}: {value} does not fit {data_type} exactly", b.column)
                    }
                    RowProblem::Null => {
                        let key = self.key.iter().any(|&k| self.target.field(k).name() == &b.column);
                        let what = if key { "a key column" } else { "a column that cannot be null" };
                        format!("column {} ({what}) is null", b.column)
                    }
                };
                BadRow { row: first_row + b.row as u64 + 1, reason }
            })
            .collect();
        let mut arrays = fitted.columns().to_vec();
        if let Some(at) = self.row_id {
            let rows = fitted.num_rows() as u64;
            arrays.insert(
                at,
                Arc::new(UInt64Array::from_iter_values(*next_row_id..*next_row_id + rows)) as ArrayRef,
            );
            *next_row_id += rows;
        }
        let out = RecordBatch::try_new(self.target.clone(), arrays)
            .map_err(|e| CliError::new(Exit::BadData, e.to_string()))?;
        Ok((out, bad))
    }
}
