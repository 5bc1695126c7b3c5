//! Query answers in one form for every engine, and their comparison: the
//! rows as a multiset (ties in ORDER BY may come in any order), numbers
//! equal within a relative 1e-6 plus 1e-5: DataFusion's averages of
//! decimals are decimals of scale 6, DuckDB's and SQLite's are doubles.
//! (TPC-H's own validation, clause 2.1.3.5, allows far more: 1% for
//! ratios and averages, $100 for sums.)

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt64Type,
};
use arrow_schema::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::engine::Result;

/// One value.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub enum Cell {
    Null,
    Num(f64),
    Text(String),
}

impl Cell {
    /// A value of an answer a child process printed as JSON.
    pub fn of_json(v: &serde_json::Value) -> Cell {
        match v {
            serde_json::Value::Null => Cell::Null,
            serde_json::Value::Number(n) => n.as_f64().map_or(Cell::Null, Cell::Num),
            serde_json::Value::String(s) => Cell::Text(s.clone()),
            serde_json::Value::Bool(b) => Cell::Text(b.to_string()),
            other => Cell::Text(other.to_string()),
        }
    }
}

/// The rows of an answer.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub rows: Vec<Vec<Cell>>,
}

impl Answer {
    /// The rows of Arrow batches.
    pub fn of_batches(batches: &[RecordBatch]) -> Result<Answer> {
        let mut rows = Vec::new();
        let opts = FormatOptions::default();
        for b in batches {
            let mut columns: Vec<Vec<Cell>> = Vec::with_capacity(b.num_columns());
            for c in b.columns() {
                let cells = match c.data_type() {
                    DataType::Int8 => nums(c.as_primitive::<Int8Type>().iter().map(|v| v.map(f64::from))),
                    DataType::Int16 => nums(c.as_primitive::<Int16Type>().iter().map(|v| v.map(f64::from))),
                    DataType::Int32 => nums(c.as_primitive::<Int32Type>().iter().map(|v| v.map(f64::from))),
                    DataType::Int64 => {
                        nums(c.as_primitive::<Int64Type>().iter().map(|v| v.map(|v| v as f64)))
                    }
                    DataType::UInt64 => {
                        nums(c.as_primitive::<UInt64Type>().iter().map(|v| v.map(|v| v as f64)))
                    }
                    DataType::Float32 => {
                        nums(c.as_primitive::<Float32Type>().iter().map(|v| v.map(f64::from)))
                    }
                    DataType::Float64 => nums(c.as_primitive::<Float64Type>().iter()),
                    DataType::Decimal128(_, scale) => {
                        let div = 10f64.powi(i32::from(*scale));
                        nums(c.as_primitive::<Decimal128Type>().iter().map(|v| v.map(|v| v as f64 / div)))
                    }
                    _ => {
                        let f = ArrayFormatter::try_new(c.as_ref(), &opts)?;
                        (0..c.len())
                            .map(
                                |i| {
                                    if c.is_null(i) { Cell::Null } else { Cell::Text(f.value(i).to_string()) }
                                },
                            )
                            .collect()
                    }
                };
                columns.push(cells);
            }
            for r in 0..b.num_rows() {
                rows.push(columns.iter().map(|c| c[r].clone()).collect());
            }
        }
        Ok(Answer { rows })
    }
}

use arrow_array::Array;

fn nums(values: impl Iterator<Item = Option<f64>>) -> Vec<Cell> {
    values.map(|v| v.map_or(Cell::Null, Cell::Num)).collect()
}

fn same(a: &Cell, b: &Cell) -> bool {
    match (a, b) {
        (Cell::Num(x), Cell::Num(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()) + 1e-5,
        (Cell::Num(x), Cell::Text(t)) | (Cell::Text(t), Cell::Num(x)) => {
            t.parse::<f64>().is_ok_and(|y| same(&Cell::Num(*x), &Cell::Num(y)))
        }
        _ => a == b,
    }
}

fn sorted(rows: &[Vec<Cell>]) -> Vec<Vec<Cell>> {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    rows
}

/// `Ok` when `got` holds the rows of `want`, else what differs.
pub fn compare(got: &Answer, want: &Answer) -> std::result::Result<(), String> {
    if got.rows.len() != want.rows.len() {
        return Err(format!("{} rows, the reference {}", got.rows.len(), want.rows.len()));
    }
    let (g, w) = (sorted(&got.rows), sorted(&want.rows));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.len() != b.len() || !a.iter().zip(b).all(|(x, y)| same(x, y)) {
            return Err(format!("row {i}: {a:?}, the reference {b:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_as_multisets_within_rounding() {
        let a = Answer {
            rows: vec![vec![Cell::Num(1.0), Cell::Text("x".into())], vec![Cell::Num(0.1 + 0.2), Cell::Null]],
        };
        let b = Answer {
            rows: vec![
                vec![Cell::Num(0.3), Cell::Null],
                vec![Cell::Text("1".into()), Cell::Text("x".into())],
            ],
        };
        assert_eq!(compare(&a, &b), Ok(()));
        let c = Answer {
            rows: vec![vec![Cell::Num(0.3001), Cell::Null], vec![Cell::Num(1.0), Cell::Text("x".into())]],
        };
        assert!(compare(&a, &c).is_err());
        assert!(compare(&a, &Answer::default()).is_err());
    }
}
