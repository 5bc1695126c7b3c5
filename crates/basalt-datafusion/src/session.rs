//! The DataFusion session over a Basalt database: its catalog, the
//! analyzer rules every query gets, and the session's plan cache and
//! transaction slot.

use std::sync::Arc;

use basalt::Db;
use datafusion::execution::context::{SessionConfig, SessionContext};

use crate::aggregates::ExactAggregates;
use crate::in_lists::NullSafeInLists;
use crate::plan_cache::PlanCache;
use crate::schema::{BasaltSchema, CATALOG, SCHEMA};
use crate::txn::SessionTransaction;

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
        .with_extension(Arc::new(PlanCache::default()))
        .with_extension(Arc::new(SessionTransaction::default()));
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    let ctx = SessionContext::new_with_config(config);
    ctx.add_analyzer_rule(Arc::new(NullSafeInLists));
    ctx.add_analyzer_rule(Arc::new(ExactAggregates));
    crate::history::register(&ctx, &db);
    if let Some(catalog) = ctx.catalog(CATALOG) {
        // Replaces the default in-memory schema.
        let _ = catalog.register_schema(SCHEMA, Arc::new(BasaltSchema::new(db)));
    }
    ctx
}
