//! The crate's two ways to run SQL text: [`sql`], which answers with a
//! DataFusion `DataFrame`, and [`query`], which runs the text's prepared
//! statement from the session's plan cache and answers with its rows.

use std::sync::Arc;

use datafusion::common::{Result, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::output::{QueryOutput, Ran, collect};
use crate::plan_cache::PlanCache;
use crate::prepared::prepare;
use crate::statement::sql_parsed;

/// Runs one SQL statement in a [`crate::session`]: `CREATE INDEX`, `DROP INDEX`,
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
            return collect(sql_parsed(ctx, text, statements).await?).await;
        }
        Err(e) => return Err(e),
    };
    if let Some(cache) = cache.filter(|_| prepared.cacheable()) {
        cache.insert(text, parser, Arc::clone(&prepared));
    }
    prepared.execute(params).await
}
