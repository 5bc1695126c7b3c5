//! The direct path: a query the engine answers by itself, with no
//! DataFusion plan. Its shape is a projection of one Basalt table's
//! columns under a filter the engine evaluates exactly (and an optional
//! `LIMIT`), or `count(*)` of the whole table. Each execution binds the
//! parameters and calls `Table::get` (every primary-key column equal to a
//! value, nothing else: the key is filled into a template made at
//! prepare), `Table::lookup` (every leading column of an index equal to a
//! value, nothing else) or the engine's scan (a key range, or an index the
//! scan picks for the filter) on the calling thread, with no physical
//! plan, no runtime hand-off and no coalescing. Where the time of a small
//! query went before: docs/BENCHMARKS-history.md, issue 38.
//!
//! Each execution opens the table by name rather than keeping a handle
//! from prepare: the engine refuses `DROP TABLE` while a handle is alive
//! (`Db::drop_table`), and a prepared statement or a session's plan cache
//! may live for as long as its connection.

use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef};
use basalt::{KeyValue, OwnedKeyValue, ScanOptions, ScanPlan};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, FetchType, LogicalPlan, Operator, SkipType};

use crate::error::to_df;
use crate::output::{QueryOutput, Ran};
use crate::planned_tables::{basalt_table, is_current_handle};
use crate::pushdown::{
    Pushdown, borrowed, describe_predicate, describe_range, exact_cast, key_value_of, predicates_of, pushdown,
};
use crate::table::BasaltTable;

/// A query the engine answers by itself: the table, the columns returned
/// (by their names in the table's schema, in output order), the filter's
/// conjuncts (placeholders in them) and the row limit; or, for
/// `SELECT count(*) FROM t`, the table's row count.
#[derive(Debug)]
pub(crate) struct Direct {
    table: Arc<dyn datafusion::catalog::TableProvider>,
    /// The names the plan was made with: positions in today's schema may
    /// be other columns.
    names: Vec<String>,
    filters: Vec<Expr>,
    limit: Option<usize>,
    schema: SchemaRef,
    /// The query is `count(*)` of the whole table (`Table::count_rows`).
    pub(crate) count: bool,
    /// Where each primary-key value comes from when the filter is one
    /// equality per key column and nothing else (a `Table::get`).
    key: Option<KeyTemplate>,
}

impl Direct {
    /// Whether a read of `pushed` covers the whole table, with no `LIMIT`
    /// to stop it early.
    fn reads_whole_table(&self, pushed: &Pushdown) -> bool {
        self.limit.is_none() && matches!(pushed.range, (Bound::Unbounded, Bound::Unbounded))
    }
}

/// The primary key of a point query, made at prepare from its filter: per
/// key column in key order, the column's type and the literal or
/// parameter it is equal to. An execution fills it with the parameters'
/// values instead of binding every filter and deriving a key range
/// ([`pushdown`], [`point_key`]), which give the same key.
#[derive(Debug)]
struct KeyTemplate {
    parts: Vec<(DataType, Expr)>,
}

impl KeyTemplate {
    /// The template of `filters` (conjuncts) on a table of `schema` whose
    /// primary key is `primary_key`: `None` unless each is `column =
    /// value` (either way round) and they name every key column once.
    fn of(schema: &Schema, primary_key: &[usize], filters: &[Expr]) -> Option<KeyTemplate> {
        if filters.len() != primary_key.len() {
            return None;
        }
        let mut parts: Vec<Option<(DataType, Expr)>> = vec![None; primary_key.len()];
        for filter in filters {
            let Expr::BinaryExpr(b) = filter else { return None };
            let ((Expr::Column(column), value @ (Expr::Literal(..) | Expr::Placeholder(_)))
            | (value @ (Expr::Literal(..) | Expr::Placeholder(_)), Expr::Column(column))) =
                (b.left.as_ref(), b.right.as_ref())
            else {
                return None;
            };
            if b.op != Operator::Eq {
                return None;
            }
            let at = primary_key.iter().position(|&k| schema.field(k).name() == &column.name)?;
            let field = schema.field(primary_key[at]);
            if parts[at].replace((field.data_type().clone(), value.clone())).is_some() {
                return None;
            }
        }
        parts.into_iter().collect::<Option<Vec<_>>>().map(|parts| KeyTemplate { parts })
    }

    /// The key with `values` bound; `None` where [`Route::of`]'s general
    /// way must decide (a null, a value DataFusion compares in another
    /// type or that does not convert without loss, a float key column:
    /// each goes to DataFusion or to the engine's scan there).
    fn key(&self, values: &[ScalarValue]) -> Option<Vec<OwnedKeyValue>> {
        self.parts
            .iter()
            .map(|(column, source)| {
                let value = match source {
                    Expr::Literal(v, _) => v,
                    Expr::Placeholder(p) => {
                        let n = p.id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok())?;
                        values.get(n.checked_sub(1)?)?
                    }
                    _ => return None,
                };
                if !compares_alike(column, &value.data_type()) {
                    return None;
                }
                key_value_of(&exact_cast(value, column)?)
            })
            .collect()
    }
}

pub(crate) fn table_of(direct: &Direct) -> Option<&BasaltTable> {
    direct.table.downcast_ref::<BasaltTable>()
}

/// The direct path of a plan `[Limit] Projection [Filter] TableScan` over a
/// Basalt table, with plain (possibly renamed) columns projected and a
/// filter of comparisons, ranges and null tests of columns with values or
/// parameters; `None` for any other plan.
pub(crate) fn direct_shape(plan: &LogicalPlan) -> Option<Direct> {
    let (limit, plan) = match plan {
        LogicalPlan::Limit(limit) => {
            let skip = matches!(limit.get_skip_type().ok()?, SkipType::Literal(0));
            let FetchType::Literal(fetch) = limit.get_fetch_type().ok()? else { return None };
            if !skip {
                return None;
            }
            (fetch, limit.input.as_ref())
        }
        other => (None, other),
    };
    let LogicalPlan::Projection(projection) = plan else { return None };
    let (filters, input) = match projection.input.as_ref() {
        LogicalPlan::Filter(filter) => {
            (split_conjunction(&filter.predicate).into_iter().cloned().collect(), filter.input.as_ref())
        }
        other => (Vec::new(), other),
    };
    let LogicalPlan::TableScan(scan) = input else { return None };
    if !scan.filters.is_empty() || scan.fetch.is_some() || scan.projection.is_some() {
        return None;
    }
    // A table as of a past point is read by its scan, at that point.
    let table =
        basalt_table(scan).filter(|t| t.downcast_ref::<BasaltTable>().is_some_and(|b| !b.is_past()))?;
    let schema = table.schema();
    let columns = projection
        .expr
        .iter()
        .map(|e| match e.clone().unalias() {
            Expr::Column(c) => schema.index_of(&c.name).ok(),
            _ => None,
        })
        .collect::<Option<Vec<usize>>>()?;
    if columns.is_empty() || !filters.iter().all(filter_shape) {
        return None;
    }
    let output = Arc::new(Schema::new(projection.schema.as_arrow().fields().clone()));
    let names = columns.iter().map(|&c| schema.field(c).name().clone()).collect();
    let key = table
        .downcast_ref::<BasaltTable>()
        .and_then(|provider| KeyTemplate::of(&schema, provider.primary_key(), &filters));
    Some(Direct { table, names, filters, limit, schema: output, count: false, key })
}

/// The direct path of `SELECT count(*) FROM t` (or `count(1)`, renamed or
/// not) over a Basalt table without a filter: `Aggregate` with no
/// grouping and one plain count of a non-null value over the scan, under
/// a projection of its one column or none.
pub(crate) fn count_shape(plan: &LogicalPlan) -> Option<Direct> {
    let aggregate = match plan {
        LogicalPlan::Projection(p)
            if p.expr.len() == 1 && matches!(p.expr[0].clone().unalias(), Expr::Column(_)) =>
        {
            p.input.as_ref()
        }
        other => other,
    };
    let LogicalPlan::Aggregate(aggregate) = aggregate else { return None };
    let [counted] = aggregate.aggr_expr.as_slice() else { return None };
    let Expr::AggregateFunction(f) = counted.clone().unalias() else { return None };
    let plain_count = f.func.name() == "count"
        && !f.params.distinct
        && f.params.filter.is_none()
        && f.params.order_by.is_empty()
        && matches!(f.params.args.as_slice(), [Expr::Literal(v, _)] if !v.is_null());
    let LogicalPlan::TableScan(scan) = aggregate.input.as_ref() else { return None };
    if !plain_count || !aggregate.group_expr.is_empty() || !scan.filters.is_empty() || scan.fetch.is_some() {
        return None;
    }
    // A table as of a past point is read by its scan, at that point.
    let table =
        basalt_table(scan).filter(|t| t.downcast_ref::<BasaltTable>().is_some_and(|b| !b.is_past()))?;
    let schema = Arc::new(Schema::new(plan.schema().as_arrow().fields().clone()));
    Some(Direct {
        table,
        names: Vec::new(),
        filters: Vec::new(),
        limit: None,
        schema,
        count: true,
        key: None,
    })
}

/// Whether `e` has the form of what the engine's predicates take: a
/// conjunction of comparisons of a column with a value or parameter,
/// `BETWEEN` two of them, null tests of a column, a column or its `NOT`.
fn filter_shape(e: &Expr) -> bool {
    let value = |e: &Expr| matches!(e, Expr::Literal(..) | Expr::Placeholder(_));
    let column = |e: &Expr| matches!(e, Expr::Column(_));
    match e {
        Expr::BinaryExpr(b) if b.op == Operator::And => filter_shape(&b.left) && filter_shape(&b.right),
        Expr::BinaryExpr(b)
            if matches!(
                b.op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
            ) =>
        {
            (column(&b.left) && value(&b.right)) || (value(&b.left) && column(&b.right))
        }
        Expr::Between(b) => !b.negated && column(&b.expr) && value(&b.low) && value(&b.high),
        Expr::Not(inner) | Expr::IsNull(inner) | Expr::IsNotNull(inner) => column(inner),
        Expr::Column(_) => true,
        _ => false,
    }
}

/// Whether the engine compares a column of type `column` with a value of
/// type `value` as DataFusion would. DataFusion's type coercion runs after
/// the plan the direct path reads: it compares a string column with a
/// number as numbers and an integer column with a float as floats, where
/// the engine would convert the value to the column's type. Only where
/// both agree — one type, integers of any width (DataFusion unwraps the
/// cast of a lossless integer comparison) or strings — is the value taken.
fn compares_alike(column: &DataType, value: &DataType) -> bool {
    column == value || (column.is_integer() && value.is_integer()) || (is_string(column) && is_string(value))
}

pub(crate) fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// Whether every value in `e` (its parameters bound) is compared with a
/// column the way DataFusion would compare them ([`compares_alike`]).
fn values_compare_alike(schema: &Schema, e: &Expr) -> bool {
    let column_type = |e: &Expr| match e {
        Expr::Column(c) => schema.field_with_name(&c.name).ok().map(|f| f.data_type().clone()),
        _ => None,
    };
    let alike = |column: &Expr, value: &Expr| match (column_type(column), value) {
        (Some(t), Expr::Literal(v, _)) => compares_alike(&t, &v.data_type()),
        _ => false,
    };
    match e {
        Expr::BinaryExpr(b) if b.op == Operator::And => {
            values_compare_alike(schema, &b.left) && values_compare_alike(schema, &b.right)
        }
        Expr::BinaryExpr(b) => alike(&b.left, &b.right) || alike(&b.right, &b.left),
        Expr::Between(b) => alike(&b.expr, &b.low) && alike(&b.expr, &b.high),
        _ => true,
    }
}

/// `e` with each parameter replaced by its value.
fn with_values(e: &Expr, values: &[ScalarValue]) -> Result<Expr> {
    e.clone()
        .transform(|e| match e {
            Expr::Placeholder(p) => {
                let n = p.id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
                let Some(v) = n.and_then(|n| values.get(n.wrapping_sub(1))) else {
                    return plan_err!("no value for parameter {}", p.id);
                };
                Ok(Transformed::yes(Expr::Literal(v.clone(), None)))
            }
            other => Ok(Transformed::no(other)),
        })
        .data()
}

/// How a direct query runs with given values: the engine call that
/// answers it, or DataFusion's plan.
enum Route {
    /// `Table::count_rows` of the whole table.
    Count,
    /// `Table::get` of one whole primary key.
    Get(Vec<OwnedKeyValue>),
    /// `Table::lookup` of equalities on an index's leading columns (the
    /// scan of `pushed` if the lookup fails: an index still being built).
    Lookup { index: String, values: Vec<OwnedKeyValue>, whole: bool, pushed: Pushdown },
    /// The engine's scan of a key range with a filter (it may pick an
    /// index for the filter itself), opened, with what it was opened on.
    Scan(Box<basalt::TableScan>, Pushdown),
    /// DataFusion's plan: a value compared in another type, a null, or a
    /// whole-table read its parallel plan does better.
    DataFusion(&'static str),
}

impl Route {
    /// The route of `direct` with `values` bound, on the open `table`.
    fn of(
        direct: &Direct,
        provider: &BasaltTable,
        table: &basalt::Table,
        values: &[ScalarValue],
    ) -> Result<Route> {
        if direct.count {
            return Ok(Route::Count);
        }
        if let Some(key) = direct.key.as_ref().and_then(|template| template.key(values)) {
            return Ok(Route::Get(key));
        }
        let schema = provider.schema_ref();
        let filters = direct.filters.iter().map(|f| with_values(f, values)).collect::<Result<Vec<_>>>()?;
        if !filters.iter().all(|f| values_compare_alike(schema, f) && predicates_of(schema, f).is_some()) {
            return Ok(Route::DataFusion("a value DataFusion compares in another type, or a null"));
        }
        let pushed = pushdown(schema, provider.primary_key(), &filters);
        if let Some(key) = point_key(&pushed, provider.primary_key(), schema) {
            return Ok(Route::Get(key));
        }
        if let Some((index, values, whole)) = index_equality(table, &pushed) {
            return Ok(Route::Lookup { index, values, whole, pushed });
        }
        // A scan of the whole table with no index to answer its filter and
        // no LIMIT reads every row: DataFusion's plan splits it across
        // cores, so it is left to DataFusion (without a filter that is
        // known before the scan is opened; with one, once the scan shows
        // no index serves it).
        if direct.reads_whole_table(&pushed) && pushed.predicates.is_empty() {
            return Ok(Route::DataFusion("a read of the whole table, which DataFusion splits across cores"));
        }
        match open_scan(direct, table, &pushed)? {
            Some(scan) => Ok(Route::Scan(Box::new(scan), pushed)),
            None => Ok(Route::DataFusion("a filter no index serves over the whole table")),
        }
    }

    /// What EXPLAIN says of it.
    fn describe(&self, table: &str) -> String {
        match self {
            Route::Count => format!(
                "direct: Table::count_rows of {table} (from SST metadata where no other source overlaps)"
            ),
            Route::Get(key) => format!("direct: Table::get of {table}, key {key:?}"),
            Route::Lookup { index, values, .. } => {
                format!("direct: Table::lookup of {table} by index {index}, values {values:?}")
            }
            Route::Scan(scan, pushed) => format!(
                "direct: the engine's scan of {table} ({:?}), key range {}, filter [{}]",
                scan.plan(),
                describe_range(&pushed.range),
                pushed.predicates.iter().map(describe_predicate).collect::<Vec<_>>().join(" AND ")
            ),
            Route::DataFusion(why) => format!("DataFusion's plan above ({why})"),
        }
    }
}

/// Runs a direct query with its parameters' values; `None` when these
/// values take it to DataFusion ([`Route::DataFusion`]).
pub(crate) fn run_direct(direct: &Direct, values: &[ScalarValue]) -> Result<Option<Ran>> {
    let Some(provider) = table_of(direct) else { return Ok(None) };
    // A table dropped since the plan was made says so as on DataFusion's
    // path ([`changed_table`]).
    let Ok(table) = provider.table() else { return Ok(Some(Ran::Changed(provider.name().to_string()))) };
    if !is_current_handle(provider, &table) {
        return Ok(Some(Ran::Changed(table.name().to_string())));
    }
    // Columns are asked for by the names the plan was made with, and what
    // comes back must have the planned types: a change after the check
    // above is refused, never read by position or cast.
    let names = &direct.names;
    let out = |batch: &RecordBatch| planned_output(direct, provider.name(), batch);
    let limit = direct.limit.unwrap_or(usize::MAX);
    let mut batches = Vec::new();
    if limit == 0 && !direct.count {
        // Nothing to read: no scan is opened (nor its errors met).
        return Ok(Some(Ran::Output(QueryOutput { schema: Arc::clone(&direct.schema), batches })));
    }
    match Route::of(direct, provider, &table, values)? {
        Route::DataFusion(_) => return Ok(None),
        Route::Count => {
            let rows = table.count_rows(&(Bound::Unbounded, Bound::Unbounded), None).map_err(to_df)?;
            let rows = i64::try_from(rows).map_err(|e| DataFusionError::External(Box::new(e)))?;
            let count = Arc::new(Int64Array::from(vec![rows])) as ArrayRef;
            batches.push(RecordBatch::try_new(Arc::clone(&direct.schema), vec![count])?);
        }
        Route::Get(key) => {
            let key: Vec<KeyValue<'_>> = key.iter().map(OwnedKeyValue::as_value).collect();
            if let Some(row) = table.get(&key).map_err(to_df)? {
                let by_name = names
                    .iter()
                    .map(|n| row.schema().index_of(n))
                    .collect::<std::result::Result<Vec<_>, _>>();
                let Ok(columns) = by_name else { return Ok(Some(Ran::Changed(table.name().to_string()))) };
                batches.push(out(&row.project(&columns)?)?);
            }
        }
        Route::Lookup { index, values, whole, pushed } => {
            let borrowed: Vec<Option<KeyValue<'_>>> = values.iter().map(|v| Some(v.as_value())).collect();
            let predicate = if whole {
                basalt::IndexPredicate::Eq(borrowed)
            } else {
                basalt::IndexPredicate::Prefix(borrowed)
            };
            let mut opts = basalt::LookupOptions::default();
            opts.projection = Some(names.clone());
            opts.limit = direct.limit;
            match table.lookup(&index, predicate, opts) {
                Ok(rows) => batches.push(out(&rows)?),
                // The scan reports any error that is the table's.
                Err(_) => match open_scan(direct, &table, &pushed)? {
                    Some(scan) => batches = scan_rows(direct, provider.name(), scan)?,
                    None => return Ok(None),
                },
            }
        }
        Route::Scan(scan, _) => batches = scan_rows(direct, provider.name(), *scan)?,
    }
    Ok(Some(Ran::Output(QueryOutput { schema: Arc::clone(&direct.schema), batches })))
}

/// The engine's scan of `pushed` for a direct query (`None`: a
/// whole-table read no index serves, which DataFusion's plan does better).
fn open_scan(direct: &Direct, table: &basalt::Table, pushed: &Pushdown) -> Result<Option<basalt::TableScan>> {
    let opts = ScanOptions::default()
        .range(borrowed(&pushed.range))
        .projection(Some(direct.names.clone()))
        .filter(pushed.filter());
    let scan = table.scan(opts).map_err(to_df)?;
    Ok((!direct.reads_whole_table(pushed) || *scan.plan() != ScanPlan::KeyRange).then_some(scan))
}

/// `batch` as the direct query's output, refused unless its columns have
/// the planned types: a table changed after the statement's check is
/// never read by position or cast.
fn planned_output(direct: &Direct, table: &str, batch: &RecordBatch) -> Result<RecordBatch> {
    let planned = direct.schema.fields().iter().map(|f| f.data_type());
    if batch.num_columns() != direct.schema.fields().len()
        || batch.columns().iter().map(|c| c.data_type()).ne(planned)
    {
        return Err(DataFusionError::Execution(format!(
            "the columns of table {table} changed since the statement was prepared; prepare it again"
        )));
    }
    Ok(RecordBatch::try_new(Arc::clone(&direct.schema), batch.columns().to_vec())?)
}

/// A direct query's rows from its scan, up to its limit.
fn scan_rows(direct: &Direct, table: &str, scan: basalt::TableScan) -> Result<Vec<RecordBatch>> {
    let mut left = direct.limit.unwrap_or(usize::MAX);
    let mut batches = Vec::new();
    for batch in scan {
        let mut batch = batch.map_err(to_df)?;
        if batch.num_rows() > left {
            batch = batch.slice(0, left);
        }
        left -= batch.num_rows();
        batches.push(planned_output(direct, table, &batch)?);
        if left == 0 {
            break;
        }
    }
    Ok(batches)
}

/// The row EXPLAIN adds to DataFusion's plans (`basalt_path`): how the
/// engine runs `plan` with `values`.
pub(crate) fn describe_path(plan: &LogicalPlan, values: &[ScalarValue]) -> Result<String> {
    let Some(direct) = direct_shape(plan).or_else(|| count_shape(plan)) else {
        return Ok("DataFusion's plan above".to_string());
    };
    let Some(provider) = table_of(&direct) else { return Ok("DataFusion's plan above".to_string()) };
    let table = provider.table()?;
    Ok(Route::of(&direct, provider, &table, values)?.describe(provider.name()))
}

/// The index whose leading columns a filter of equalities (and nothing
/// else) names, with the values in index order and whether they cover all
/// its columns: the query is then a `Table::lookup` (the engine's scan
/// would first open a cursor over the table and plan the index). `None`
/// when no index fits.
fn index_equality(table: &basalt::Table, pushed: &Pushdown) -> Option<(String, Vec<OwnedKeyValue>, bool)> {
    if !matches!(pushed.range, (Bound::Unbounded, Bound::Unbounded))
        || pushed.predicates.is_empty()
        || pushed.predicates.iter().any(|p| p.op != basalt::CmpOp::Eq)
    {
        return None;
    }
    for index in table.indexes() {
        let mut values = Vec::new();
        for column in &index.columns {
            let Some(p) = pushed.predicates.iter().find(|p| &p.column == column) else { break };
            values.push(key_value_of(&ScalarValue::try_from_array(&p.literal, 0).ok()?)?);
        }
        // Every predicate is one of the leading equalities: none is left
        // for a filter after the lookup.
        if !values.is_empty() && values.len() == pushed.predicates.len() {
            let whole = values.len() == index.columns.len();
            return Some((index.name.clone(), values, whole));
        }
    }
    None
}

/// The whole primary key, when the filter is exactly one equality per key
/// column (and nothing else): the query is then a `Table::get`.
fn point_key(pushed: &Pushdown, primary_key: &[usize], schema: &Schema) -> Option<Vec<OwnedKeyValue>> {
    let (Bound::Included(lo), Bound::Included(hi)) = &pushed.range else { return None };
    let only_key_equalities = pushed.predicates.len() == primary_key.len()
        && pushed.predicates.iter().all(|p| {
            p.op == basalt::CmpOp::Eq && primary_key.iter().any(|&k| schema.field(k).name() == &p.column)
        });
    (lo == hi && lo.len() == primary_key.len() && only_key_equalities).then(|| lo.clone())
}

#[cfg(test)]
mod tests {
    use arrow_schema::Field;
    use datafusion::logical_expr::{col, lit, placeholder};

    use super::*;

    /// `id BIGINT, k VARCHAR, f DOUBLE, v INT` with the key `(id, k)`.
    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("k", DataType::Utf8, false),
            Field::new("f", DataType::Float64, false),
            Field::new("v", DataType::Int32, true),
        ])
    }

    /// The key the general way derives: the filters bound, pushed down,
    /// and a point key taken from the range.
    fn general_key(
        schema: &Schema,
        key: &[usize],
        filters: &[Expr],
        values: &[ScalarValue],
    ) -> Option<Vec<OwnedKeyValue>> {
        let bound = filters.iter().map(|f| with_values(f, values)).collect::<Result<Vec<_>>>().ok()?;
        if !bound.iter().all(|f| values_compare_alike(schema, f) && predicates_of(schema, f).is_some()) {
            return None;
        }
        point_key(&pushdown(schema, key, &bound), key, schema)
    }

    #[test]
    fn a_key_template_is_made_only_of_one_equality_per_key_column() {
        let schema = schema();
        let key = [0, 1];
        let of = |filters: Vec<Expr>| KeyTemplate::of(&schema, &key, &filters).is_some();
        assert!(of(vec![col("id").eq(placeholder("$1")), placeholder("$2").eq(col("k"))]));
        assert!(of(vec![col("k").eq(lit("a")), col("id").eq(placeholder("$1"))]));
        assert!(!of(vec![col("id").eq(placeholder("$1"))]), "a key prefix");
        assert!(
            !of(vec![col("id").eq(placeholder("$1")), col("id").eq(placeholder("$2"))]),
            "one column twice"
        );
        assert!(!of(vec![col("id").lt(placeholder("$1")), col("k").eq(placeholder("$2"))]), "a comparison");
        assert!(
            !of(vec![col("id").eq(placeholder("$1")), col("v").eq(placeholder("$2"))]),
            "not a key column"
        );
        let three = vec![col("id").eq(lit(1_i64)), col("k").eq(lit("a")), col("v").eq(lit(2))];
        assert!(!of(three), "more than the key");
        let float_key = [2];
        assert!(KeyTemplate::of(&schema, &float_key, &[col("f").eq(placeholder("$1"))]).is_some());
    }

    /// Whatever the values, the template's key is the general way's, or it
    /// leaves the choice to the general way.
    #[test]
    fn a_key_template_gives_the_key_the_general_way_derives() {
        let schema = schema();
        let values = [
            ScalarValue::Int64(Some(7)),
            ScalarValue::Int32(Some(-3)),
            ScalarValue::UInt64(Some(u64::MAX)),
            ScalarValue::Int64(None),
            ScalarValue::Float64(Some(2.0)),
            ScalarValue::Float64(Some(-0.0)),
            ScalarValue::Float64(Some(f64::NAN)),
            ScalarValue::Utf8(Some("a".into())),
            ScalarValue::Utf8(Some("7".into())),
            ScalarValue::LargeUtf8(Some("b".into())),
            ScalarValue::Utf8(None),
            ScalarValue::Boolean(Some(true)),
        ];
        let shapes: [(Vec<usize>, Vec<Expr>); 3] = [
            (vec![0, 1], vec![col("id").eq(placeholder("$1")), placeholder("$2").eq(col("k"))]),
            (vec![1], vec![col("k").eq(placeholder("$1"))]),
            (vec![2], vec![placeholder("$1").eq(col("f"))]),
        ];
        let mut filled = 0;
        for (key, filters) in &shapes {
            let template = KeyTemplate::of(&schema, key, filters).expect("a template");
            for a in &values {
                for b in &values {
                    let bound = [a.clone(), b.clone()];
                    let general = general_key(&schema, key, filters, &bound);
                    match template.key(&bound) {
                        Some(got) => {
                            filled += 1;
                            assert_eq!(Some(got), general, "{filters:?} with {bound:?}");
                        }
                        None => assert!(
                            general.is_none(),
                            "{filters:?} with {bound:?}: the general way found {general:?}"
                        ),
                    }
                }
            }
        }
        assert!(filled > 0);
    }
}
