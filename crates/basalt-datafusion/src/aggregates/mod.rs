//! Guards against two wrong answers of DataFusion 55's aggregates.
//!
//! - Grouped `min`/`max` of a float column compare with `partial_cmp` and
//!   start from `f64::MAX`/`f64::MIN`: a NaN in a group is replaced by the
//!   next value (`-5, NaN, 7` gave min 7, max 7) and a group of only `inf`
//!   gave min `1.797e308` (apache/datafusion#24432, fixed upstream after
//!   55.2). Their ungrouped form orders by IEEE total order, where `-NaN`
//!   sorts below `-inf`. Basalt orders floats as PostgreSQL and DuckDB do:
//!   every NaN equal and above `+inf` (`extremes.rs`).
//! - `sum` of an integer column adds with wrapping: two rows of
//!   `9223372036854775807` summed to `-2`. Basalt sums in 128 bits and
//!   refuses a result its type cannot hold (`sum.rs`), as PostgreSQL
//!   refuses `bigint out of range`.
//!
//! An analyzer rule (after type coercion, so argument types are final)
//! swaps the built-in function for Basalt's in every aggregate and window
//! expression where it is wrong, keeping the name, so output columns and
//! plans read as before; every other type keeps DataFusion's.

mod extremes;
mod sum;

use std::sync::Arc;

use arrow_schema::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::functions_aggregate::min_max::{Max, Min};
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::{AggregateUDF, Expr, ExprSchemable, LogicalPlan, WindowFunctionDefinition};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (after type coercion, before the optimizer).
#[derive(Debug, Default)]
pub(crate) struct ExactAggregates;

impl AnalyzerRule for ExactAggregates {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            // Aggregate functions live in these two nodes only; their
            // arguments are over the input's schema.
            let schema = match &plan {
                LogicalPlan::Aggregate(aggregate) => Arc::clone(aggregate.input.schema()),
                LogicalPlan::Window(window) => Arc::clone(window.input.schema()),
                _ => return Ok(Transformed::no(plan)),
            };
            plan.map_expressions(|e| e.transform_up(|e| replace(e, &schema)))
        })
        .data()
    }

    fn name(&self) -> &'static str {
        "basalt_exact_aggregates"
    }
}

fn replace(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match expr {
        Expr::AggregateFunction(AggregateFunction { func, params }) => {
            match exact(&func, &params.args, schema)? {
                Some(func) => {
                    Ok(Transformed::yes(Expr::AggregateFunction(AggregateFunction { func, params })))
                }
                None => Ok(Transformed::no(Expr::AggregateFunction(AggregateFunction { func, params }))),
            }
        }
        Expr::WindowFunction(mut window) => {
            let WindowFunction { fun: WindowFunctionDefinition::AggregateUDF(func), params } =
                window.as_ref()
            else {
                return Ok(Transformed::no(Expr::WindowFunction(window)));
            };
            match exact(func, &params.args, schema)? {
                Some(func) => {
                    window.fun = WindowFunctionDefinition::AggregateUDF(func);
                    Ok(Transformed::yes(Expr::WindowFunction(window)))
                }
                None => Ok(Transformed::no(Expr::WindowFunction(window))),
            }
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Basalt's function in place of `func` over `args`, where DataFusion's
/// is wrong for their type.
fn exact(func: &Arc<AggregateUDF>, args: &[Expr], schema: &DFSchema) -> Result<Option<Arc<AggregateUDF>>> {
    let [arg] = args else { return Ok(None) };
    let inner = func.inner();
    let (min, max, sum) = (inner.is::<Min>(), inner.is::<Max>(), inner.is::<Sum>());
    if !(min || max || sum) {
        return Ok(None);
    }
    let data_type = arg.get_type(schema)?;
    let replacement = if (min || max) && matches!(data_type, DataType::Float32 | DataType::Float64) {
        extremes::FloatExtreme::udaf(Arc::clone(func), max)
    } else if sum && matches!(data_type, DataType::Int64 | DataType::UInt64) {
        sum::IntegerSum::udaf(Arc::clone(func))
    } else {
        return Ok(None);
    };
    Ok(Some(replacement))
}
