//! The oracle of the table model tests: primary keys ordered as the key
//! codec documents (`docs/key-encoding.md`: `-0.0 == 0.0`, every NaN one key
//! after `+inf`, strings and bytes bytewise), written independently of the
//! codec; key ranges of (prefix) tuples as `ScanOptions::range` documents
//! them; and the answer of a scan computed with Arrow's own comparison and
//! filter kernels over the oracle's rows.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Scalar};
use arrow_schema::DataType;
use basalt::CmpOp;

use super::schema_gen::{Cell, TableSpec, array_of, batch_of, rows_of};

/// A primary key in the engine's key order.
#[derive(Debug, Clone)]
pub struct OracleKey(pub Vec<Cell>);

impl Ord for OracleKey {
    fn cmp(&self, other: &Self) -> Ordering {
        debug_assert_eq!(self.0.len(), other.0.len(), "keys of one table have one arity");
        prefix_cmp(&self.0, &other.0)
    }
}

impl PartialOrd for OracleKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for OracleKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OracleKey {}

/// `-0.0` as `0.0`, every NaN as the positive quiet NaN (after `+inf` in
/// `total_cmp`).
pub fn canonical(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// The key order of one part: floats canonical then total order, strings
/// and bytes bytewise, the rest by value.
pub fn part_cmp(a: &Cell, b: &Cell) -> Ordering {
    match (a, b) {
        (Cell::F32(x), Cell::F32(y)) => {
            canonical(f64::from(f32::from_bits(*x))).total_cmp(&canonical(f64::from(f32::from_bits(*y))))
        }
        (Cell::F64(x), Cell::F64(y)) => {
            canonical(f64::from_bits(*x)).total_cmp(&canonical(f64::from_bits(*y)))
        }
        _ => a.cmp(b),
    }
}

/// Compares a key with a bound tuple that may be a prefix of it: only the
/// bound's parts count, so every key starting with the prefix is `Equal`.
pub fn prefix_cmp(key: &[Cell], bound: &[Cell]) -> Ordering {
    key.iter().zip(bound).map(|(a, b)| part_cmp(a, b)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}

pub type Rows = BTreeMap<OracleKey, Vec<Cell>>;
pub type CellRange = (Bound<Vec<Cell>>, Bound<Vec<Cell>>);
/// Whether `key` is in a range of (prefix) tuples, as `ScanOptions::range`
/// documents: `Included(prefix)` as the upper bound takes every key
/// starting with it, `Excluded(prefix)` as the lower bound skips them all.
pub fn in_range(key: &[Cell], (lo, hi): &CellRange) -> bool {
    let above = match lo {
        Bound::Unbounded => true,
        Bound::Included(b) => prefix_cmp(key, b).is_ge(),
        Bound::Excluded(b) => prefix_cmp(key, b).is_gt(),
    };
    let below = match hi {
        Bound::Unbounded => true,
        Bound::Included(b) => prefix_cmp(key, b).is_le(),
        Bound::Excluded(b) => prefix_cmp(key, b).is_lt(),
    };
    above && below
}

/// `column op literal` on schema indices and cells.
#[derive(Debug, Clone)]
pub struct PredSpec {
    pub column: usize,
    pub op: CmpOp,
    pub literal: Cell,
}

pub const OPS: [CmpOp; 8] = [
    CmpOp::Eq,
    CmpOp::NotEq,
    CmpOp::Lt,
    CmpOp::LtEq,
    CmpOp::Gt,
    CmpOp::GtEq,
    CmpOp::IsNull,
    CmpOp::IsNotNull,
];

/// What one scan asks.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// Key range, as tuples of key cells (possibly prefixes).
    pub range: CellRange,
    /// Predicates, all of which must hold.
    pub preds: Option<Vec<PredSpec>>,
    /// Schema indices of the columns to return.
    pub projection: Option<Vec<usize>>,
    /// Rows per batch at most (0: the engine's default).
    pub batch_size: usize,
}

/// `array` with its float zeros unsigned: SQL (and DataFusion, which does
/// this before the same kernels) holds -0.0 equal to 0.0, where Arrow's
/// kernels order floats totally.
fn sql_zeros(array: ArrayRef) -> ArrayRef {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    match array.data_type() {
        DataType::Float32 => Arc::new(
            array.as_primitive::<Float32Type>().unary::<_, Float32Type>(|v| if v == 0.0 { 0.0 } else { v }),
        ),
        DataType::Float64 => Arc::new(
            array.as_primitive::<Float64Type>().unary::<_, Float64Type>(|v| if v == 0.0 { 0.0 } else { v }),
        ),
        _ => array,
    }
}

/// The rows SQL's comparison selects (Arrow's kernels, with -0.0 equal to
/// 0.0): nulls in a comparison result select nothing.
pub fn arrow_mask(column: &ArrayRef, p: &PredSpec) -> Vec<bool> {
    use arrow_ord::cmp;
    let n = column.len();
    let column = &sql_zeros(column.clone());
    let literal = Scalar::new(sql_zeros(array_of(column.data_type(), &[&p.literal])));
    let result = match p.op {
        CmpOp::IsNull => return (0..n).map(|i| column.is_null(i)).collect(),
        CmpOp::IsNotNull => return (0..n).map(|i| column.is_valid(i)).collect(),
        CmpOp::Eq => cmp::eq(column, &literal),
        CmpOp::NotEq => cmp::neq(column, &literal),
        CmpOp::Lt => cmp::lt(column, &literal),
        CmpOp::LtEq => cmp::lt_eq(column, &literal),
        CmpOp::Gt => cmp::gt(column, &literal),
        CmpOp::GtEq => cmp::gt_eq(column, &literal),
    };
    let result = result.expect("Arrow compares a column with a literal of its type");
    (0..n).map(|i| result.is_valid(i) && result.value(i)).collect()
}

/// What the scan must return: the oracle's rows in range, in key order,
/// filtered by Arrow's kernels, projected.
pub fn expected_scan(spec: &TableSpec, rows: &Rows, plan: &ScanPlan) -> Vec<Vec<Cell>> {
    let in_range: Vec<&Vec<Cell>> =
        rows.iter().filter(|(k, _)| in_range(&k.0, &plan.range)).map(|(_, r)| r).collect();
    let batch = batch_of(&spec.schema, &in_range);
    let mut keep = vec![true; batch.num_rows()];
    for p in plan.preds.iter().flatten() {
        for (k, m) in keep.iter_mut().zip(arrow_mask(batch.column(p.column), p)) {
            *k &= m;
        }
    }
    let filtered = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))
        .expect("Arrow filters the oracle's rows");
    let projected = match &plan.projection {
        Some(p) => filtered.project(p).expect("projection of the oracle's rows"),
        None => filtered,
    };
    rows_of(&projected)
}
