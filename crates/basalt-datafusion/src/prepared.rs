//! Prepared statements: a statement parsed and planned once
//! ([`prepare`]) and then run many times with parameter values (`$1`,
//! `$2`, …) bound as values, never spliced into text. A query of the
//! direct path's shape (`direct.rs`) is answered by the engine alone;
//! everything else runs the stored logical plan through DataFusion's
//! optimizer and executor, skipping only the parse and the SQL planning.
//! A statement whose tables changed since it was prepared is refused
//! ("prepare it again", `planned_tables.rs`).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::DataType;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ParamValues, Result, ScalarValue, not_impl_err, plan_err};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{ExplainFormat, LogicalPlan};
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::direct::{Direct, count_shape, describe_path, direct_shape, is_string, run_direct, table_of};
use crate::error::to_df;
use crate::insert::check_literal_nulls;
use crate::names::last_ident;
use crate::output::{QueryOutput, Ran, collect};
use crate::planned_tables::{basalt_table, changed_table, is_current};
use crate::pushdown::exact_cast;
use crate::schema::database;
use crate::statement::{refuse_in_block, runs_here, sql_statement};
use crate::table::BasaltTable;
use crate::txn::SessionTransaction;

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

/// Parses and plans `text` once. Parameters are written `$1`, `$2`, …; a
/// parameter's type is the type of what it is compared with.
pub async fn prepare(ctx: &SessionContext, text: &str) -> Result<PreparedStatement> {
    let mut statements = Parser::parse_sql(&GenericDialect {}, text)?;
    if statements.len() != 1 {
        return plan_err!("prepare takes one statement, not {}", statements.len());
    }
    let statement = statements.remove(0);
    refuse_in_block(ctx, &statement)?;
    check_literal_nulls(ctx, &statement)?;
    if runs_here(&statement) {
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
    pub(crate) async fn run(&self, params: &[ScalarValue]) -> Result<Ran> {
        match &self.body {
            Body::Statement { statement, tables } => {
                if !params.is_empty() {
                    return plan_err!("{} takes no parameters, {} were given", self.text, params.len());
                }
                if let Some(changed) = tables.iter().find(|t| !is_current(t)) {
                    return Ok(Ran::Changed(changed.name().to_string()));
                }
                let frame = sql_statement(&self.ctx, statement.as_ref().clone()).await?;
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
    pub(crate) fn cacheable(&self) -> bool {
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
    let Ok(db) = database(ctx) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    let _ = visit_relations(statement, |name| {
        if let Ok(name) = last_ident(name)
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

/// Whether `ctx` is inside `BEGIN … COMMIT` (`txn.rs`).
fn in_block(ctx: &SessionContext) -> bool {
    SessionTransaction::open_in(ctx)
}
