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
mod direct;
mod dml;
mod error;
mod exec;
mod history;
mod in_lists;
mod index;
mod insert;
mod names;
mod output;
mod plan_cache;
mod planned_tables;
mod prepared;
mod pushdown;
mod run;
mod schema;
mod session;
mod sharded;
mod statement;
mod stats;
mod table;
mod txn;

/// The DataFusion this crate is built on, for callers that need its types.
pub use datafusion;
pub use output::QueryOutput;
pub use prepared::{PreparedStatement, prepare};
pub use run::{query, sql};
pub use schema::BasaltSchema;
pub use session::{session, session_with_config};
pub use sharded::{ShardedTable, sharded_session};
pub use statement::sql_statement;
pub use table::BasaltTable;
pub use txn::{fail_transaction, in_transaction};
