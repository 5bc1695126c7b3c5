//! Fitting an Arrow batch to a table's schema, for every face that takes
//! batches from outside: Python's writes, the command line's loads and
//! SQL's `INSERT`. One function, three named policies of casting; each
//! face keeps only how it words the errors (`ConformError`, `BadRow`).
//!
//! Arrow's cast kernels do the converting (arrow-cast); what is written
//! here is which casts each policy allows and how a value that does not
//! survive one is found: cast back and compared.

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, new_null_array};
use arrow_cast::cast::{CastOptions, can_cast_types, cast_with_options};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Field, SchemaRef};

/// How values become the table's types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Casts {
    /// Only casts within one kind that keep every value: strings to
    /// strings, binary to binary, integers to integers or floats, floats to
    /// floats, times to times of their kind, decimals to decimals (and
    /// dictionaries or nulls of those). A value the cast would change —
    /// an overflow, a fraction of a second dropped, a float narrowed, an
    /// integer past 2^53 into a float — is an error; text never becomes a
    /// number. Python's writes.
    Lossless,
    /// Arrow's casts, text parsed: a value that does not parse as its
    /// column's type, one the cast would change (1.7 into an integer), or
    /// a null where the column takes none makes its row a [`BadRow`],
    /// left out of the batch, instead of failing it. The command line's
    /// loads.
    Parse,
    /// Arrow's casts, as the caller typed the values (SQL's coercion ran
    /// already); a null where the column takes none is an error. SQL's
    /// `INSERT`.
    Arrow,
}

/// How the batch's columns are matched with the table's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    /// By name; a table column the batch lacks is null (refused where the
    /// column takes no null); a batch column the table lacks is refused.
    ByName,
    /// By position: the batch has exactly the table's columns, in order.
    ByPosition,
}

/// A row [`Casts::Parse`] left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// The row's position in the batch (0-based).
    pub row: usize,
    /// The table column whose value did not fit.
    pub column: String,
    /// What was wrong with the value.
    pub problem: RowProblem,
}

/// Why a row did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowProblem {
    /// The value (as the input shows it) does not parse as the type.
    NotA {
        /// The value as the input shows it.
        value: String,
        /// The column's type.
        data_type: DataType,
    },
    /// The value would change in the cast.
    Inexact {
        /// The value as the input shows it.
        value: String,
        /// The column's type.
        data_type: DataType,
    },
    /// A null in a column that takes none; `key` when it is a key column.
    Null,
}

/// Why a batch does not fit the table at all.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConformError {
    /// By name: the batch has a column the table does not.
    ExtraColumn {
        /// The batch's column.
        name: String,
    },
    /// By name: the batch lacks a column that takes no null.
    MissingColumn {
        /// The table's column.
        name: String,
    },
    /// By position: the batch has another number of columns.
    ColumnCount {
        /// Columns of the batch.
        given: usize,
        /// Columns of the table.
        table: usize,
    },
    /// The policy allows no cast between the two types (or Arrow has none).
    Uncastable {
        /// The table's column.
        column: String,
        /// The batch's type.
        from: DataType,
        /// The column's type.
        to: DataType,
        /// Arrow's reason, when it gave one.
        why: Option<String>,
    },
    /// [`Casts::Lossless`]: a value the cast would change.
    Inexact {
        /// The table's column.
        column: String,
        /// The value as given.
        value: String,
        /// What the cast made of it.
        became: String,
        /// The column's type.
        to: DataType,
    },
    /// A null in a column that takes none ([`Casts::Lossless`], [`Casts::Arrow`]).
    Null {
        /// The table's column.
        column: String,
    },
    /// Arrow refused the batch it was given back (a bug, not the input).
    Arrow(String),
}

impl std::fmt::Display for ConformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConformError::ExtraColumn { name } => {
                write!(f, "the data has a column {name} the table does not")
            }
            ConformError::MissingColumn { name } => write!(f, "the data has no column {name} (not nullable)"),
            ConformError::ColumnCount { given, table } => {
                write!(f, "{given} values given, the table has {table} columns")
            }
            ConformError::Uncastable { column, from, to, why } => {
                write!(f, "column {column} is {to} in the table, {from} in the data")?;
                why.as_ref().map_or(Ok(()), |why| write!(f, ": {why}"))
            }
            ConformError::Inexact { column, value, became, to } => {
                write!(f, "column {column} ({to}) cannot hold {value} exactly; it would become {became}")
            }
            ConformError::Null { column } => {
                write!(f, "column {column} is not nullable, and the data has a null in it")
            }
            ConformError::Arrow(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConformError {}

/// `batch` fitted to `target` under `casts`, matching columns `columns`:
/// the rows that fit, under the table's schema, and (with
/// [`Casts::Parse`]) the rows left out.
pub fn conform(
    batch: &RecordBatch,
    target: &SchemaRef,
    columns: Columns,
    casts: Casts,
) -> Result<(RecordBatch, Vec<BadRow>), ConformError> {
    let sources = sources(batch, target, columns)?;
    let n = batch.num_rows();
    let mut bad: Vec<Option<BadRow>> = Vec::new();
    let mut mark = |row: usize, column: &str, problem: RowProblem| {
        if bad.is_empty() {
            bad = vec![None; n];
        }
        bad[row].get_or_insert(BadRow { row, column: column.to_string(), problem });
    };
    let mut arrays = Vec::with_capacity(target.fields().len());
    for (field, source) in target.fields().iter().zip(sources) {
        let name = field.name();
        let Some(input) = source.map(|i| batch.column(i)) else {
            arrays.push(new_null_array(field.data_type(), n));
            continue;
        };
        let out = if input.data_type() == field.data_type() {
            input.clone()
        } else {
            let uncastable = |why: Option<String>| ConformError::Uncastable {
                column: name.clone(),
                from: input.data_type().clone(),
                to: field.data_type().clone(),
                why,
            };
            match casts {
                Casts::Lossless => lossless(input, field, uncastable)?,
                Casts::Parse => parsed(input, field, &mut mark).map_err(|e| uncastable(Some(e)))?,
                Casts::Arrow => cast_with_options(input, field.data_type(), &CastOptions::default())
                    .map_err(|e| uncastable(Some(e.to_string())))?,
            }
        };
        if !field.is_nullable() && out.null_count() > 0 {
            if casts != Casts::Parse {
                return Err(ConformError::Null { column: name.clone() });
            }
            for i in (0..n).filter(|&i| out.is_null(i)) {
                mark(i, name, RowProblem::Null);
            }
        }
        arrays.push(out);
    }
    let bad: Vec<BadRow> = bad.into_iter().flatten().collect();
    if !bad.is_empty() {
        let mut keep = vec![true; n];
        for b in &bad {
            keep[b.row] = false;
        }
        let keep = BooleanArray::from(keep);
        arrays = arrays
            .iter()
            .map(|a| arrow_select::filter::filter(a.as_ref(), &keep))
            .collect::<Result<_, _>>()
            .map_err(|e| ConformError::Arrow(e.to_string()))?;
    }
    let out = RecordBatch::try_new(target.clone(), arrays).map_err(|e| ConformError::Arrow(e.to_string()))?;
    Ok((out, bad))
}

/// [`Casts::Lossless`] of one column: an error unless every value survives.
fn lossless(
    input: &ArrayRef,
    field: &Field,
    uncastable: impl Fn(Option<String>) -> ConformError,
) -> Result<ArrayRef, ConformError> {
    if !lossless_kind(input.data_type(), field.data_type()) {
        return Err(uncastable(None));
    }
    let options = CastOptions { safe: false, ..CastOptions::default() };
    let out =
        cast_with_options(input, field.data_type(), &options).map_err(|e| uncastable(Some(e.to_string())))?;
    if let Some(i) = changed(input, &out).map_err(|e| ConformError::Arrow(e.to_string()))?.first() {
        return Err(ConformError::Inexact {
            column: field.name().clone(),
            value: shown(input, *i),
            became: shown(&out, *i),
            to: field.data_type().clone(),
        });
    }
    Ok(out)
}

/// [`Casts::Parse`] of one column: each value that does not parse, or
/// would change, `mark`ed as its row's problem.
fn parsed(
    input: &ArrayRef,
    field: &Field,
    mark: &mut impl FnMut(usize, &str, RowProblem),
) -> Result<ArrayRef, String> {
    let options = CastOptions { safe: true, ..CastOptions::default() };
    let out = cast_with_options(input, field.data_type(), &options).map_err(|e| e.to_string())?;
    let name = field.name();
    let input_nulls = input.logical_nulls();
    let was_null = |i: usize| input_nulls.as_ref().is_some_and(|nulls| nulls.is_null(i));
    for i in (0..input.len()).filter(|&i| !was_null(i) && out.is_null(i)) {
        mark(i, name, RowProblem::NotA { value: shown(input, i), data_type: field.data_type().clone() });
    }
    let text = matches!(input.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    // A float narrowed to a narrower float is the table's choice, not a
    // value that does not fit; text that parsed is what it said.
    let floats = input.data_type().is_floating() && field.data_type().is_floating();
    if !text && !floats {
        for i in changed(input, &out).map_err(|e| e.to_string())? {
            mark(
                i,
                name,
                RowProblem::Inexact { value: shown(input, i), data_type: field.data_type().clone() },
            );
        }
    }
    Ok(out)
}

/// For each table column, the batch column it takes its values from.
fn sources(
    batch: &RecordBatch,
    target: &SchemaRef,
    columns: Columns,
) -> Result<Vec<Option<usize>>, ConformError> {
    let input = batch.schema();
    match columns {
        Columns::ByPosition => {
            if input.fields().len() != target.fields().len() {
                return Err(ConformError::ColumnCount {
                    given: input.fields().len(),
                    table: target.fields().len(),
                });
            }
            Ok((0..target.fields().len()).map(Some).collect())
        }
        Columns::ByName => {
            if let Some(extra) = input.fields().iter().find(|f| target.index_of(f.name()).is_err()) {
                return Err(ConformError::ExtraColumn { name: extra.name().clone() });
            }
            target
                .fields()
                .iter()
                .map(|field| match input.index_of(field.name()) {
                    Ok(i) => Ok(Some(i)),
                    Err(_) if field.is_nullable() => Ok(None),
                    Err(_) => Err(ConformError::MissingColumn { name: field.name().clone() }),
                })
                .collect()
        }
    }
}

/// Whether [`Casts::Lossless`] may cast `from` into `to`: one kind, and a
/// cast Arrow has.
fn lossless_kind(from: &DataType, to: &DataType) -> bool {
    use DataType as D;
    if from == to || matches!(from, D::Null) {
        return true;
    }
    if let D::Dictionary(_, values) = from {
        return lossless_kind(values, to);
    }
    let strings = |t: &DataType| matches!(t, D::Utf8 | D::LargeUtf8 | D::Utf8View);
    let binaries = |t: &DataType| matches!(t, D::Binary | D::LargeBinary | D::BinaryView);
    let ok = (strings(from) && strings(to))
        || (binaries(from) && binaries(to))
        || (from.is_integer() && (to.is_integer() || to.is_floating()))
        || (from.is_floating() && to.is_floating())
        || (matches!(from, D::Timestamp(..)) && matches!(to, D::Timestamp(..)))
        || (matches!(from, D::Date32 | D::Date64) && matches!(to, D::Date32 | D::Date64))
        || (matches!(from, D::Decimal128(..) | D::Decimal256(..))
            && matches!(to, D::Decimal128(..) | D::Decimal256(..)));
    ok && can_cast_types(from, to)
}

/// Rows whose value `out` (the cast of `input`) changed: cast back, they
/// differ from the input (a NaN counts as itself). Text, binary,
/// dictionaries and nulls keep their values in every cast this module
/// makes; nothing is compared for them.
fn changed(input: &ArrayRef, out: &ArrayRef) -> Result<Vec<usize>, arrow_schema::ArrowError> {
    use DataType as D;
    let keeps = matches!(
        input.data_type(),
        D::Utf8
            | D::LargeUtf8
            | D::Utf8View
            | D::Binary
            | D::LargeBinary
            | D::BinaryView
            | D::Dictionary(..)
            | D::Null
    );
    if keeps || input.data_type() == out.data_type() {
        return Ok(Vec::new());
    }
    let Ok(back) = cast_with_options(out, input.data_type(), &CastOptions::default()) else {
        return Ok(Vec::new());
    };
    // Whole arrays first; row by row only when they differ.
    if back.to_data() == input.to_data() {
        return Ok(Vec::new());
    }
    let differs = arrow_ord::cmp::distinct(&back, input)?;
    Ok((0..input.len())
        .filter(|&i| {
            differs.is_valid(i)
                && differs.value(i)
                && back.is_valid(i)
                && input.is_valid(i)
                && !(shown(input, i).contains("NaN") && shown(&back, i).contains("NaN"))
        })
        .collect())
}

/// Row `i` of `array` as Arrow displays it.
fn shown(array: &ArrayRef, i: usize) -> String {
    ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
        .map_or_else(|_| "?".to_string(), |f| f.value(i).to_string())
}

#[cfg(test)]
mod tests;
