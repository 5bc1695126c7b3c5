//! DELETE and UPDATE, planned here rather than by DataFusion's DML path.
//! DataFusion 55 hands a table provider only the filters it finds in the
//! optimized plan: a filter the optimizer folds away (`WHERE 1 = 0`, `WHERE
//! key IS NULL` on a non-nullable key) or turns into a join (a subquery)
//! reaches the provider as no filter at all, which means every row. So the
//! rows a statement changes are selected by a SELECT that DataFusion plans
//! in full (with the scan's pushdown: key range, index, zone maps), and
//! every change goes into one write batch: a statement is atomic, and holds
//! its changes in memory until it commits (the engine takes write batches
//! up to its batch limit). An UPDATE of key columns deletes every old key
//! before it writes any new row, and is refused when two rows would get
//! one key or a moved row would land on a row the statement does not move.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use basalt::{CmpOp, Db, OwnedKeyValueRange, Table, WriteBatch};
use datafusion::arrow::compute::cast;
use datafusion::common::{Result, ScalarValue, exec_err, not_impl_err, plan_err};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{self, AssignmentTarget, FromTable, TableFactor, TableWithJoins};

use crate::error::to_df;
use crate::insert::conform;
use crate::names::last_ident;
use crate::pushdown::{borrowed, key_value_of, predicates_of, pushdown};

/// Fewest rows a DELETE over a key range deletes with one range tombstone.
const RANGE_DELETE_ROWS_MIN: u64 = 64;

/// `DELETE FROM table [AS alias] [WHERE …]`.
pub(crate) async fn delete(ctx: &SessionContext, db: &Arc<Db>, delete: &ast::Delete) -> Result<DataFrame> {
    let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
    if !delete.tables.is_empty()
        || delete.using.is_some()
        || delete.limit.is_some()
        || !delete.order_by.is_empty()
        || delete.returning.is_some()
    {
        return not_impl_err!("DELETE with several tables, USING, LIMIT, ORDER BY or RETURNING");
    }
    let [relation] = from.as_slice() else {
        return not_impl_err!("DELETE from {} tables", from.len());
    };
    let table = target(db, relation)?;
    let keys: Vec<String> = table.primary_key().iter().map(|k| quoted(k)).collect();
    let query =
        format!("SELECT {} FROM {relation}{}", keys.join(", "), where_clause(delete.selection.as_ref()));
    let in_block = crate::txn::SessionTransaction::of(ctx.state_ref().read().config())
        .is_some_and(|slot| slot.is_open());
    // Outside a transaction (which holds no range delete), a WHERE that is
    // exactly a range of the primary key deletes it as one range.
    if !in_block && let Some(range) = key_range_of(ctx, &table, &query).await? {
        let ranged = table.clone();
        let rows = tokio::task::spawn_blocking(move || -> Result<Option<u64>> {
            let rows = ranged.count_rows(&borrowed(&range), None).map_err(to_df)?;
            // A few rows are deleted one by one: a tombstone each costs less
            // than a range tombstone over them, which every read of the
            // range checks until compaction collects it.
            if rows < RANGE_DELETE_ROWS_MIN {
                return Ok(None);
            }
            ranged.delete_range(borrowed(&range)).map_err(to_df)?;
            Ok(Some(rows))
        })
        .await
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))??;
        if let Some(rows) = rows {
            return count_answer(ctx, rows);
        }
    }
    let selected = ctx.sql(&query).await?.collect().await?;
    let mut changes = Changes::default();
    for keys in selected {
        changes.rows += keys.num_rows() as u64;
        changes.deletes.push(keys);
    }
    commit(ctx, db.clone(), table, changes, false).await
}

/// `UPDATE table [AS alias] SET column = expr, … [WHERE …]`.
pub(crate) async fn update(ctx: &SessionContext, db: &Arc<Db>, update: &ast::Update) -> Result<DataFrame> {
    if update.from.is_some()
        || update.limit.is_some()
        || !update.order_by.is_empty()
        || update.returning.is_some()
    {
        return not_impl_err!("UPDATE with FROM, LIMIT, ORDER BY or RETURNING");
    }
    let table = target(db, &update.table)?;
    let schema = table.schema();
    let mut assigned: Vec<(usize, String)> = Vec::new();
    for a in &update.assignments {
        let AssignmentTarget::ColumnName(name) = &a.target else {
            return not_impl_err!("UPDATE of a tuple of columns");
        };
        let column = last_ident(name)?;
        let Ok(i) = schema.index_of(&column) else {
            return plan_err!("UPDATE of {}: no column {column}", table.name());
        };
        if assigned.iter().any(|(j, _)| *j == i) {
            return plan_err!("UPDATE of {}: column {column} is assigned twice", table.name());
        }
        assigned.push((i, a.value.to_string()));
    }
    let new_values: Vec<String> = assigned
        .iter()
        .enumerate()
        .map(|(n, (_, value))| format!("({value}) AS \"__basalt_new_{n}\""))
        .collect();
    let columns: Vec<String> = schema.fields().iter().map(|f| quoted(f.name())).collect();
    let query = format!(
        "SELECT {}, {} FROM {}{}",
        columns.join(", "),
        new_values.join(", "),
        update.table,
        where_clause(update.selection.as_ref())
    );
    let selected = ctx.sql(&query).await?.collect().await?;
    let key_columns = key_columns(&table)?;
    let moves_keys = assigned.iter().any(|(i, _)| key_columns.contains(i));
    let width = schema.fields().len();
    let mut changes = Changes::default();
    for batch in selected {
        changes.rows += batch.num_rows() as u64;
        let mut columns: Vec<ArrayRef> = batch.columns()[..width].to_vec();
        for (n, (i, _)) in assigned.iter().enumerate() {
            columns[*i] = cast(batch.column(width + n), schema.field(*i).data_type())?;
        }
        if moves_keys {
            changes.deletes.push(batch.project(&key_columns)?);
        }
        changes.puts.push(conform(&schema, &RecordBatch::try_new(schema.clone(), columns)?)?);
    }
    commit(ctx, db.clone(), table, changes, moves_keys).await
}

/// The table a DELETE or UPDATE names (no joins).
fn target(db: &Db, relation: &TableWithJoins) -> Result<Table> {
    match &relation.relation {
        TableFactor::Table { name, .. } if relation.joins.is_empty() => {
            db.table(&last_ident(name)?).map_err(to_df)
        }
        other => not_impl_err!("DELETE or UPDATE of {other}: name one table"),
    }
}

fn where_clause(selection: Option<&ast::Expr>) -> String {
    selection.map_or_else(String::new, |e| format!(" WHERE {e}"))
}

/// A column name as a quoted SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn key_columns(table: &Table) -> Result<Vec<usize>> {
    let schema = table.schema();
    Ok(table.primary_key().iter().map(|n| schema.index_of(n)).collect::<std::result::Result<Vec<_>, _>>()?)
}

/// What a statement changes, gathered before anything is written.
#[derive(Default)]
struct Changes {
    /// Rows selected.
    rows: u64,
    /// Keys of the rows deleted (or moved by an UPDATE of a key column).
    deletes: Vec<RecordBatch>,
    /// Rows written.
    puts: Vec<RecordBatch>,
}

/// Writes `changes` in one batch (every delete before every put, so a row
/// moved onto a key another moved row had is written, not deleted), after
/// checking the new keys of an UPDATE that moves rows; the answer is the
/// number of rows changed.
async fn commit(
    ctx: &SessionContext,
    db: Arc<Db>,
    table: Table,
    changes: Changes,
    moves_keys: bool,
) -> Result<DataFrame> {
    let rows = changes.rows;
    let block =
        crate::txn::SessionTransaction::of(ctx.state_ref().read().config()).filter(|slot| slot.is_open());
    if block.is_some() && moves_keys {
        return not_impl_err!(
            "UPDATE of a key column inside BEGIN … COMMIT: its new keys are checked against the rows \
             committed now, not the transaction's; COMMIT first"
        );
    }
    tokio::task::spawn_blocking(move || -> Result<()> {
        if moves_keys {
            check_new_keys(&table, &changes)?;
        }
        let mut batch = WriteBatch::new();
        for keys in &changes.deletes {
            batch.delete_table(&table, keys).map_err(to_df)?;
        }
        for new_rows in &changes.puts {
            batch.put_table(&table, new_rows).map_err(to_df)?;
        }
        // Inside `BEGIN … COMMIT`, into the transaction (`txn.rs`).
        match block {
            Some(slot) => slot
                .write(table.name(), batch)
                .unwrap_or_else(|| exec_err!("the transaction ended while the statement ran")),
            None => db.write(batch).map_err(to_df),
        }
    })
    .await
    .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))??;
    count_answer(ctx, rows)
}

/// A DML statement's answer: the rows it changed.
fn count_answer(ctx: &SessionContext, rows: u64) -> Result<DataFrame> {
    let schema = Arc::new(Schema::new(vec![Field::new("count", DataType::UInt64, false)]));
    ctx.read_batch(RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![rows]))])?)
}

/// The primary-key range a DELETE's rows are exactly, when its SELECT
/// plans to a scan of `table` alone whose every filter the scan took (no
/// filter, limit or join left above it) and each filter compares the
/// leading key column with a value (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`);
/// a float key column never (the key order puts NaN and -0.0 where SQL
/// does not). `None`: the rows are selected one by one.
async fn key_range_of(
    ctx: &SessionContext,
    table: &Table,
    query: &str,
) -> Result<Option<OwnedKeyValueRange>> {
    let mut plan = ctx.sql(query).await?.into_optimized_plan()?;
    while let LogicalPlan::Projection(p) = plan {
        plan = Arc::unwrap_or_clone(p.input);
    }
    let LogicalPlan::TableScan(scan) = plan else { return Ok(None) };
    if scan.fetch.is_some() || scan.table_name.table() != table.name() {
        return Ok(None);
    }
    let schema = table.schema();
    let key_columns = key_columns(table)?;
    let Some(&leading) = key_columns.first() else { return Ok(None) };
    let leading = schema.field(leading);
    if leading.data_type().is_floating() {
        return Ok(None);
    }
    let mut predicates = Vec::new();
    for filter in &scan.filters {
        let Some(p) = predicates_of(&schema, filter) else { return Ok(None) };
        predicates.extend(p);
    }
    let bounded = predicates.iter().all(|p| {
        &p.column == leading.name()
            && matches!(p.op, CmpOp::Eq | CmpOp::Lt | CmpOp::LtEq | CmpOp::Gt | CmpOp::GtEq)
            // A value the key range cannot hold (a LargeUtf8 literal, say)
            // would leave that side of the range open: the outside
            // review's case that deleted every row.
            && ScalarValue::try_from_array(&p.literal, 0).ok().as_ref().and_then(key_value_of).is_some()
    });
    // An equality with any other comparison: the range is the equality's
    // alone (a contradicting bound would be ignored: the review's second
    // case); such statements take the row-by-row path.
    let equalities = predicates.iter().filter(|p| p.op == CmpOp::Eq).count();
    if !bounded || (equalities > 0 && equalities < predicates.len()) || equalities > 1 {
        return Ok(None);
    }
    Ok(Some(pushdown(&schema, &key_columns, &scan.filters).range))
}

/// Refuses an UPDATE whose new keys collide: two rows given one key, or a
/// row moved onto a row the statement does not move.
fn check_new_keys(table: &Table, changes: &Changes) -> Result<()> {
    let key_columns = key_columns(table)?;
    let tuples = |batch: &RecordBatch| -> Result<Vec<Vec<ScalarValue>>> {
        (0..batch.num_rows())
            .map(|r| batch.columns().iter().map(|c| ScalarValue::try_from_array(c, r)).collect())
            .collect()
    };
    let mut moved: HashSet<Vec<ScalarValue>> = HashSet::new();
    for keys in &changes.deletes {
        moved.extend(tuples(keys)?);
    }
    let mut given: HashSet<Vec<ScalarValue>> = HashSet::new();
    for rows in &changes.puts {
        let keys = rows.project(&key_columns)?;
        for key in tuples(&keys)? {
            if !given.insert(key.clone()) {
                return exec_err!("UPDATE of {} gives two rows the key {key:?}", table.name());
            }
        }
        let existing = table.get_many(&keys).map_err(to_df)?.project(&key_columns)?;
        if let Some(key) = tuples(&existing)?.into_iter().find(|k| !moved.contains(k)) {
            return exec_err!(
                "UPDATE of {} would overwrite the row with key {key:?}: a primary key stays unique",
                table.name()
            );
        }
    }
    Ok(())
}
