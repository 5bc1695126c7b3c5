//! Prepared statements, the plan cache, and the direct path.
//!
//! A statement is parsed and planned once ([`prepare`]) and then run many
//! times with parameter values (`$1`, `$2`, …) bound as values, never
//! spliced into text. A query whose plan is a projection of one Basalt
//! table's columns under a filter the engine evaluates exactly (and an
//! optional `LIMIT`) takes the *direct path*: each execution binds the
//! parameters, derives the key range and predicates as a DataFusion scan
//! would, and calls `Table::get` (every primary-key column equal to a
//! value, nothing else), `Table::lookup` (every leading column of an index
//! equal to a value, nothing else) or the engine's scan (a key range, or an
//! index the scan picks for the filter) on the calling thread, with no physical plan,
//! no runtime hand-off and no coalescing. Everything else runs the stored
//! logical plan through DataFusion's optimizer and executor, skipping only
//! the parse and the SQL planning. Where the time of a small query went
//! before: docs/BENCHMARKS-history.md, issue 38.
//!
//! [`query`] runs text through a per-session cache of prepared queries,
//! keyed by the text, so repeating a statement costs what executing a
//! prepared one does.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Schema, SchemaRef};
use basalt::{KeyValue, OwnedKeyValue, ScanOptions, ScanPlan};
use datafusion::common::config::SqlParserOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{
    DataFusionError, ParamValues, Result, ScalarValue, exec_err, not_impl_err, plan_err,
};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{ExplainFormat, Expr, FetchType, LogicalPlan, Operator, SkipType, TableScan};
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use parking_lot::Mutex;

use crate::error::to_df;
use crate::pushdown::{borrowed, exact_cast, key_value_of, predicates_of, pushdown};
use crate::table::BasaltTable;

/// Statements the plan cache keeps per session; past it, the cache starts
/// again empty (a workload with more distinct texts than this gains
/// nothing from caching them).
const PLAN_CACHE_ENTRIES: usize = 512;

/// What a statement returned: its schema (known also when no rows came)
/// and its batches.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    /// The result's columns.
    pub schema: SchemaRef,
    /// The rows, in the order the statement gave them.
    pub batches: Vec<RecordBatch>,
}

impl QueryOutput {
    /// Rows in all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// A statement parsed and planned once, executed with parameter values.
pub struct PreparedStatement {
    ctx: SessionContext,
    text: String,
    body: Body,
}

impl std::fmt::Debug for PreparedStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedStatement")
            .field("text", &self.text)
            .field("path", &self.path())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Body {
    /// Statements Basalt runs itself (`CREATE INDEX`, `DELETE`, …): parsed
    /// once, run by [`crate::sql_statement`] each time, without parameters.
    /// `tables`: the Basalt tables the statement named when it was
    /// prepared, as they were then (a `DELETE` or `UPDATE` prepared
    /// before its table changed is refused like a plan, not run against
    /// columns its text no longer means).
    Statement { statement: Box<Statement>, tables: Vec<BasaltTable> },
    /// A plan of DataFusion's, placeholders in it.
    Plan {
        plan: Box<LogicalPlan>,
        /// The type each parameter is compared with (`None`: not inferred,
        /// the value's own type is used), `$1` first.
        parameters: Vec<Option<DataType>>,
        direct: Option<Direct>,
    },
}

/// A query the engine answers by itself: the table, the columns returned
/// (by position in the table's schema, in output order), the filter's
/// conjuncts (placeholders in them) and the row limit; or, for
/// `SELECT count(*) FROM t`, the table's row count.
#[derive(Debug)]
struct Direct {
    table: Arc<dyn datafusion::catalog::TableProvider>,
    columns: Vec<usize>,
    filters: Vec<Expr>,
    limit: Option<usize>,
    schema: SchemaRef,
    /// The query is `count(*)` of the whole table (`Table::count_rows`).
    count: bool,
}

impl Direct {
    /// The names of the columns returned, in output order.
    fn column_names(&self, schema: &Schema) -> Vec<String> {
        self.columns.iter().map(|&c| schema.field(c).name().clone()).collect()
    }

    /// Whether a read of `pushed` covers the whole table, with no `LIMIT`
    /// to stop it early.
    fn reads_whole_table(&self, pushed: &crate::pushdown::Pushdown) -> bool {
        self.limit.is_none() && matches!(pushed.range, (Bound::Unbounded, Bound::Unbounded))
    }
}

/// What running a statement came to: its output, or the name of a table
/// it reads that was dropped or made again differently since it was
/// planned (nothing was run then).
enum Ran {
    Output(QueryOutput),
    Changed(String),
}

impl Ran {
    fn output(self) -> Result<QueryOutput> {
        match self {
            Ran::Output(output) => Ok(output),
            Ran::Changed(table) => exec_err!(
                "table {table} was dropped or changed since the statement was prepared; prepare it again"
            ),
        }
    }
}

/// Parses and plans `text` once. Parameters are written `$1`, `$2`, …; a
/// parameter's type is the type of what it is compared with.
pub async fn prepare(ctx: &SessionContext, text: &str) -> Result<PreparedStatement> {
    let mut statements = Parser::parse_sql(&GenericDialect {}, text)?;
    if statements.len() != 1 {
        return plan_err!("prepare takes one statement, not {}", statements.len());
    }
    let statement = statements.remove(0);
    crate::refuse_in_block(ctx, &statement)?;
    crate::insert::check_literal_nulls(ctx, &statement)?;
    if crate::runs_here(&statement) {
        let tables = tables_named(ctx, &statement)?;
        let body = Body::Statement { statement: Box::new(statement), tables };
        return Ok(PreparedStatement { ctx: ctx.clone(), text: text.to_string(), body });
    }
    let statement = datafusion::sql::parser::Statement::Statement(Box::new(statement));
    let plan = ctx.state().statement_to_plan(statement).await?;
    PreparedStatement::from_plan(ctx, text, plan)
}

impl PreparedStatement {
    /// A query another SQL front end planned (the PostgreSQL server plans
    /// at `Parse`, with its own parser): `plan` as the SQL planner made it,
    /// placeholders in it, not yet optimized.
    pub fn from_plan(ctx: &SessionContext, text: &str, plan: LogicalPlan) -> Result<PreparedStatement> {
        let parameters = parameter_types(&plan)?;
        let direct = direct_shape(&plan).or_else(|| count_shape(&plan));
        Ok(PreparedStatement {
            ctx: ctx.clone(),
            text: text.to_string(),
            body: Body::Plan { plan: Box::new(plan), parameters, direct },
        })
    }

    /// Runs the statement on the direct path only, on the calling thread:
    /// `None` when its shape, or these values, do not take it (then
    /// [`PreparedStatement::execute`] runs it through DataFusion).
    pub fn execute_direct(&self, params: &[ScalarValue]) -> Result<Option<QueryOutput>> {
        match &self.body {
            Body::Plan { parameters, direct: Some(direct), .. } if !in_block(&self.ctx) => {
                run_direct(direct, &bind(parameters, params)?)?.map(Ran::output).transpose()
            }
            _ => Ok(None),
        }
    }

    /// An error saying "prepare it again" when a Basalt table the
    /// statement reads or writes was dropped or changed (a column added,
    /// dropped or renamed, or the table made again with another schema,
    /// key or column default) since it was prepared: run then, its plan
    /// would read the table through the old layout. For callers that run
    /// the plan themselves (the PostgreSQL server's own path); `execute`
    /// checks by itself.
    pub fn check_tables(&self) -> Result<()> {
        match &self.body {
            Body::Statement { tables, .. } => match tables.iter().find(|t| !is_current(t)) {
                Some(table) => Ran::Changed(table.name().to_string()).output().map(|_| ()),
                None => Ok(()),
            },
            Body::Plan { plan, .. } => PreparedStatement::check_plan(plan),
        }
    }

    /// [`PreparedStatement::check_tables`] of a plan made elsewhere (the
    /// PostgreSQL server's, at `Parse`), which may be of any statement.
    pub fn check_plan(plan: &LogicalPlan) -> Result<()> {
        match changed_table(plan) {
            Some(table) => Ran::Changed(table).output().map(|_| ()),
            None => Ok(()),
        }
    }

    /// The statement's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many parameters it takes.
    pub fn parameter_count(&self) -> usize {
        match &self.body {
            Body::Plan { parameters, .. } => parameters.len(),
            Body::Statement { .. } => 0,
        }
    }

    /// The type of each parameter, where the statement fixes it.
    pub fn parameter_types(&self) -> Vec<Option<DataType>> {
        match &self.body {
            Body::Plan { parameters, .. } => parameters.clone(),
            Body::Statement { .. } => Vec::new(),
        }
    }

    /// Whether the statement has the direct path's shape (a given
    /// execution may still go to DataFusion: a null compared, a value
    /// DataFusion would compare in another type).
    pub fn is_direct(&self) -> bool {
        matches!(&self.body, Body::Plan { direct: Some(_), .. })
    }

    /// How the statement runs: `direct (table t)` when the engine answers
    /// it by itself, `DataFusion` otherwise.
    pub fn path(&self) -> String {
        match &self.body {
            Body::Plan { direct: Some(d), .. } => {
                let table = table_of(d).map_or("?", |t| t.name());
                if d.count {
                    format!("direct (table {table}, row count)")
                } else {
                    format!("direct (table {table})")
                }
            }
            _ => "DataFusion".to_string(),
        }
    }

    /// Runs the statement with `params` (`$1` first). A value of another
    /// type than its parameter's is converted only where nothing is lost
    /// and the types are of one kind (numbers, strings, binary, times);
    /// otherwise it is an error, never a silent cast.
    pub async fn execute(&self, params: &[ScalarValue]) -> Result<QueryOutput> {
        self.run(params).await?.output()
    }

    /// [`PreparedStatement::execute`], telling a table that changed since
    /// the plan was made apart from an error (the plan cache plans again).
    async fn run(&self, params: &[ScalarValue]) -> Result<Ran> {
        match &self.body {
            Body::Statement { statement, tables } => {
                if !params.is_empty() {
                    return plan_err!("{} takes no parameters, {} were given", self.text, params.len());
                }
                if let Some(changed) = tables.iter().find(|t| !is_current(t)) {
                    return Ok(Ran::Changed(changed.name().to_string()));
                }
                let frame = crate::sql_statement(&self.ctx, statement.as_ref().clone()).await?;
                collect(frame).await.map(Ran::Output)
            }
            Body::Plan { plan, parameters, direct } => {
                // DDL planned before a block began would commit on its own.
                if in_block(&self.ctx) && matches!(plan.as_ref(), LogicalPlan::Ddl(_)) {
                    return not_impl_err!(
                        "{}: DDL inside BEGIN … COMMIT would commit on its own; COMMIT or ROLLBACK first",
                        self.text
                    );
                }
                let values = bind(parameters, params)?;
                // Inside `BEGIN … COMMIT` reads go through DataFusion's
                // scans, which read the transaction's snapshot.
                if let Some(direct) = direct
                    && !in_block(&self.ctx)
                    && let Some(ran) = run_direct(direct, &values)?
                {
                    return Ok(ran);
                }
                if let Some(name) = changed_table(plan) {
                    return Ok(Ran::Changed(name));
                }
                let path = match plan.as_ref() {
                    LogicalPlan::Explain(e) if e.explain_format == ExplainFormat::Indent => {
                        Some(describe_path(&e.plan, &values)?)
                    }
                    _ => None,
                };
                let plan = plan.as_ref().clone().replace_params_with_values(&ParamValues::from(values))?;
                let mut output = collect(self.ctx.execute_logical_plan(plan).await?).await?;
                if let Some(path) = path {
                    // EXPLAIN's two text columns, one more row: how Basalt
                    // runs the statement (`docs/sql.md`).
                    let row = [
                        Arc::new(StringArray::from(vec!["basalt_path"])) as ArrayRef,
                        Arc::new(StringArray::from(vec![path])),
                    ];
                    output.batches.push(RecordBatch::try_new(Arc::clone(&output.schema), row.to_vec())?);
                }
                Ok(Ran::Output(output))
            }
        }
    }

    /// Whether the plan only reads Basalt tables (nothing else may be
    /// cached: a view or a system table can change under a cached plan).
    fn cacheable(&self) -> bool {
        let Body::Plan { plan, .. } = &self.body else { return false };
        if !matches!(
            plan.as_ref(),
            LogicalPlan::Projection(_)
                | LogicalPlan::Filter(_)
                | LogicalPlan::Aggregate(_)
                | LogicalPlan::Sort(_)
                | LogicalPlan::Limit(_)
                | LogicalPlan::Join(_)
                | LogicalPlan::Union(_)
                | LogicalPlan::Distinct(_)
                | LogicalPlan::SubqueryAlias(_)
                | LogicalPlan::Window(_)
                | LogicalPlan::TableScan(_)
        ) {
            return false;
        }
        let mut only_basalt = true;
        let _ = plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                only_basalt &= basalt_table(scan).is_some();
            }
            Ok(TreeNodeRecursion::Continue)
        });
        only_basalt
    }
}

/// Runs `text` with `params`, reusing this session's prepared plan of the
/// same text when there is one (the plan cache), preparing and keeping it
/// when it reads only Basalt tables.
pub async fn query(ctx: &SessionContext, text: &str, params: &[ScalarValue]) -> Result<QueryOutput> {
    let (cache, parser) = {
        let state = ctx.state_ref();
        let state = state.read();
        (state.config().get_extension::<PlanCache>(), state.config().options().sql_parser.clone())
    };
    if let Some(cache) = &cache
        && let Some(prepared) = cache.get(text, &parser)
    {
        // A table the plan reads changed: nothing ran, plan it again.
        match prepared.run(params).await? {
            Ran::Output(output) => return Ok(output),
            Ran::Changed(_) => cache.remove(text),
        }
    }
    let prepared = match prepare(ctx, text).await {
        Ok(prepared) => Arc::new(prepared),
        // Statements only DataFusion's own parser and planner take (`COPY`,
        // `CREATE EXTERNAL TABLE`, `EXPLAIN FORMAT …`, `RESET`) run as
        // [`crate::sql`] runs them; with parameters there is no such way.
        Err(_) if params.is_empty() => {
            let statements = Parser::parse_sql(&GenericDialect {}, text).ok();
            return collect(crate::sql_parsed(ctx, text, statements).await?).await;
        }
        Err(e) => return Err(e),
    };
    if let Some(cache) = cache.filter(|_| prepared.cacheable()) {
        cache.insert(text, parser, Arc::clone(&prepared));
    }
    prepared.execute(params).await
}

/// The plan cache of a session (a `SessionConfig` extension).
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    /// Each plan with the parser settings it was made under (`SET
    /// datafusion.sql_parser.…` changes what a text means).
    plans: Mutex<HashMap<String, (SqlParserOptions, Arc<PreparedStatement>)>>,
}

impl PlanCache {
    fn get(&self, text: &str, parser: &SqlParserOptions) -> Option<Arc<PreparedStatement>> {
        self.plans.lock().get(text).filter(|(made_under, _)| made_under == parser).map(|(_, p)| Arc::clone(p))
    }

    fn remove(&self, text: &str) {
        self.plans.lock().remove(text);
    }

    fn insert(&self, text: &str, parser: SqlParserOptions, prepared: Arc<PreparedStatement>) {
        let mut plans = self.plans.lock();
        if plans.len() >= PLAN_CACHE_ENTRIES {
            plans.clear();
        }
        plans.insert(text.to_string(), (parser, prepared));
    }
}

async fn collect(frame: datafusion::dataframe::DataFrame) -> Result<QueryOutput> {
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await?;
    Ok(QueryOutput { schema, batches })
}

/// The parameters' types, `$1` first; named parameters are refused.
fn parameter_types(plan: &LogicalPlan) -> Result<Vec<Option<DataType>>> {
    let found = plan.get_parameter_types()?;
    let mut parameters = vec![None; found.len()];
    for (id, data_type) in found {
        let n = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=parameters.len()).contains(n));
        let Some(n) = n else {
            return plan_err!("parameter {id}: parameters are numbered $1, $2, … without gaps");
        };
        parameters[n - 1] = data_type;
    }
    Ok(parameters)
}

/// `params` as the statement's parameters: a count that differs, or a
/// value that does not convert to its parameter's type without loss, is an
/// error.
fn bind(parameters: &[Option<DataType>], params: &[ScalarValue]) -> Result<Vec<ScalarValue>> {
    if params.len() != parameters.len() {
        return plan_err!("the statement takes {} parameters, {} were given", parameters.len(), params.len());
    }
    parameters
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (want, value))| {
            let Some(want) = want else { return Ok(value.clone()) };
            if value.data_type() == *want {
                return Ok(value.clone());
            }
            if value.is_null() {
                return ScalarValue::try_from(want);
            }
            let cast = exact_cast(value, want).filter(|_| same_kind(&value.data_type(), want));
            cast.map_or_else(
                || {
                    plan_err!(
                        "parameter ${}: {value} ({}) is not a value of type {want}, which the statement compares it with",
                        i + 1,
                        value.data_type()
                    )
                },
                Ok,
            )
        })
        .collect()
}

/// Whether a value of type `a` may stand for one of type `b`: both
/// numbers, both strings, both binary, or both times of one kind.
fn same_kind(a: &DataType, b: &DataType) -> bool {
    let kind = |t: &DataType| -> u8 {
        if t.is_numeric() {
            1
        } else if is_string(t) {
            2
        } else if matches!(
            t,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_)
        ) {
            3
        } else if matches!(t, DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)) {
            4
        } else if t == &DataType::Boolean {
            5
        } else {
            0
        }
    };
    let k = kind(a);
    k != 0 && k == kind(b)
}

/// The first Basalt table `plan` reads or writes (an `INSERT`'s target)
/// that was dropped or changed since the plan was made ([`is_current`]):
/// a plan keeps the table as it was (its columns, their types, its key),
/// and run on the new one it would read the wrong columns, decode one
/// type's bytes as another's, or scan the wrong key range.
fn changed_table(plan: &LogicalPlan) -> Option<String> {
    let mut changed = None;
    let _ = plan.apply_with_subqueries(|node| {
        let source = match node {
            LogicalPlan::TableScan(scan) => Some(&scan.source),
            LogicalPlan::Dml(dml) => Some(&dml.target),
            _ => None,
        };
        if let Some(table) = source.and_then(basalt_provider)
            && let Some(table) = table.downcast_ref::<BasaltTable>()
            && !is_current(table)
        {
            changed = Some(table.name().to_string());
        }
        Ok(if changed.is_some() { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    changed
}

/// Whether the table `provider` was made from is still there as it was:
/// the same schema and key (`BasaltTable::made_from`) and the same column
/// defaults, which a planned `INSERT` writes for columns it leaves out.
/// A column dropped and added again with its name, type and default reads
/// as the same column: a plan names columns, and reads the new one's
/// values. (A schema version number of the engine's would say this at
/// once; the engine has none public yet.)
fn is_current(provider: &BasaltTable) -> bool {
    provider.table().is_ok_and(|table| is_current_handle(provider, &table))
}

/// [`is_current`] of a handle opened now.
fn is_current_handle(provider: &BasaltTable, table: &basalt::Table) -> bool {
    use datafusion::catalog::TableProvider;
    if !provider.made_from(table) {
        return false;
    }
    // One load gives the schema and its defaults; a change since
    // `made_from` shows as another schema.
    let (schema, defaults) = table.schema_with_defaults();
    schema == *provider.schema_ref()
        && schema.fields().iter().zip(defaults).all(|(f, default)| {
            let now = default.and_then(|v| ScalarValue::try_from_array(&v, 0).ok());
            let then = match provider.get_column_default(f.name()) {
                Some(Expr::Literal(v, _)) => Some(v.clone()),
                _ => None,
            };
            now == then
        })
}

/// The Basalt tables a statement Basalt runs itself names, as they are
/// now: those of a `DELETE` or `UPDATE` (its target and any table its
/// `WHERE` reads). Other statements (`CREATE INDEX`, `ALTER TABLE`) act on
/// the table as it is when they run.
fn tables_named(ctx: &SessionContext, statement: &Statement) -> Result<Vec<BasaltTable>> {
    use datafusion::sql::sqlparser::ast::visit_relations;
    if !matches!(statement, Statement::Delete(_) | Statement::Update(_)) {
        return Ok(Vec::new());
    }
    // A session over no Basalt database fails when the statement runs.
    let Ok(db) = crate::database(ctx) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    let _ = visit_relations(statement, |name| {
        if let Ok(name) = crate::last_ident(name)
            && !names.contains(&name)
        {
            names.push(name);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    let present = db.tables();
    names
        .iter()
        .filter(|name| present.contains(name))
        .map(|name| BasaltTable::try_new(Arc::clone(&db), name).map_err(to_df))
        .collect()
}

/// The Basalt table a scan reads, if it reads one.
fn basalt_table(scan: &TableScan) -> Option<Arc<dyn datafusion::catalog::TableProvider>> {
    basalt_provider(&scan.source)
}

/// The Basalt table behind a plan's table source, if it is one.
fn basalt_provider(
    source: &Arc<dyn datafusion::logical_expr::TableSource>,
) -> Option<Arc<dyn datafusion::catalog::TableProvider>> {
    let provider = source_as_provider(source).ok()?;
    provider.downcast_ref::<BasaltTable>().is_some().then_some(provider)
}

fn table_of(direct: &Direct) -> Option<&BasaltTable> {
    direct.table.downcast_ref::<BasaltTable>()
}

/// The direct path of a plan `[Limit] Projection [Filter] TableScan` over a
/// Basalt table, with plain (possibly renamed) columns projected and a
/// filter of comparisons, ranges and null tests of columns with values or
/// parameters; `None` for any other plan.
fn direct_shape(plan: &LogicalPlan) -> Option<Direct> {
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
    let table = basalt_table(scan)?;
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
    Some(Direct { table, columns, filters, limit, schema: output, count: false })
}

/// The direct path of `SELECT count(*) FROM t` (or `count(1)`, renamed or
/// not) over a Basalt table without a filter: `Aggregate` with no
/// grouping and one plain count of a non-null value over the scan, under
/// a projection of its one column or none.
fn count_shape(plan: &LogicalPlan) -> Option<Direct> {
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
    let table = basalt_table(scan)?;
    let schema = Arc::new(Schema::new(plan.schema().as_arrow().fields().clone()));
    Some(Direct { table, columns: Vec::new(), filters: Vec::new(), limit: None, schema, count: true })
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

fn is_string(t: &DataType) -> bool {
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
    Lookup { index: String, values: Vec<OwnedKeyValue>, whole: bool, pushed: crate::pushdown::Pushdown },
    /// The engine's scan of a key range with a filter (it may pick an
    /// index for the filter itself), opened, with what it was opened on.
    Scan(Box<basalt::TableScan>, crate::pushdown::Pushdown),
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
        match open_scan(direct, provider, table, &pushed)? {
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
                crate::pushdown::describe_range(&pushed.range),
                pushed
                    .predicates
                    .iter()
                    .map(crate::pushdown::describe_predicate)
                    .collect::<Vec<_>>()
                    .join(" AND ")
            ),
            Route::DataFusion(why) => format!("DataFusion's plan above ({why})"),
        }
    }
}

/// Whether `ctx` is inside `BEGIN … COMMIT` (`txn.rs`).
fn in_block(ctx: &SessionContext) -> bool {
    crate::txn::SessionTransaction::open_in(ctx)
}

/// Runs a direct query with its parameters' values; `None` when these
/// values take it to DataFusion ([`Route::DataFusion`]).
fn run_direct(direct: &Direct, values: &[ScalarValue]) -> Result<Option<Ran>> {
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
    let names = direct.column_names(provider.schema_ref());
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
                Err(_) => match open_scan(direct, provider, &table, &pushed)? {
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
fn open_scan(
    direct: &Direct,
    provider: &BasaltTable,
    table: &basalt::Table,
    pushed: &crate::pushdown::Pushdown,
) -> Result<Option<basalt::TableScan>> {
    // The planned names: positions in today's schema may be other columns.
    let names = direct.column_names(provider.schema_ref());
    let opts =
        ScanOptions::default().range(borrowed(&pushed.range)).projection(Some(names)).filter(pushed.filter());
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
fn describe_path(plan: &LogicalPlan, values: &[ScalarValue]) -> Result<String> {
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
fn index_equality(
    table: &basalt::Table,
    pushed: &crate::pushdown::Pushdown,
) -> Option<(String, Vec<OwnedKeyValue>, bool)> {
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
fn point_key(
    pushed: &crate::pushdown::Pushdown,
    primary_key: &[usize],
    schema: &Schema,
) -> Option<Vec<OwnedKeyValue>> {
    let (Bound::Included(lo), Bound::Included(hi)) = &pushed.range else { return None };
    let only_key_equalities = pushed.predicates.len() == primary_key.len()
        && pushed.predicates.iter().all(|p| {
            p.op == basalt::CmpOp::Eq && primary_key.iter().any(|&k| schema.field(k).name() == &p.column)
        });
    (lo == hi && lo.len() == primary_key.len() && only_key_equalities).then(|| lo.clone())
}
