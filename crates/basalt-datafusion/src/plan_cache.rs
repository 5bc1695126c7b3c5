//! The plan cache of a session: its prepared statements by text, so
//! that [`crate::query`] of a text run before costs what executing a
//! prepared statement does.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::config::SqlParserOptions;
use parking_lot::Mutex;

use crate::prepared::PreparedStatement;

/// Statements the plan cache keeps per session; past it, the cache starts
/// again empty (a workload with more distinct texts than this gains
/// nothing from caching them).
const PLAN_CACHE_ENTRIES: usize = 512;

/// The plan cache of a session (a `SessionConfig` extension).
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    /// Each plan with the parser settings it was made under (`SET
    /// datafusion.sql_parser.…` changes what a text means).
    plans: Mutex<HashMap<String, (SqlParserOptions, Arc<PreparedStatement>)>>,
}

impl PlanCache {
    pub(crate) fn get(&self, text: &str, parser: &SqlParserOptions) -> Option<Arc<PreparedStatement>> {
        self.plans.lock().get(text).filter(|(made_under, _)| made_under == parser).map(|(_, p)| Arc::clone(p))
    }

    pub(crate) fn remove(&self, text: &str) {
        self.plans.lock().remove(text);
    }

    pub(crate) fn insert(&self, text: &str, parser: SqlParserOptions, prepared: Arc<PreparedStatement>) {
        let mut plans = self.plans.lock();
        if plans.len() >= PLAN_CACHE_ENTRIES {
            plans.clear();
        }
        plans.insert(text.to_string(), (parser, prepared));
    }
}
