//! Which statements Basalt runs itself and which DataFusion plans: the
//! dispatch behind [`crate::sql`], [`crate::sql_statement`] and prepared
//! statements. Basalt runs `CREATE INDEX`, `DROP INDEX`, `ALTER TABLE`,
//! `DELETE`, `UPDATE` and the transaction statements; it refuses `CREATE
//! OR REPLACE TABLE` and DDL inside `BEGIN … COMMIT`.

use datafusion::common::{Result, internal_err, not_impl_err};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::sql::sqlparser::ast::{ObjectType, Statement};

use crate::index::{create_index, drop_index};
use crate::schema::database;
use crate::txn::{SessionTransaction, transaction};
use crate::{alter, dml, insert};

/// [`crate::sql`] of `text`, parsed as `statements` (`None`: sqlparser's AST
/// does not take it), without the EXPLAIN of [`crate::query`].
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

/// [`crate::sql`] for a statement its caller parsed already (the PostgreSQL
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

/// Whether [`crate::sql`] runs `statement` itself rather than DataFusion.
pub(crate) fn runs_here(statement: &Statement) -> bool {
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

/// Refuses `statement` inside `BEGIN … COMMIT` when the block cannot hold
/// it: DDL would commit on its own, outside the block, whatever the block
/// did next.
pub(crate) fn refuse_in_block(ctx: &SessionContext, statement: &Statement) -> Result<()> {
    let open = SessionTransaction::open_in(ctx);
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

fn empty(ctx: &SessionContext) -> Result<DataFrame> {
    Ok(DataFrame::new(ctx.state(), LogicalPlanBuilder::empty(false).build()?))
}
