//! A sharded store's table as one DataFusion table, from one process: the
//! version current when it is opened is pinned (`ShardedStore::pin`), each
//! shard opened read-only, and a scan is the union of the shards' scans —
//! each with the filters, projection and limit pushed into its engine as
//! for any Basalt table — over only the shards whose key range the
//! filters on a one-column key can meet (the map prunes the others).

use std::sync::Arc;

use arrow_schema::SchemaRef;
use async_trait::async_trait;
use basalt::{Db, KeyValue, Options, ShardMap, ShardedStore, StorePin};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::prelude::SessionContext;

use crate::table::BasaltTable;

/// The table of a sharded store (read only), for DataFusion.
#[derive(Debug)]
pub struct ShardedTable {
    map: ShardMap,
    shards: Vec<BasaltTable>,
    /// Keeps the version's directories while the table is open.
    _pin: StorePin,
}

impl ShardedTable {
    /// The table of the store in `dir`, at its current version; each shard
    /// opened read-only with `options`.
    pub fn open(dir: impl AsRef<std::path::Path>, options: &Options) -> basalt::Result<ShardedTable> {
        let dir = dir.as_ref();
        let pin = ShardedStore::new(dir, options.clone()).pin()?;
        let map = pin.map().clone();
        // Each database has its own block cache: shards left at the default
        // budget share it out, so a query over many shards holds what one
        // database would (a scan fills its cache up to the budget).
        let mut options = options.clone();
        if options.block_cache_bytes == basalt::default_block_cache_bytes() {
            options.block_cache_bytes /= map.shards().len().max(1);
        }
        let shards = map
            .shards()
            .iter()
            .map(|s| {
                let db = Arc::new(Db::open_read_only(dir.join(&s.path), options.clone())?);
                BasaltTable::try_new(db, map.table())
            })
            .collect::<basalt::Result<Vec<_>>>()?;
        Ok(ShardedTable { map, shards, _pin: pin })
    }

    /// The store's map (of the version read).
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The shards a scan with `filters` must read: all, except where a
    /// one-column key is compared with literals, which the map routes.
    fn shards_to_read(&self, filters: &[Expr]) -> Vec<usize> {
        let all: Vec<usize> = (0..self.shards.len()).collect();
        let columns = self.map.key_columns();
        let [key] = columns.as_slice() else { return all };
        let key_type = self.map.key_schema().field(0).data_type().clone();
        let (mut lo, mut hi) = (0, self.shards.len() - 1);
        for term in filters.iter().flat_map(conjuncts) {
            let Expr::BinaryExpr(BinaryExpr { left, op, right }) = term else { continue };
            let (column, literal, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, v, *op),
                (Expr::Literal(v, _), Expr::Column(c)) => match op.swap() {
                    Some(swapped) => (c, v, swapped),
                    None => continue,
                },
                _ => continue,
            };
            if &column.name != key {
                continue;
            }
            let Some(shard) = self.shard_of(literal, &key_type) else { continue };
            match op {
                Operator::Eq => {
                    lo = lo.max(shard);
                    hi = hi.min(shard);
                }
                Operator::Lt | Operator::LtEq => hi = hi.min(shard),
                Operator::Gt | Operator::GtEq => lo = lo.max(shard),
                _ => {}
            }
        }
        if lo > hi { Vec::new() } else { (lo..=hi).collect() }
    }

    /// The shard holding the key `value` (of the key column's type; other
    /// types are not routed).
    fn shard_of(&self, value: &ScalarValue, key_type: &arrow_schema::DataType) -> Option<usize> {
        use arrow_schema::DataType as T;
        let key = match (value, key_type) {
            (ScalarValue::Int8(Some(v)), T::Int8) => KeyValue::I8(*v),
            (ScalarValue::Int16(Some(v)), T::Int16) => KeyValue::I16(*v),
            (ScalarValue::Int32(Some(v)), T::Int32) => KeyValue::I32(*v),
            (ScalarValue::Int64(Some(v)), T::Int64) => KeyValue::I64(*v),
            (ScalarValue::UInt8(Some(v)), T::UInt8) => KeyValue::U8(*v),
            (ScalarValue::UInt16(Some(v)), T::UInt16) => KeyValue::U16(*v),
            (ScalarValue::UInt32(Some(v)), T::UInt32) => KeyValue::U32(*v),
            (ScalarValue::UInt64(Some(v)), T::UInt64) => KeyValue::U64(*v),
            (ScalarValue::Utf8(Some(v)) | ScalarValue::LargeUtf8(Some(v)), T::Utf8 | T::LargeUtf8) => {
                KeyValue::Str(v)
            }
            _ => return None,
        };
        self.map.shard_of(&[key]).ok()
    }
}

/// The terms of `expr`'s top-level AND chain.
fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            let mut terms = conjuncts(left);
            terms.extend(conjuncts(right));
            terms
        }
        other => vec![other],
    }
}

#[async_trait]
impl TableProvider for ShardedTable {
    fn schema(&self) -> SchemaRef {
        self.shards[0].schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut plans = Vec::new();
        for i in self.shards_to_read(filters) {
            plans.push(self.shards[i].scan(state, projection, filters, limit).await?);
        }
        if plans.is_empty() {
            let schema = self.schema();
            let projected = match projection {
                Some(p) => Arc::new(schema.project(p)?),
                None => schema,
            };
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        UnionExec::try_new(plans)
    }

    /// As each shard's: every shard has the table's schema.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        self.shards[0].supports_filters_pushdown(filters)
    }
}

/// A session whose table `name` of the store's map is the store in `dir`
/// (read only, at the version current now).
pub fn sharded_session(
    dir: impl AsRef<std::path::Path>,
    options: &Options,
) -> basalt::Result<SessionContext> {
    let table = ShardedTable::open(dir, options)?;
    let ctx = SessionContext::new();
    let name = table.map().table().to_string();
    ctx.register_table(name.as_str(), Arc::new(table))
        .map_err(|e| basalt::Error::InvalidArgument(format!("registering the store's table: {e}")))?;
    Ok(ctx)
}
