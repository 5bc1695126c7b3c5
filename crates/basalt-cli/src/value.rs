//! Values typed on the command line: a string becomes a one-element
//! Arrow array of its column's type (Arrow's own casts parse it, so
//! `2013-01-01`, `2013-01-01 05:00:00`, `true` and `-1.5e3` mean what
//! they mean in a CSV file), and key values from it.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, StringArray};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType, Schema};
use basalt::{KeyValue, KeyValueRange, OwnedKeyValue, OwnedKeyValueRange};

use crate::error::{CliError, CliResult};

/// `text` as a one-element array of `data_type`; an error names the
/// column and says why.
pub fn parse(text: &str, column: &str, data_type: &DataType) -> CliResult<ArrayRef> {
    let strings: ArrayRef = Arc::new(StringArray::from(vec![text]));
    let options = CastOptions { safe: false, ..CastOptions::default() };
    let parsed = cast_with_options(&strings, data_type, &options).map_err(|e| {
        CliError::usage(format!("{text:?} is not a value of column {column} ({data_type}): {e}"))
    })?;
    if parsed.is_null(0) {
        return Err(CliError::usage(format!("{text:?} is not a value of column {column} ({data_type})")));
    }
    Ok(parsed)
}

/// The key value of row 0 of a one-element array of a key column.
pub fn key_value(array: &dyn Array) -> CliResult<OwnedKeyValue> {
    OwnedKeyValue::from_array(array, 0).map_err(|e| CliError::usage(e.to_string()))
}

/// Key values for the leading `texts.len()` columns of `columns` (a
/// primary key or an index's columns), parsed by their types.
pub fn key_values(schema: &Schema, columns: &[String], texts: &[String]) -> CliResult<Vec<OwnedKeyValue>> {
    if texts.len() > columns.len() {
        return Err(CliError::usage(format!(
            "{} values given for a key of {} columns ({})",
            texts.len(),
            columns.len(),
            columns.join(", ")
        )));
    }
    columns
        .iter()
        .zip(texts)
        .map(|(column, text)| {
            let field =
                schema.field_with_name(column).map_err(|_| CliError::usage(format!("no column {column}")))?;
            key_value(parse(text, column, field.data_type())?.as_ref())
        })
        .collect()
}

/// Key values as the engine's calls take them.
pub fn borrowed(values: &[OwnedKeyValue]) -> Vec<KeyValue<'_>> {
    values.iter().map(OwnedKeyValue::as_value).collect()
}

/// An owned key range (as `Table::split_range` gives) as a scan takes it.
pub fn borrowed_range(range: &OwnedKeyValueRange) -> KeyValueRange<'_> {
    (range.0.as_ref().map(|v| borrowed(v)), range.1.as_ref().map(|v| borrowed(v)))
}

/// Splits `a,b,c` into names, refusing empty ones.
pub fn names(list: &str) -> CliResult<Vec<String>> {
    let out: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
    if out.iter().any(String::is_empty) {
        return Err(CliError::usage(format!("{list:?} is not a comma-separated list of names")));
    }
    Ok(out)
}
