//! Python's conditions as the engine's: `where=` tuples as a row filter,
//! and `eq=`, `prefix=` or `range=` of an index as an index predicate,
//! each value converted to its column's type.

use std::ops::Bound as Edge;

use arrow_array::new_null_array;
use basalt::{CmpOp, Filter, IndexPredicate, KeyValue, OwnedKeyValue, Predicate};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{self, type_name};
use crate::errors::{self, IntoPy};

/// A filter from `[(column, op, value), …]`, all of which must hold.
pub(crate) fn filter(
    py: Python<'_>,
    table: &basalt::Table,
    conditions: &Bound<'_, PyAny>,
) -> PyResult<Filter> {
    let schema = table.schema();
    let mut predicates = Vec::new();
    for condition in conditions.try_iter()? {
        let condition = condition?;
        let tuple = condition.cast::<PyTuple>().map_err(|_| {
            errors::wrong_type(format!(
                "where= takes (column, op, value) tuples, not {}",
                type_name(&condition)
            ))
        })?;
        if tuple.len() != 3 && tuple.len() != 2 {
            return Err(errors::wrong_type(format!(
                "where= takes (column, op, value) tuples (or (column, 'is null')), not {tuple}"
            )));
        }
        let column: String = tuple.get_item(0)?.extract()?;
        let op: String = tuple.get_item(1)?.extract()?;
        let op = match op.to_ascii_lowercase().as_str() {
            "=" | "==" => CmpOp::Eq,
            "!=" | "<>" => CmpOp::NotEq,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::LtEq,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::GtEq,
            "is null" => CmpOp::IsNull,
            "is not null" => CmpOp::IsNotNull,
            other => {
                return Err(errors::invalid(
                    py,
                    format!("{other:?} is not a comparison: use = != < <= > >= 'is null' 'is not null'"),
                ));
            }
        };
        let field = schema.field_with_name(&column).map_err(|_| {
            errors::invalid(py, format!("where=: table {} has no column {column}", table.name()))
        })?;
        let literal = match op {
            CmpOp::IsNull | CmpOp::IsNotNull => new_null_array(field.data_type(), 1),
            _ => {
                let value = tuple
                    .get_item(2)
                    .map_err(|_| errors::wrong_type(format!("where=: ({column}, {op:?}) needs a value")))?;
                if value.is_none() {
                    return Err(errors::invalid(
                        py,
                        format!("where=: comparing {column} with None is never true; use 'is null'"),
                    ));
                }
                convert::array_of(std::slice::from_ref(&value), field)?
            }
        };
        predicates.push(Predicate::new(column, op, literal));
    }
    Ok(Filter::all(predicates))
}

/// Index values (a value or a tuple; `None` is null) for the leading
/// columns of index `name`.
fn index_values(
    py: Python<'_>,
    table: &basalt::Table,
    name: &str,
    values: &Bound<'_, PyAny>,
) -> PyResult<Vec<Option<OwnedKeyValue>>> {
    let info = table
        .indexes()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| errors::invalid(py, format!("table {} has no index {name}", table.name())))?;
    let schema = table.schema();
    let parts: Vec<Bound<'_, PyAny>> = match values.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![values.clone()],
    };
    if parts.len() > info.columns.len() {
        return Err(errors::invalid(
            py,
            format!("index {name} has {} column(s), {} values given", info.columns.len(), parts.len()),
        ));
    }
    parts
        .iter()
        .zip(&info.columns)
        .map(|(part, column)| {
            if part.is_none() {
                return Ok(None);
            }
            let field = schema
                .field_with_name(column)
                .map_err(|_| errors::invalid(py, format!("no column {column}")))?;
            let array = convert::array_of(std::slice::from_ref(part), field)?;
            OwnedKeyValue::from_array(array.as_ref(), 0).py_err(py).map(Some)
        })
        .collect()
}

/// The index predicate of `eq=`, `prefix=` or `range=` (exactly one).
pub(crate) fn index_predicate(
    py: Python<'_>,
    table: &basalt::Table,
    index: &str,
    eq: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
    range: Option<&Bound<'_, PyAny>>,
) -> PyResult<OwnedPredicate> {
    match (eq, prefix, range) {
        (Some(v), None, None) => Ok(OwnedPredicate::Eq(index_values(py, table, index, v)?)),
        (None, Some(v), None) => Ok(OwnedPredicate::Prefix(index_values(py, table, index, v)?)),
        (None, None, Some(r)) => {
            let (low, high): (Bound<'_, PyAny>, Bound<'_, PyAny>) = r.extract().map_err(|_| {
                errors::wrong_type("range= takes a (low, high) pair; either may be None".to_string())
            })?;
            let low = if low.is_none() {
                Edge::Unbounded
            } else {
                Edge::Included(index_values(py, table, index, &low)?)
            };
            let high = if high.is_none() {
                Edge::Unbounded
            } else {
                Edge::Excluded(index_values(py, table, index, &high)?)
            };
            Ok(OwnedPredicate::Range(low, high))
        }
        _ => Err(errors::invalid(py, "give exactly one of eq=, prefix= or range=".to_string())),
    }
}

/// A predicate with owned values.
pub(crate) enum OwnedPredicate {
    Eq(Vec<Option<OwnedKeyValue>>),
    Prefix(Vec<Option<OwnedKeyValue>>),
    Range(Edge<Vec<Option<OwnedKeyValue>>>, Edge<Vec<Option<OwnedKeyValue>>>),
}

fn borrow_values(values: &[Option<OwnedKeyValue>]) -> Vec<Option<KeyValue<'_>>> {
    values.iter().map(|v| v.as_ref().map(OwnedKeyValue::as_value)).collect()
}

impl OwnedPredicate {
    pub(crate) fn borrowed(&self) -> IndexPredicate<'_> {
        fn edge(e: &Edge<Vec<Option<OwnedKeyValue>>>) -> Edge<Vec<Option<KeyValue<'_>>>> {
            match e {
                Edge::Included(v) => Edge::Included(borrow_values(v)),
                Edge::Excluded(v) => Edge::Excluded(borrow_values(v)),
                Edge::Unbounded => Edge::Unbounded,
            }
        }
        match self {
            OwnedPredicate::Eq(v) => IndexPredicate::Eq(borrow_values(v)),
            OwnedPredicate::Prefix(v) => IndexPredicate::Prefix(borrow_values(v)),
            OwnedPredicate::Range(low, high) => IndexPredicate::Range(edge(low), edge(high)),
        }
    }
}
