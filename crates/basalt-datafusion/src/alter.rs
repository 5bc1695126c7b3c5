//! `ALTER TABLE`: `ADD [COLUMN] [IF NOT EXISTS] c type [NULL | NOT NULL]
//! [DEFAULT expr]`, `DROP [COLUMN] [IF EXISTS] c, …` and `RENAME [COLUMN] a
//! TO b`, several in one statement applied together (the engine's
//! `Table::alter`: all or nothing); and `SET (history = '1 hour',
//! history_versions = 10)`, the table's history window (`'off'` or NULL
//! turns a bound off). Everything else is refused with the
//! reason: a column's type or nullability, and the primary key, are how
//! rows are stored, so changing them is a new table and a copy.

use arrow_array::{Array, ArrayRef};
use arrow_schema::Field;
use basalt::ColumnChange;
use datafusion::common::{Result, exec_err, not_impl_err, plan_err};
use datafusion::execution::context::SessionContext;
use datafusion::sql::sqlparser::ast::{self, AlterTableOperation, ColumnOption};

use crate::error::to_df;
use crate::names::{last_ident, normalized};
use crate::schema::database;
use crate::schema::stored_type;

/// Runs `ALTER TABLE`.
pub(crate) async fn alter_table(ctx: &SessionContext, alter: &ast::AlterTable) -> Result<()> {
    if alter.table_type.is_some() || alter.location.is_some() || alter.on_cluster.is_some() {
        return not_impl_err!("{alter}: only a plain ALTER TABLE is supported");
    }
    let name = last_ident(&alter.name)?;
    let db = database(ctx)?;
    let table = match db.table(&name) {
        Ok(table) => table,
        Err(_) if alter.if_exists => return Ok(()),
        Err(e) => return Err(to_df(e)),
    };
    let mut columns: Vec<String> = table.schema().fields().iter().map(|f| f.name().clone()).collect();
    let mut changes = Vec::new();
    let mut history = None;
    let mut ttl = None;
    for op in &alter.operations {
        match op {
            AlterTableOperation::SetOptionsParens { options } => {
                let (ttls, others): (Vec<&ast::SqlOption>, Vec<&ast::SqlOption>) = options.iter().partition(
                    |o| matches!(o, ast::SqlOption::KeyValue { key, .. } if normalized(key) == "ttl"),
                );
                ttl = time_to_live(ctx, &name, &ttls).await?.or(ttl);
                if !others.is_empty() {
                    let current =
                        history.or_else(|| table.history_info().map(|i| i.window)).unwrap_or_default();
                    history = Some(history_window(ctx, &name, current, &others).await?);
                }
            }
            AlterTableOperation::AddColumn { if_not_exists, column_def, column_position, .. } => {
                if column_position.is_some() {
                    return not_impl_err!(
                        "{op}: a column is added at the end (FIRST and AFTER are not supported)"
                    );
                }
                let column = normalized(&column_def.name);
                if columns.contains(&column) && *if_not_exists {
                    continue;
                }
                let (field, default) = new_column(ctx, &name, column_def).await?;
                columns.push(column);
                changes.push(ColumnChange::Add { field: field.into(), default });
            }
            AlterTableOperation::DropColumn { column_names, if_exists, drop_behavior, .. } => {
                if matches!(drop_behavior, Some(ast::DropBehavior::Cascade)) {
                    return not_impl_err!("{op}: CASCADE is not supported; drop the indexes on it first");
                }
                for ident in column_names {
                    let column = normalized(ident);
                    if !columns.contains(&column) && *if_exists {
                        continue;
                    }
                    columns.retain(|c| *c != column);
                    changes.push(ColumnChange::Drop { name: column });
                }
            }
            AlterTableOperation::RenameColumn { old_column_name, new_column_name } => {
                let (from, to) = (normalized(old_column_name), normalized(new_column_name));
                if let Some(c) = columns.iter_mut().find(|c| **c == from) {
                    c.clone_from(&to);
                }
                changes.push(ColumnChange::Rename { from, to });
            }
            AlterTableOperation::AlterColumn { .. }
            | AlterTableOperation::ChangeColumn { .. }
            | AlterTableOperation::ModifyColumn { .. } => {
                return not_impl_err!(
                    "{op}: a column's type, nullability and default are how its values are stored; \
                     add a new column, copy into it (UPDATE {name} SET new = CAST(old AS …)), then drop the old one"
                );
            }
            AlterTableOperation::DropPrimaryKey { .. } | AlterTableOperation::AddConstraint { .. } => {
                return not_impl_err!(
                    "{op}: rows are stored under the primary key, which cannot change; \
                     for a unique constraint, CREATE UNIQUE INDEX"
                );
            }
            other => return not_impl_err!("ALTER TABLE … {other} is not supported by Basalt"),
        }
    }
    if history.is_some_and(|w| w.is_on()) && matches!(ttl, Some(Some(_))) {
        // Refused before anything changes (set one at a time, the first
        // would stay set when the second is refused).
        return plan_err!("ALTER TABLE {name}: a history window and a time to live do not go together");
    }
    let run = move || apply(&table, &changes, history, ttl);
    // A change may flush the memtables and syncs the MANIFEST: not on an
    // async worker.
    tokio::task::spawn_blocking(run)
        .await
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
}

/// Applies an `ALTER TABLE`'s column changes, then its history window and
/// time to live, the one turned off first (the other may be refused
/// while it is on).
#[expect(clippy::option_option, reason = "no ttl option, ttl = 'off', or ttl = a duration")]
fn apply(
    table: &basalt::Table,
    changes: &[ColumnChange],
    history: Option<basalt::HistoryWindow>,
    ttl: Option<Option<std::time::Duration>>,
) -> Result<()> {
    if !changes.is_empty() {
        table.alter(changes).map_err(to_df)?;
    }
    if let Some(None) = ttl {
        table.set_ttl(None).map_err(to_df)?;
    }
    if let Some(window) = history {
        table.set_history(window).map_err(to_df)?;
    }
    match ttl {
        Some(Some(ttl)) => table.set_ttl(Some(ttl)).map_err(to_df),
        _ => Ok(()),
    }
}

/// The field and default of `ADD COLUMN`: its type as DataFusion maps SQL
/// types (view types stored as their plain forms, as `CREATE TABLE`
/// does), and its `DEFAULT` evaluated once (rows already there read that
/// value) and cast to the column's type.
async fn new_column(
    ctx: &SessionContext,
    table: &str,
    def: &ast::ColumnDef,
) -> Result<(Field, Option<ArrayRef>)> {
    let name = normalized(&def.name);
    let mut nullable = true;
    let mut default = None;
    for option in &def.options {
        match &option.option {
            ColumnOption::Null => nullable = true,
            ColumnOption::NotNull => nullable = false,
            ColumnOption::Default(expr) => default = Some(expr),
            other => {
                return not_impl_err!(
                    "ALTER TABLE {table} ADD COLUMN {name}: {other} is not supported \
                     (a new column cannot join the primary key; CREATE UNIQUE INDEX for uniqueness)"
                );
            }
        }
    }
    let data_type =
        stored_type(evaluate(ctx, &format!("CAST(NULL AS {})", def.data_type)).await?.data_type());
    let default = match default {
        None => None,
        Some(expr) => {
            let value = evaluate(ctx, &format!("CAST(({expr}) AS {})", def.data_type)).await?;
            let value = datafusion::arrow::compute::cast(&value, &data_type)?;
            if value.is_null(0) { None } else { Some(value) }
        }
    };
    if !nullable && default.is_none() {
        return plan_err!(
            "ALTER TABLE {table} ADD COLUMN {name} NOT NULL needs a DEFAULT: the rows already there need a value"
        );
    }
    Ok((Field::new(name, data_type, nullable), default))
}

/// The one value of the SQL expression `expr`, as a one-row array.
async fn evaluate(ctx: &SessionContext, expr: &str) -> Result<ArrayRef> {
    let batches = ctx.sql(&format!("SELECT {expr}")).await?.collect().await?;
    match batches.iter().find(|b| b.num_rows() > 0) {
        Some(b) if b.num_rows() == 1 => Ok(b.column(0).clone()),
        _ => exec_err!("{expr} is not one value"),
    }
}

/// The time to live the last of `options` (each `ttl = …`) sets: an
/// interval or seconds, or `'off'`/NULL for none; `None` without one.
async fn time_to_live(
    ctx: &SessionContext,
    table: &str,
    options: &[&ast::SqlOption],
) -> Result<Option<Option<std::time::Duration>>> {
    let mut ttl = None;
    for option in options {
        if let ast::SqlOption::KeyValue { key, value } = option {
            ttl = Some(if is_off(value) { None } else { Some(duration(ctx, table, key, value).await?) });
        }
    }
    Ok(ttl)
}

/// Whether an option's value turns it off: `'off'`, `off` or NULL.
fn is_off(value: &ast::Expr) -> bool {
    matches!(value, ast::Expr::Value(v) if matches!(&v.value, ast::Value::Null))
        || matches!(value, ast::Expr::Value(v) if matches!(&v.value, ast::Value::SingleQuotedString(s) if s.eq_ignore_ascii_case("off")))
        || matches!(value, ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("off"))
}

/// The history window `SET (history = …, history_versions = …)` makes of
/// `current`: `history` an interval (`'1 hour'`, `INTERVAL '30' MINUTE`)
/// or seconds, `history_versions` a count; `'off'`, NULL or 0 turns a
/// bound off. (`ttl = …`, a time to live, is taken apart.)
async fn history_window(
    ctx: &SessionContext,
    table: &str,
    current: basalt::HistoryWindow,
    options: &[&ast::SqlOption],
) -> Result<basalt::HistoryWindow> {
    let mut window = current;
    for option in options {
        let ast::SqlOption::KeyValue { key, value } = option else {
            return not_impl_err!(
                "ALTER TABLE {table} SET ({option}): only history = …, history_versions = … and ttl = …"
            );
        };
        let off = is_off(value);
        match normalized(key).as_str() {
            "history" => {
                window.keep_for = if off { None } else { Some(duration(ctx, table, key, value).await?) };
            }
            "history_versions" => {
                let n = if off {
                    0
                } else {
                    evaluate(ctx, &format!("CAST(({value}) AS BIGINT)"))
                        .await?
                        .as_any()
                        .downcast_ref::<arrow_array::Int64Array>()
                        .filter(|a| a.is_valid(0))
                        .map_or(0, |a| a.value(0))
                };
                let Ok(n) = u32::try_from(n) else {
                    return plan_err!(
                        "ALTER TABLE {table} SET (history_versions = {value}): a count from 0 to 2^32 - 1"
                    );
                };
                window.keep_versions = (n > 0).then_some(n);
            }
            other => {
                return not_impl_err!(
                    "ALTER TABLE {table} SET ({other} = …): only history, history_versions and ttl"
                );
            }
        }
    }
    Ok(window)
}

/// A duration: an interval, a string an interval is cast from, or a
/// number of seconds.
async fn duration(
    ctx: &SessionContext,
    table: &str,
    key: &ast::Ident,
    value: &ast::Expr,
) -> Result<std::time::Duration> {
    let is_number = matches!(value, ast::Expr::Value(v) if matches!(&v.value, ast::Value::Number(..)));
    let expr =
        if is_number { format!("CAST(({value}) AS DOUBLE)") } else { format!("CAST(({value}) AS INTERVAL)") };
    let array = evaluate(ctx, &expr).await?;
    let secs = if let Some(a) = array.as_any().downcast_ref::<arrow_array::Float64Array>() {
        a.value(0)
    } else if let Some(a) = array.as_any().downcast_ref::<arrow_array::IntervalMonthDayNanoArray>() {
        let v = a.value(0);
        if v.months != 0 {
            return plan_err!(
                "ALTER TABLE {table} SET ({key} = {value}): give days, hours or less (a month has no fixed length)"
            );
        }
        f64::from(v.days) * 86_400.0 + v.nanoseconds as f64 / 1e9
    } else {
        return plan_err!("ALTER TABLE {table} SET ({key} = {value}): not an interval");
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
        datafusion::error::DataFusionError::Plan(format!(
            "ALTER TABLE {table} SET ({key} = {value}): out of range"
        ))
    })
}
