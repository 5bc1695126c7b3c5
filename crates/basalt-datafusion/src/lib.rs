//! SQL over Basalt tables through Apache DataFusion.
//!
//! [`session`] returns a DataFusion `SessionContext` whose default schema is
//! the database's catalog: every table is queryable by name, tables created
//! later (by SQL or the engine's API) appear at once, and `CREATE TABLE`
//! (with a `PRIMARY KEY`), `DROP TABLE` and `INSERT` reach the engine. Scans push their filters into the engine, which turns
//! primary-key comparisons into a key range, answers others with an index
//! when one fits and skips blocks by their zone maps; projections and
//! limits are pushed too, and key ranges split the scan across cores.
//! [`sql`] adds the statements DataFusion does not plan (`CREATE INDEX`,
//! `DROP INDEX`) or plans unsafely for a table provider (`DELETE`,
//! `UPDATE`: `dml.rs`). `docs/sql.md` lists what works.
//!
//! ```
//! use std::sync::Arc;
//! use basalt_datafusion::datafusion::scalar::ScalarValue;
//! use basalt_datafusion::{query, session, sql};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let db = Arc::new(basalt::Db::open(dir.path(), basalt::Options::default())?);
//! let ctx = session(db);
//! tokio::runtime::Runtime::new()?.block_on(async {
//!     sql(&ctx, "CREATE TABLE t (id BIGINT PRIMARY KEY, city TEXT)").await?.collect().await?;
//!     sql(&ctx, "INSERT INTO t VALUES (1, 'Oslo'), (2, 'Lima'), (3, 'Oslo')").await?.collect().await?;
//!     sql(&ctx, "CREATE INDEX by_city ON t (city)").await?.collect().await?;
//!     // Answered through the index.
//!     let oslo = sql(&ctx, "SELECT id FROM t WHERE city = 'Oslo'").await?.collect().await?;
//!     assert_eq!(oslo.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
//!     // Prepared once per session and text, run with its parameters.
//!     let row = query(&ctx, "SELECT city FROM t WHERE id = $1", &[ScalarValue::Int64(Some(2))]).await?;
//!     assert_eq!(row.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
//!     Ok::<_, basalt_datafusion::datafusion::error::DataFusionError>(())
//! })?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod aggregates;
mod alter;
mod dml;
mod error;
mod exec;
mod in_lists;
mod insert;
mod prepared;
mod pushdown;
mod schema;
mod stats;
mod table;
mod txn;

use std::sync::Arc;

use basalt::{Db, IndexOptions};
use datafusion::common::{Result, exec_err, internal_err, not_impl_err, plan_err};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::sql::sqlparser::ast::{self, ObjectType, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The DataFusion this crate is built on, for callers that need its types.
pub use datafusion;
pub use prepared::{PreparedStatement, QueryOutput, prepare, query};
pub use schema::BasaltSchema;
pub use table::BasaltTable;

use crate::error::to_df;

/// The catalog and schema the session's tables live in (DataFusion's
/// defaults, so unqualified names find them).
const CATALOG: &str = "datafusion";
const SCHEMA: &str = "public";

/// A DataFusion session over every table of `db`.
pub fn session(db: Arc<Db>) -> SessionContext {
    session_with_config(db, SessionConfig::new())
}

/// [`session`] with DataFusion settings of the caller's (its partition
/// count, batch size…). String columns of `CREATE TABLE` are `Utf8`, the
/// type Basalt stores.
pub fn session_with_config(db: Arc<Db>, config: SessionConfig) -> SessionContext {
    let mut config = config
        .with_information_schema(true)
        .with_default_catalog_and_schema(CATALOG, SCHEMA)
        .with_extension(Arc::new(prepared::PlanCache::default()))
        .with_extension(Arc::new(txn::SessionTransaction::default()));
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    let ctx = SessionContext::new_with_config(config);
    ctx.add_analyzer_rule(Arc::new(in_lists::NullSafeInLists));
    ctx.add_analyzer_rule(Arc::new(aggregates::ExactAggregates));
    if let Some(catalog) = ctx.catalog(CATALOG) {
        // Replaces the default in-memory schema.
        let _ = catalog.register_schema(SCHEMA, Arc::new(BasaltSchema::new(db)));
    }
    ctx
}

/// Runs one SQL statement in a [`session`]: `CREATE INDEX`, `DROP INDEX`,
/// `DELETE` and `UPDATE` here (`ctx.sql` refuses the last two on Basalt
/// tables: `dml.rs` says why), anything else through DataFusion.
///
/// `CREATE [UNIQUE] INDEX [IF NOT EXISTS] name ON table (col, …)
/// [INCLUDE (col, …)]` builds a Basalt index (backfilled, then kept with
/// every write); `DROP INDEX [IF EXISTS] name [ON table]` drops one.
pub async fn sql(ctx: &SessionContext, text: &str) -> Result<DataFrame> {
    let statements = Parser::parse_sql(&GenericDialect {}, text);
    // EXPLAIN of a query without parameters, as `query` runs it:
    // DataFusion's plans and a row saying how Basalt runs the statement
    // (`basalt_path`). With parameters it is DataFusion's alone (no values
    // to choose a path with).
    if let Ok([Statement::Explain { analyze: false, format: None, .. }]) = statements.as_deref()
        && let Ok(prepared) = prepare(ctx, text).await
        && prepared.parameter_count() == 0
    {
        let output = prepared.execute(&[]).await?;
        return ctx.read_batches(output.batches);
    }
    sql_parsed(ctx, text, statements.ok()).await
}

/// [`sql`] of `text`, parsed as `statements` (`None`: sqlparser's AST
/// does not take it), without the EXPLAIN of [`query`].
pub(crate) async fn sql_parsed(
    ctx: &SessionContext,
    text: &str,
    statements: Option<Vec<Statement>>,
) -> Result<DataFrame> {
    if let Some([statement]) = statements.as_deref() {
        refuse_in_block(ctx, statement)?;
        insert::check_literal_nulls(ctx, statement)?;
    }
    match statements {
        Some(mut statements) if statements.len() == 1 && runs_here(&statements[0]) => {
            let statement = statements.remove(0);
            run_here(ctx, &statement).await
        }
        // DataFusion's own parser: it knows statements sqlparser's AST
        // does not (`CREATE EXTERNAL TABLE`, `COPY`…).
        _ => ctx.sql(text).await,
    }
}

/// [`sql`] for a statement its caller parsed already (the PostgreSQL
/// server parses with its own dialect).
pub async fn sql_statement(ctx: &SessionContext, statement: Statement) -> Result<DataFrame> {
    refuse_in_block(ctx, &statement)?;
    insert::check_literal_nulls(ctx, &statement)?;
    if runs_here(&statement) {
        return run_here(ctx, &statement).await;
    }
    let plan = ctx
        .state()
        .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(statement)))
        .await?;
    ctx.execute_logical_plan(plan).await
}

/// Whether [`sql`] runs `statement` itself rather than DataFusion.
fn runs_here(statement: &Statement) -> bool {
    match statement {
        Statement::CreateIndex(_)
        | Statement::AlterTable(_)
        | Statement::Delete(_)
        | Statement::Update(_)
        | Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. } => true,
        Statement::Drop { object_type, .. } => *object_type == ObjectType::Index,
        Statement::CreateTable(create) => create.or_replace,
        _ => false,
    }
}

async fn run_here(ctx: &SessionContext, statement: &Statement) -> Result<DataFrame> {
    match statement {
        Statement::CreateIndex(create) => {
            create_index(ctx, create)?;
            empty(ctx)
        }
        Statement::Drop { object_type: ObjectType::Index, if_exists, names, table, .. } => {
            drop_index(ctx, names, table.as_ref(), *if_exists)?;
            empty(ctx)
        }
        Statement::AlterTable(alter) => {
            alter::alter_table(ctx, alter).await?;
            empty(ctx)
        }
        Statement::CreateTable(create) if create.or_replace => not_impl_err!(
            "CREATE OR REPLACE TABLE: DataFusion drops the old table before the new one's query runs, \
             which would lose it; DROP TABLE first"
        ),
        Statement::StartTransaction { modes, .. } if !modes.is_empty() => not_impl_err!(
            "{statement}: Basalt's transactions take no modes (they are read-write, snapshot isolation)"
        ),
        Statement::Commit { chain: true, .. } | Statement::Rollback { chain: true, .. } => {
            not_impl_err!("{statement}: AND CHAIN is not supported; BEGIN again after it")
        }
        Statement::StartTransaction { .. } => {
            transaction(ctx)?.begin(database(ctx)?.as_ref())?;
            empty(ctx)
        }
        Statement::Commit { .. } => {
            let slot = transaction(ctx)?;
            // A commit waits for its group's WAL append: not on an async worker.
            tokio::task::spawn_blocking(move || slot.commit())
                .await
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))??;
            empty(ctx)
        }
        Statement::Rollback { savepoint: None, .. } => {
            transaction(ctx)?.rollback()?;
            empty(ctx)
        }
        Statement::Rollback { .. } | Statement::Savepoint { .. } | Statement::ReleaseSavepoint { .. } => {
            not_impl_err!("{statement}: Basalt's transactions have no savepoints")
        }
        Statement::Delete(delete) => dml::delete(ctx, &database(ctx)?, delete).await,
        Statement::Update(update) => dml::update(ctx, &database(ctx)?, update).await,
        other => internal_err!("{other} does not run in basalt_datafusion"),
    }
}

/// Whether `ctx` is inside `BEGIN … COMMIT`: the statements since `BEGIN`
/// read its snapshot and write into one transaction, which `COMMIT`
/// applies at once or refuses with a conflict, and `ROLLBACK` (or dropping
/// the session) discards.
pub fn in_transaction(ctx: &SessionContext) -> bool {
    txn::SessionTransaction::open_in(ctx)
}

/// Marks the open block of `ctx` as failed (a statement in it failed):
/// its `COMMIT` then rolls it back and says why, as PostgreSQL does, so
/// a script that goes on after an error never commits half of its block.
/// Does nothing outside a block.
pub fn fail_transaction(ctx: &SessionContext, reason: &str) {
    if let Some(slot) = txn::SessionTransaction::of(ctx.state_ref().read().config()) {
        slot.fail(reason);
    }
}

/// The transaction slot of a session made by [`session`].
fn transaction(ctx: &SessionContext) -> Result<Arc<txn::SessionTransaction>> {
    let Some(slot) = txn::SessionTransaction::of(ctx.state_ref().read().config()) else {
        return plan_err!("this session has no Basalt database: make it with basalt_datafusion::session");
    };
    Ok(slot)
}

/// Refuses `statement` inside `BEGIN … COMMIT` when the block cannot hold
/// it: DDL would commit on its own, outside the block, whatever the block
/// did next.
pub(crate) fn refuse_in_block(ctx: &SessionContext, statement: &Statement) -> Result<()> {
    let open = txn::SessionTransaction::open_in(ctx);
    let ddl = matches!(
        statement,
        Statement::CreateTable(_)
            | Statement::CreateIndex(_)
            | Statement::CreateView { .. }
            | Statement::Drop { .. }
            | Statement::AlterTable { .. }
            | Statement::Truncate { .. }
    );
    if open && ddl {
        return not_impl_err!(
            "{statement}: DDL inside BEGIN … COMMIT would commit on its own; COMMIT or ROLLBACK first"
        );
    }
    Ok(())
}

/// The database behind a session made by [`session`].
pub(crate) fn database(ctx: &SessionContext) -> Result<Arc<Db>> {
    let schema = ctx.catalog(CATALOG).and_then(|c| c.schema(SCHEMA));
    let Some(basalt) = schema.as_ref().and_then(|s| s.downcast_ref::<BasaltSchema>()) else {
        return plan_err!("this session has no Basalt database: make it with basalt_datafusion::session");
    };
    Ok(basalt.db().clone())
}

fn empty(ctx: &SessionContext) -> Result<DataFrame> {
    Ok(DataFrame::new(ctx.state(), LogicalPlanBuilder::empty(false).build()?))
}

/// The last part of a possibly qualified name, normalized as DataFusion
/// does (unquoted names in lower case).
pub(crate) fn last_ident(name: &ast::ObjectName) -> Result<String> {
    let Some(ident) = name.0.last().and_then(|p| p.as_ident()) else {
        return plan_err!("{name} is not a name");
    };
    Ok(normalized(ident))
}

pub(crate) fn normalized(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

fn create_index(ctx: &SessionContext, create: &ast::CreateIndex) -> Result<()> {
    let Some(name) = &create.name else {
        return plan_err!("CREATE INDEX needs a name: CREATE INDEX name ON table (column, …)");
    };
    if create.using.is_some() || create.predicate.is_some() || !create.with.is_empty() {
        return not_impl_err!(
            "CREATE INDEX: USING, WHERE (partial indexes) and WITH are not supported by Basalt"
        );
    }
    let name = last_ident(name)?;
    let db = database(ctx)?;
    let table = db.table(&last_ident(&create.table_name)?).map_err(to_df)?;
    if create.if_not_exists && table.indexes().iter().any(|i| i.name == name) {
        return Ok(());
    }
    let mut columns = Vec::with_capacity(create.columns.len());
    for c in &create.columns {
        match &c.column.expr {
            ast::Expr::Identifier(ident) if c.column.options.asc != Some(false) => {
                columns.push(normalized(ident));
            }
            other => return not_impl_err!("CREATE INDEX {name}: {other} is not a column in ascending order"),
        }
    }
    let refs: Vec<&str> = columns.iter().map(String::as_str).collect();
    let include: Vec<String> = create.include.iter().map(normalized).collect();
    let opts = IndexOptions::default().unique(create.unique).include(include);
    table.create_index(&name, &refs, opts).map_err(to_df)
}

fn drop_index(
    ctx: &SessionContext,
    names: &[ast::ObjectName],
    on: Option<&ast::ObjectName>,
    if_exists: bool,
) -> Result<()> {
    let db = database(ctx)?;
    for name in names {
        let name = last_ident(name)?;
        let tables = match on {
            Some(t) => vec![last_ident(t)?],
            None => db.tables(),
        };
        let mut holders = Vec::new();
        for t in tables {
            let table = db.table(&t).map_err(to_df)?;
            if table.indexes().iter().any(|i| i.name == name) {
                holders.push(table);
            }
        }
        match holders.as_slice() {
            [table] => table.drop_index(&name).map_err(to_df)?,
            [] if if_exists => {}
            [] => return exec_err!("no index {name}"),
            _ => return plan_err!("index {name} exists on several tables: DROP INDEX {name} ON table"),
        }
    }
    Ok(())
}
