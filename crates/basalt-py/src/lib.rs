//! Basalt for Python: the extension module `basalt._basalt`, which the
//! pure-Python package `basalt` (in `python/basalt`) re-exports.
//!
//! Every engine call that can block — I/O, scans, writes, SQL — runs with
//! the GIL released; every handle is thread-safe; engine errors become
//! `basalt.Error` subclasses and a Rust panic never reaches Python as
//! anything but pyo3's `PanicException` (there are none by design: the
//! engine returns errors).

mod batch;
mod convert;
mod database;
mod errors;
mod filter;
mod history;
mod keyspace;
mod rows;
mod scan;
mod shards;
mod snapshot;
mod sql;
mod state;
mod table;
mod transaction;

use pyo3::prelude::*;

#[pymodule]
fn _basalt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(database::open, m)?)?;
    m.add_class::<database::Database>()?;
    m.add_class::<keyspace::Keyspace>()?;
    m.add_class::<keyspace::KeyIterator>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<scan::Scan>()?;
    m.add_class::<sql::Statement>()?;
    m.add_class::<shards::ShardMap>()?;
    m.add_class::<shards::ShardedStore>()?;
    m.add_class::<shards::StoreWrite>()?;
    m.add_class::<shards::StorePin>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
