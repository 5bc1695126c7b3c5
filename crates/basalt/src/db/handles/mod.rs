//! The public handles besides `Db`: tables, keyspaces, the catalog's
//! operations (create, open, drop), schema changes, and statistics.

pub(crate) mod alter;
pub(crate) mod ddl;
pub(crate) mod keyspace;
pub(crate) mod stats;
pub(crate) mod table;
