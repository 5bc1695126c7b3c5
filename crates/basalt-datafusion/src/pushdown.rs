//! From DataFusion filter expressions to what a Basalt scan takes: the
//! primary-key range they bound, and the `column op literal` predicates
//! the engine evaluates itself (with its zone maps, and an index when one
//! answers them). A filter is pushed down only when every row it keeps is
//! exactly a row the engine's predicates keep: Arrow's comparison kernels
//! evaluate both, so the answer is DataFusion's own.

use std::cmp::Ordering;
use std::ops::Bound;

use arrow_schema::{DataType, Schema};
use basalt::{CmpOp, Filter, KeyValue, OwnedKeyValue, OwnedKeyValueRange, Predicate};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

/// What a scan reads, derived from the filters pushed into it.
#[derive(Debug, Clone)]
pub(crate) struct Pushdown {
    /// The primary-key range every kept row lies in.
    pub range: OwnedKeyValueRange,
    /// Predicates the engine applies; all must hold.
    pub predicates: Vec<Predicate>,
}

impl Pushdown {
    /// The engine filter, if any predicate was pushed.
    pub fn filter(&self) -> Option<Filter> {
        (!self.predicates.is_empty()).then(|| Filter::all(self.predicates.clone()))
    }
}

/// The engine predicates equal to `expr`, or `None` when the engine cannot
/// evaluate it exactly (DataFusion then filters the rows itself).
pub(crate) fn predicates_of(schema: &Schema, expr: &Expr) -> Option<Vec<Predicate>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            let mut all = predicates_of(schema, left)?;
            all.extend(predicates_of(schema, right)?);
            Some(all)
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, literal) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, cmp_op(*op)?, v),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, flipped(cmp_op(*op)?), v),
                _ => return None,
            };
            Some(vec![predicate(schema, &column.name, op, literal)?])
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let (Expr::Column(c), Expr::Literal(lo, _), Expr::Literal(hi, _)) =
                (expr.as_ref(), low.as_ref(), high.as_ref())
            else {
                return None;
            };
            Some(vec![
                predicate(schema, &c.name, CmpOp::GtEq, lo)?,
                predicate(schema, &c.name, CmpOp::LtEq, hi)?,
            ])
        }
        // A boolean column as a filter: `bo` is `bo = true`, `NOT bo` is
        // `bo = false` (both drop nulls, as SQL's WHERE does). DataFusion's
        // simplifier turns `bo = false` (from `bo IN (false)`) into `NOT bo`
        // after the provider accepted it.
        Expr::Column(c) => Some(vec![boolean_is(schema, &c.name, true)?]),
        Expr::Not(inner) => {
            let Expr::Column(c) = inner.as_ref() else { return None };
            Some(vec![boolean_is(schema, &c.name, false)?])
        }
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
            let Expr::Column(c) = inner.as_ref() else { return None };
            let field = schema.field_with_name(&c.name).ok()?;
            let op = if matches!(expr, Expr::IsNull(_)) { CmpOp::IsNull } else { CmpOp::IsNotNull };
            let literal = ScalarValue::try_from(field.data_type()).ok()?.to_array().ok()?;
            let p = Predicate::new(c.name.clone(), op, literal);
            Filter::all(vec![p.clone()]).check(schema).ok().map(|()| vec![p])
        }
        _ => None,
    }
}

/// `column op literal` with the literal cast, without loss, to the
/// column's type; `None` for a null literal, a lossy cast or a column the
/// engine's filters do not compare.
fn predicate(schema: &Schema, column: &str, op: CmpOp, literal: &ScalarValue) -> Option<Predicate> {
    let field = schema.field_with_name(column).ok()?;
    let value = exact_cast(literal, field.data_type())?;
    let p = Predicate::new(column.to_string(), op, value.to_array().ok()?);
    Filter::all(vec![p.clone()]).check(schema).ok().map(|()| p)
}

/// `column = value` for a boolean column; `None` for a column of another type.
fn boolean_is(schema: &Schema, column: &str, value: bool) -> Option<Predicate> {
    let field = schema.field_with_name(column).ok()?;
    (field.data_type() == &DataType::Boolean)
        .then(|| predicate(schema, column, CmpOp::Eq, &ScalarValue::Boolean(Some(value))))
        .flatten()
}

/// `v` as a value of `to`, when the cast loses nothing (casting back gives
/// `v` again) and the value is not null.
pub(crate) fn exact_cast(v: &ScalarValue, to: &DataType) -> Option<ScalarValue> {
    if v.is_null() {
        return None;
    }
    if v.data_type() == *to {
        return Some(v.clone());
    }
    let cast = v.cast_to(to).ok()?;
    (!cast.is_null() && cast.cast_to(&v.data_type()).ok()? == *v).then_some(cast)
}

fn cmp_op(op: Operator) -> Option<CmpOp> {
    Some(match op {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

/// `literal op column` as `column op' literal`.
fn flipped(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::LtEq => CmpOp::GtEq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::GtEq => CmpOp::LtEq,
        other => other,
    }
}

/// The pushdown of `filters` (each already accepted by [`predicates_of`])
/// for a table whose primary key is `primary_key` (column indexes).
pub(crate) fn pushdown(schema: &Schema, primary_key: &[usize], filters: &[Expr]) -> Pushdown {
    let predicates: Vec<Predicate> =
        filters.iter().filter_map(|f| predicates_of(schema, f)).flatten().collect();
    let range = key_range(schema, primary_key, &predicates);
    Pushdown { range, predicates }
}

/// One bound of a key column: its value, and whether it is included.
type ColumnBound = (ScalarValue, OwnedKeyValue, bool);

/// The narrowest key range the predicates imply: equalities on the leading
/// key columns make a prefix, and comparisons on the next column bound it.
/// Float key columns bound nothing (the key codec orders NaN and -0.0 its
/// own way); the engine's filter still applies their predicates.
fn key_range(schema: &Schema, primary_key: &[usize], predicates: &[Predicate]) -> OwnedKeyValueRange {
    let mut prefix: Vec<OwnedKeyValue> = Vec::new();
    for &column in primary_key {
        let field = schema.field(column);
        let mut eq: Option<OwnedKeyValue> = None;
        let (mut lower, mut upper): (Option<ColumnBound>, Option<ColumnBound>) = (None, None);
        for p in predicates.iter().filter(|p| &p.column == field.name()) {
            let Ok(scalar) = ScalarValue::try_from_array(&p.literal, 0) else { continue };
            let Some(key) = key_value_of(&scalar) else { continue };
            match p.op {
                CmpOp::Eq => eq = Some(key),
                CmpOp::Gt | CmpOp::GtEq => {
                    tighten(&mut lower, (scalar, key, p.op == CmpOp::GtEq), Ordering::Greater);
                }
                CmpOp::Lt | CmpOp::LtEq => {
                    tighten(&mut upper, (scalar, key, p.op == CmpOp::LtEq), Ordering::Less);
                }
                _ => {}
            }
        }
        if let Some(key) = eq {
            prefix.push(key);
            continue;
        }
        let with = |b: Option<ColumnBound>, outer: Bound<Vec<OwnedKeyValue>>| match b {
            None => outer,
            Some((_, key, included)) => {
                let mut tuple = prefix.clone();
                tuple.push(key);
                if included { Bound::Included(tuple) } else { Bound::Excluded(tuple) }
            }
        };
        let whole = prefix_bound(&prefix);
        return (with(lower, whole.clone()), with(upper, whole));
    }
    let whole = prefix_bound(&prefix);
    (whole.clone(), whole)
}

/// The bound that keeps every key starting with `prefix` (none: unbounded).
fn prefix_bound(prefix: &[OwnedKeyValue]) -> Bound<Vec<OwnedKeyValue>> {
    if prefix.is_empty() { Bound::Unbounded } else { Bound::Included(prefix.to_vec()) }
}

/// Keeps the tighter of two bounds: `toward` is the direction a tighter
/// value lies in (greater for a lower bound); at equal values an excluded
/// bound is the tighter.
fn tighten(slot: &mut Option<ColumnBound>, new: ColumnBound, toward: Ordering) {
    let replace = match slot {
        None => true,
        Some(old) => match new.0.partial_cmp(&old.0) {
            Some(o) if o == toward => true,
            Some(Ordering::Equal) => old.2 && !new.2,
            _ => false,
        },
    };
    if replace {
        *slot = Some(new);
    }
}

/// The key value of a non-null scalar of a type the key codec orders as
/// SQL does (not floats: see [`key_range`]).
pub(crate) fn key_value_of(v: &ScalarValue) -> Option<OwnedKeyValue> {
    Some(match v {
        ScalarValue::Boolean(Some(b)) => OwnedKeyValue::Bool(*b),
        ScalarValue::Int8(Some(i)) => OwnedKeyValue::I8(*i),
        ScalarValue::Int16(Some(i)) => OwnedKeyValue::I16(*i),
        ScalarValue::Int32(Some(i)) | ScalarValue::Date32(Some(i)) => OwnedKeyValue::I32(*i),
        ScalarValue::Int64(Some(i))
        | ScalarValue::Date64(Some(i))
        | ScalarValue::TimestampSecond(Some(i), _)
        | ScalarValue::TimestampMillisecond(Some(i), _)
        | ScalarValue::TimestampMicrosecond(Some(i), _)
        | ScalarValue::TimestampNanosecond(Some(i), _) => OwnedKeyValue::I64(*i),
        ScalarValue::UInt8(Some(i)) => OwnedKeyValue::U8(*i),
        ScalarValue::UInt16(Some(i)) => OwnedKeyValue::U16(*i),
        ScalarValue::UInt32(Some(i)) => OwnedKeyValue::U32(*i),
        ScalarValue::UInt64(Some(i)) => OwnedKeyValue::U64(*i),
        ScalarValue::Utf8(Some(s)) => OwnedKeyValue::Str(s.clone()),
        ScalarValue::Binary(Some(b)) => OwnedKeyValue::Bytes(b.clone()),
        _ => return None,
    })
}

/// Borrowed key values of an owned range, as `ScanOptions` takes them.
pub(crate) fn borrowed(range: &OwnedKeyValueRange) -> basalt::KeyValueRange<'_> {
    (borrowed_bound(&range.0), borrowed_bound(&range.1))
}

fn borrowed_bound(bound: &Bound<Vec<OwnedKeyValue>>) -> Bound<Vec<KeyValue<'_>>> {
    match bound {
        Bound::Included(t) => Bound::Included(t.iter().map(OwnedKeyValue::as_value).collect()),
        Bound::Excluded(t) => Bound::Excluded(t.iter().map(OwnedKeyValue::as_value).collect()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The range as text, for EXPLAIN: `[lo, hi)` with key tuples.
pub(crate) fn describe_range(range: &OwnedKeyValueRange) -> String {
    let tuple = |t: &Vec<OwnedKeyValue>| {
        let parts: Vec<String> = t.iter().map(describe_key_value).collect();
        format!("({})", parts.join(", "))
    };
    let lo = match &range.0 {
        Bound::Included(t) => format!("[{}", tuple(t)),
        Bound::Excluded(t) => format!("({}", tuple(t)),
        Bound::Unbounded => "(-inf".to_string(),
    };
    let hi = match &range.1 {
        Bound::Included(t) => format!("{}]", tuple(t)),
        Bound::Excluded(t) => format!("{})", tuple(t)),
        Bound::Unbounded => "+inf)".to_string(),
    };
    format!("{lo}, {hi}")
}

fn describe_key_value(v: &OwnedKeyValue) -> String {
    match v {
        OwnedKeyValue::Str(s) => format!("'{s}'"),
        OwnedKeyValue::Bytes(b) => {
            let hex: String = b.iter().flat_map(|x| [hex_digit(x >> 4), hex_digit(x & 15)]).collect();
            format!("x'{hex}'")
        }
        OwnedKeyValue::Bool(b) => b.to_string(),
        OwnedKeyValue::I8(i) => i.to_string(),
        OwnedKeyValue::I16(i) => i.to_string(),
        OwnedKeyValue::I32(i) => i.to_string(),
        OwnedKeyValue::I64(i) => i.to_string(),
        OwnedKeyValue::U8(i) => i.to_string(),
        OwnedKeyValue::U16(i) => i.to_string(),
        OwnedKeyValue::U32(i) => i.to_string(),
        OwnedKeyValue::U64(i) => i.to_string(),
        OwnedKeyValue::F32(f) => f.to_string(),
        OwnedKeyValue::F64(f) => f.to_string(),
    }
}

fn hex_digit(v: u8) -> char {
    char::from_digit(u32::from(v), 16).unwrap_or('?')
}

/// A predicate as text, for EXPLAIN.
pub(crate) fn describe_predicate(p: &Predicate) -> String {
    let op = match p.op {
        CmpOp::Eq => "=",
        CmpOp::NotEq => "!=",
        CmpOp::Lt => "<",
        CmpOp::LtEq => "<=",
        CmpOp::Gt => ">",
        CmpOp::GtEq => ">=",
        CmpOp::IsNull => return format!("{} IS NULL", p.column),
        CmpOp::IsNotNull => return format!("{} IS NOT NULL", p.column),
    };
    let value =
        ScalarValue::try_from_array(&p.literal, 0).map_or_else(|_| "?".to_string(), |v| v.to_string());
    format!("{} {op} {value}", p.column)
}
