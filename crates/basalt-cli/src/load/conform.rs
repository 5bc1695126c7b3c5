//! Fitting a file's batches to the table: columns matched by name, cast
//! to the table's types with Arrow's casts, a generated `row_id` key
//! filled in, and every row that cannot be stored — a value that does
//! not parse as its column's type, a null in a key or non-null column —
//! found with its row number and reason.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt64Array, new_null_array};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Schema, SchemaRef};

use crate::error::{CliError, CliResult, Exit};

/// Rows whose value the cast changed (1.7 to 1, nanoseconds to seconds):
/// cast back, they differ from the input. `None` when every value
/// survived, or the input is text (its parse fails rather than rounds).
fn lossy_rows(input: &ArrayRef, out: &ArrayRef) -> CliResult<Option<BooleanArray>> {
    let text = matches!(
        input.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    );
    // A float narrowed to a narrower float is the table's choice, not a
    // value that does not fit.
    let floats = input.data_type().is_floating() && out.data_type().is_floating();
    if input.data_type() == out.data_type() || text || floats {
        return Ok(None);
    }
    let Ok(back) = arrow_cast::cast(out.as_ref(), input.data_type()) else {
        return Ok(None);
    };
    // Null where either side is null: those rows are judged elsewhere.
    let differs = arrow_ord::cmp::distinct(&back, input)?;
    let lost: BooleanArray = (0..input.len())
        .map(|i| Some(differs.is_valid(i) && differs.value(i) && back.is_valid(i) && input.is_valid(i)))
        .collect();
    Ok((lost.true_count() > 0).then_some(lost))
}

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
    /// For each table column: its column in the file's batches, if any.
    sources: Vec<Option<usize>>,
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
        let mut sources = Vec::with_capacity(target.fields().len());
        for (i, field) in target.fields().iter().enumerate() {
            let source = file.index_of(field.name()).ok();
            if source.is_none() && Some(i) != row_id && !field.is_nullable() {
                return Err(CliError::usage(format!(
                    "the file lacks column {}, which cannot be null",
                    field.name()
                )));
            }
            sources.push(source);
        }
        let key = key
            .iter()
            .map(|k| target.index_of(k).map_err(|_| CliError::usage(format!("no key column {k}"))))
            .collect::<CliResult<Vec<_>>>()?;
        Ok(Conformer { target, key, sources, row_id })
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
        let n = batch.num_rows();
        let mut reasons: Vec<Option<String>> = Vec::new();
        let mut mark = |i: usize, reason: String| {
            if reasons.is_empty() {
                reasons = vec![None; n];
            }
            reasons[i].get_or_insert(reason);
        };
        let options = CastOptions { safe: true, ..CastOptions::default() };
        let mut columns: Vec<Option<ArrayRef>> = Vec::with_capacity(self.sources.len());
        for (t, field) in self.target.fields().iter().enumerate() {
            let out = match self.sources[t] {
                Some(s) => {
                    let input = batch.column(s);
                    let out = cast_with_options(input, field.data_type(), &options).map_err(|e| {
                        CliError::usage(format!(
                            "column {} cannot become {}: {e}",
                            field.name(),
                            field.data_type()
                        ))
                    })?;
                    // Logical nulls: a Null-typed or dictionary column has
                    // nulls without a null buffer.
                    let input_nulls = input.logical_nulls();
                    let was_null = |i: usize| input_nulls.as_ref().is_some_and(|n| n.is_null(i));
                    let lost = lossy_rows(input, &out)?;
                    if out.null_count() != input.logical_null_count() || lost.is_some() {
                        let shown = ArrayFormatter::try_new(input.as_ref(), &FormatOptions::default())?;
                        for i in (0..n).filter(|&i| !was_null(i) && out.is_null(i)) {
                            mark(
                                i,
                                format!(
                                    "column {}: {:?} is not a {}",
                                    field.name(),
                                    shown.value(i).to_string(),
                                    field.data_type()
                                ),
                            );
                        }
                    }
                    if let Some(lost) = lost {
                        let shown = ArrayFormatter::try_new(input.as_ref(), &FormatOptions::default())?;
                        for i in (0..n).filter(|&i| lost.value(i)) {
                            mark(
                                i,
                                format!(
                                    "column {}: {} does not fit {} exactly",
                                    field.name(),
                                    shown.value(i),
                                    field.data_type()
                                ),
                            );
                        }
                    }
                    Some(out)
                }
                // Filled in once the bad rows are known.
                None if Some(t) == self.row_id => None,
                None => Some(new_null_array(field.data_type(), n)),
            };
            if let Some(out) = &out
                && !field.is_nullable()
                && out.null_count() > 0
            {
                let what =
                    if self.key.contains(&t) { "a key column" } else { "a column that cannot be null" };
                for i in (0..n).filter(|&i| out.is_null(i)) {
                    mark(i, format!("column {} ({what}) is null", field.name()));
                }
            }
            columns.push(out);
        }
        let mut bad = Vec::new();
        let keep = if reasons.is_empty() {
            None
        } else {
            let keep = BooleanArray::from(reasons.iter().map(Option::is_none).collect::<Vec<_>>());
            for (i, reason) in reasons.into_iter().enumerate() {
                if let Some(reason) = reason {
                    bad.push(BadRow { row: first_row + i as u64 + 1, reason });
                }
            }
            Some(keep)
        };
        let rows = n - bad.len();
        let mut arrays = Vec::with_capacity(columns.len());
        for column in columns {
            let Some(array) = column else {
                let ids = UInt64Array::from_iter_values(*next_row_id..*next_row_id + rows as u64);
                *next_row_id += rows as u64;
                arrays.push(Arc::new(ids) as ArrayRef);
                continue;
            };
            arrays.push(match &keep {
                Some(keep) => arrow_select::filter::filter(array.as_ref(), keep)?,
                None => array,
            });
        }
        let out = RecordBatch::try_new(self.target.clone(), arrays)
            .map_err(|e| CliError::new(Exit::BadData, e.to_string()))?;
        Ok((out, bad))
    }
}
