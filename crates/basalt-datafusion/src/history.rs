//! History in SQL, as table functions every session has:
//!
//! - `as_of('t', point)`: table `t` as of a past point — a seqno (an
//!   integer) or a time (a timestamp, or an RFC 3339 string) — queried like
//!   the table itself (filters, projections and indexes pushed into the
//!   engine's scan at that point), read-only;
//! - `history('t', key…)`: the versions of the row with that primary key
//!   the table's history window keeps, newest first (`_seqno`,
//!   `_commit_time`, `_deleted`, then the table's columns);
//! - `changes('t', since [, limit])`: the table's committed changes after
//!   seqno `since`, in commit order (`_op`, `_seqno`, `_commit_time`, then
//!   the columns).
//!
//! Each is answered by the engine (`Db::snapshot_at`, `Table::history`,
//! `Table::changes`), which refuses points its window does not hold.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Schema, TimeUnit};
use basalt::{AsOf, Db, KeyValue, OwnedKeyValue};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{DFSchema, Result, ScalarValue, plan_err};
use datafusion::datasource::{MemTable, TableProvider};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{ColumnarValue, Expr};

use crate::error::to_df;
use crate::pushdown::{exact_cast, key_value_of};
use crate::table::BasaltTable;

/// Registers `as_of`, `history` and `changes` on `ctx`.
pub(crate) fn register(ctx: &SessionContext, db: &Arc<Db>) {
    ctx.register_udtf("as_of", Arc::new(AsOfFunction { db: db.clone() }));
    ctx.register_udtf("history", Arc::new(HistoryFunction { db: db.clone() }));
    ctx.register_udtf("changes", Arc::new(ChangesFunction { db: db.clone() }));
}

#[derive(Debug)]
struct AsOfFunction {
    db: Arc<Db>,
}

#[derive(Debug)]
struct HistoryFunction {
    db: Arc<Db>,
}

#[derive(Debug)]
struct ChangesFunction {
    db: Arc<Db>,
}

/// The value of a constant argument (a literal, a cast of one, `-1`…).
fn constant(args: &TableFunctionArgs<'_, '_>, i: usize, what: &str) -> Result<ScalarValue> {
    let Some(expr) = args.exprs().get(i) else {
        return plan_err!("missing argument {}: {what}", i + 1);
    };
    if let Expr::Literal(v, _) = expr {
        return Ok(v.clone());
    }
    let physical = args.session().create_physical_expr(expr.clone(), &DFSchema::empty())?;
    let empty = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    match physical.evaluate(&empty)? {
        ColumnarValue::Scalar(v) => Ok(v),
        ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0),
    }
}

/// The table name argument.
fn table_name(args: &TableFunctionArgs<'_, '_>, function: &str) -> Result<String> {
    match constant(args, 0, "the table's name")? {
        ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => {
            Ok(s)
        }
        other => plan_err!("{function}: the first argument is the table's name as a string, not {other}"),
    }
}

/// A point: an integer is a seqno; a timestamp or a string is a time.
fn point(v: &ScalarValue) -> Result<AsOf> {
    let utc = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let time = match v {
        ScalarValue::Int8(Some(_))
        | ScalarValue::Int16(Some(_))
        | ScalarValue::Int32(Some(_))
        | ScalarValue::Int64(Some(_))
        | ScalarValue::UInt8(Some(_))
        | ScalarValue::UInt16(Some(_))
        | ScalarValue::UInt32(Some(_))
        | ScalarValue::UInt64(Some(_)) => {
            let ScalarValue::UInt64(Some(s)) = v.cast_to(&DataType::UInt64)? else {
                return plan_err!("as_of: seqno {v} is out of range");
            };
            return Ok(AsOf::Seqno(s));
        }
        ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)) | ScalarValue::LargeUtf8(Some(_)) => {
            v.cast_to(&utc)?
        }
        ScalarValue::TimestampSecond(Some(_), _)
        | ScalarValue::TimestampMillisecond(Some(_), _)
        | ScalarValue::TimestampMicrosecond(Some(_), _)
        | ScalarValue::TimestampNanosecond(Some(_), _) => v.cast_to(&utc)?,
        other => return plan_err!("as_of: a point is a seqno (an integer) or a time, not {other}"),
    };
    let ScalarValue::TimestampNanosecond(Some(ns), _) = time else {
        return plan_err!("as_of: {v} is not a time");
    };
    let d = Duration::from_nanos(ns.unsigned_abs());
    Ok(AsOf::Time(if ns >= 0 { UNIX_EPOCH + d } else { UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH) }))
}

impl TableFunctionImpl for AsOfFunction {
    fn call_with_args(&self, args: TableFunctionArgs<'_, '_>) -> Result<Arc<dyn TableProvider>> {
        let name = table_name(&args, "as_of")?;
        if args.exprs().len() != 2 {
            return plan_err!(
                "as_of takes a table's name and a point: as_of('t', 42) or as_of('t', '2026-11-29T10:00:00Z')"
            );
        }
        let at = point(&constant(&args, 1, "a seqno or a time")?)?;
        // Refused here, at planning, for a point no commit time reaches;
        // a window that no longer holds it is refused by the scan.
        self.db.snapshot_at(at).map_err(to_df)?;
        Ok(Arc::new(BasaltTable::try_new(self.db.clone(), &name).map_err(to_df)?.as_of(at)))
    }
}

impl TableFunctionImpl for HistoryFunction {
    fn call_with_args(&self, args: TableFunctionArgs<'_, '_>) -> Result<Arc<dyn TableProvider>> {
        let name = table_name(&args, "history")?;
        let table = self.db.table(&name).map_err(to_df)?;
        let schema = table.schema();
        let key_columns = table.primary_key();
        if args.exprs().len() != key_columns.len() + 1 {
            return plan_err!(
                "history('{name}', …) takes the table's name and one value per primary key column ({})",
                key_columns.join(", ")
            );
        }
        let mut key: Vec<OwnedKeyValue> = Vec::with_capacity(key_columns.len());
        for (i, column) in key_columns.iter().enumerate() {
            let v = constant(&args, i + 1, column)?;
            let field = schema.field_with_name(column)?;
            let Some(value) = exact_cast(&v, field.data_type()).as_ref().and_then(key_value_of) else {
                return plan_err!("history('{name}', …): {v} is not a value of key column {column}");
            };
            key.push(value);
        }
        let borrowed: Vec<KeyValue<'_>> = key.iter().map(OwnedKeyValue::as_value).collect();
        let rows = table.history(&borrowed, basalt::HistoryOptions::default()).map_err(to_df)?;
        Ok(Arc::new(MemTable::try_new(rows.schema(), vec![vec![rows]])?))
    }
}

impl TableFunctionImpl for ChangesFunction {
    fn call_with_args(&self, args: TableFunctionArgs<'_, '_>) -> Result<Arc<dyn TableProvider>> {
        let name = table_name(&args, "changes")?;
        let count = |i: usize, what: &str| -> Result<Option<u64>> {
            if args.exprs().len() <= i {
                return Ok(None);
            }
            let Ok(ScalarValue::UInt64(Some(n))) = constant(&args, i, what)?.cast_to(&DataType::UInt64)
            else {
                return plan_err!("changes('{name}', since, limit): {what} is a non-negative integer");
            };
            Ok(Some(n))
        };
        if !(2..=3).contains(&args.exprs().len()) {
            return plan_err!("changes takes a table's name, a seqno and an optional limit: changes('t', 0)");
        }
        let since = count(1, "since")?.unwrap_or(0);
        let limit = count(2, "limit")?.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let table = self.db.table(&name).map_err(to_df)?;
        let rows = table.changes(since, limit).map_err(to_df)?;
        Ok(Arc::new(MemTable::try_new(rows.schema(), vec![vec![rows]])?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_seqnos_or_times() {
        assert_eq!(point(&ScalarValue::Int64(Some(42))).expect("seqno"), AsOf::Seqno(42));
        assert!(point(&ScalarValue::Int64(Some(-1))).is_err());
        let t = point(&ScalarValue::Utf8(Some("2026-11-29T10:00:00Z".into()))).expect("time");
        assert_eq!(t, AsOf::Time(UNIX_EPOCH + Duration::from_hours(498_874)));
        let ms = ScalarValue::TimestampMillisecond(Some(1_795_946_400_000), Some("UTC".into()));
        assert_eq!(point(&ms).expect("timestamp"), t);
        assert!(point(&ScalarValue::Boolean(Some(true))).is_err());
    }
}
