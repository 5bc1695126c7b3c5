//! Whether the Basalt tables a plan reads or writes are still the ones
//! it was planned against: a plan keeps a table's columns, their types
//! and its key, and run on a table changed since it would read the wrong
//! columns or key range. A changed table is "prepare it again".

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan, TableScan};

use crate::table::BasaltTable;

/// The first Basalt table `plan` reads or writes (an `INSERT`'s target)
/// that was dropped or changed since the plan was made ([`is_current`]):
/// a plan keeps the table as it was (its columns, their types, its key),
/// and run on the new one it would read the wrong columns, decode one
/// type's bytes as another's, or scan the wrong key range.
pub(crate) fn changed_table(plan: &LogicalPlan) -> Option<String> {
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
pub(crate) fn is_current(provider: &BasaltTable) -> bool {
    provider.table().is_ok_and(|table| is_current_handle(provider, &table))
}

/// [`is_current`] of a handle opened now.
pub(crate) fn is_current_handle(provider: &BasaltTable, table: &basalt::Table) -> bool {
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

/// The Basalt table a scan reads, if it reads one.
pub(crate) fn basalt_table(scan: &TableScan) -> Option<Arc<dyn datafusion::catalog::TableProvider>> {
    basalt_provider(&scan.source)
}

/// The Basalt table behind a plan's table source, if it is one.
fn basalt_provider(
    source: &Arc<dyn datafusion::logical_expr::TableSource>,
) -> Option<Arc<dyn datafusion::catalog::TableProvider>> {
    let provider = source_as_provider(source).ok()?;
    provider.downcast_ref::<BasaltTable>().is_some().then_some(provider)
}
