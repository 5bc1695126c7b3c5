//! `CREATE INDEX` and `DROP INDEX` in SQL: Basalt's secondary indexes
//! (`docs/sql.md`), which DataFusion does not plan.

use basalt::IndexOptions;
use datafusion::common::{Result, exec_err, not_impl_err, plan_err};
use datafusion::execution::context::SessionContext;
use datafusion::sql::sqlparser::ast;

use crate::error::to_df;
use crate::names::{last_ident, normalized};
use crate::schema::database;

pub(crate) fn create_index(ctx: &SessionContext, create: &ast::CreateIndex) -> Result<()> {
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

pub(crate) fn drop_index(
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
