//! A guard against a simplification of DataFusion 55 that is wrong where
//! a value is NULL. Two `IN` lists on one expression joined by `AND`, or
//! two `NOT IN` lists joined by `OR`, are merged into one list by
//! intersection (`expr_simplifier.rs`), and an empty list becomes a
//! constant: `s NOT IN ('a') OR s NOT IN ('b')` became `true` where `s` is
//! NULL (the answer is NULL), so a `WHERE` kept rows it must drop, and
//! `NOT (s IN ('a') AND s IN ('b'))` became `true` too. Found by
//! `python/tests/test_sql_differential.py` (seed 2315108096) against
//! DuckDB; DataFusion fixed it upstream (apache/datafusion#24258) in a
//! release after the one Basalt builds on.
//!
//! Each list that could meet such a rule is hidden from it as `CASE WHEN
//! expr IS NULL THEN NULL ELSE <list> END`, which answers the same for
//! every value; the simplifier still reduces the rest.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator, lit, when};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (after type coercion, before the optimizer).
#[derive(Debug, Default)]
pub(crate) struct NullSafeInLists;

impl AnalyzerRule for NullSafeInLists {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            // A rewritten expression keeps its name: a projection's output
            // columns are named after their expressions.
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|e| {
                let name = names.save(&e);
                Ok(e.transform_up(guard_chain)?.update_data(|e| name.restore(e)))
            })
        })
        .data()
    }

    fn name(&self) -> &'static str {
        "basalt_null_safe_in_lists"
    }
}

/// At an `AND` or `OR`: the lists among the operands of its whole chain
/// (nested `AND`s of an `AND`, `OR`s of an `OR`) that share their
/// expression with another such list are guarded.
fn guard_chain(expr: Expr) -> Result<Transformed<Expr>> {
    let op = match &expr {
        Expr::BinaryExpr(BinaryExpr { op: op @ (Operator::And | Operator::Or), .. }) => *op,
        _ => return Ok(Transformed::no(expr)),
    };
    let mut lists = Vec::new();
    collect_lists(&expr, op, &mut lists);
    let shared: Vec<Expr> = lists
        .iter()
        .filter(|e| lists.iter().filter(|other| other == e).count() > 1)
        .map(|e| (*e).clone())
        .collect();
    if shared.is_empty() {
        return Ok(Transformed::no(expr));
    }
    guard_lists(expr, op, &shared).map(Transformed::yes)
}

/// Whether a list takes part in the merges under `op`: under `OR` only
/// `NOT IN` lists are merged (by intersection), under `AND` every list.
fn merged_under(list: &InList, op: Operator) -> bool {
    op == Operator::And || list.negated
}

/// The expressions of the lists among the operands of `expr`'s chain of
/// `op`.
fn collect_lists<'e>(expr: &'e Expr, op: Operator, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: o, right }) if *o == op => {
            collect_lists(left, op, out);
            collect_lists(right, op, out);
        }
        Expr::InList(list) if merged_under(list, op) => out.push(&list.expr),
        _ => {}
    }
}

/// `expr`'s chain of `op` with each list on one of `shared` guarded.
fn guard_lists(expr: Expr, op: Operator, shared: &[Expr]) -> Result<Expr> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: o, right }) if o == op => {
            let left = guard_lists(*left, op, shared)?;
            let right = guard_lists(*right, op, shared)?;
            Ok(Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right))))
        }
        Expr::InList(list) if merged_under(&list, op) && shared.contains(&list.expr) => {
            let value = (*list.expr).clone();
            when(value.is_null(), lit(ScalarValue::Boolean(None))).otherwise(Expr::InList(list))
        }
        other => Ok(other),
    }
}
