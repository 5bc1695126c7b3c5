//! What every Python handle of one database shares: the open `Db` (gone
//! once closed), whether writes are allowed, and the SQL session made on
//! first use. Handles hold this, not the `Db` itself, so that
//! `Database.close()` closes the database under all of them: each of their
//! calls then raises `ClosedError`.

use std::sync::Arc;

use basalt::Db;
use basalt_datafusion::datafusion::execution::context::SessionContext;
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;

use crate::errors;

pub struct DbState {
    /// `None` once closed.
    db: RwLock<Option<Arc<Db>>>,
    /// Opened with `read_only=True`: every write raises `ReadOnlyError`.
    pub read_only: bool,
    /// The DataFusion session of `Database.sql`, made on first use.
    session: Mutex<Option<SessionContext>>,
}

pub type Shared = Arc<DbState>;

impl DbState {
    pub fn new(db: Db, read_only: bool) -> Shared {
        Arc::new(DbState { db: RwLock::new(Some(Arc::new(db))), read_only, session: Mutex::new(None) })
    }

    /// The database, or `ClosedError`.
    pub fn db(&self, py: Python<'_>) -> PyResult<Arc<Db>> {
        self.db.read().clone().ok_or_else(|| errors::closed(py))
    }

    /// The database for a write, or `ClosedError` / `ReadOnlyError`.
    pub fn db_for_write(&self, py: Python<'_>, what: &str) -> PyResult<Arc<Db>> {
        let db = self.db(py)?;
        if self.read_only {
            return Err(errors::read_only(py, what));
        }
        Ok(db)
    }

    /// Whether `close` ran.
    pub fn is_closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// The SQL session over this database (made once).
    pub fn session(&self, py: Python<'_>) -> PyResult<SessionContext> {
        let db = self.db(py)?;
        let mut slot = self.session.lock();
        Ok(slot.get_or_insert_with(|| basalt_datafusion::session(db)).clone())
    }

    /// Closes the database: syncs the WAL, stops its threads, releases the
    /// directory. Handles still alive (tables, iterators, scans, SQL
    /// sessions) get `ClosedError` from then on. A second call does nothing.
    pub fn close(&self) -> basalt::Result<()> {
        let taken = self.db.write().take();
        self.session.lock().take();
        match taken {
            Some(db) => db.close(),
            None => Ok(()),
        }
    }
}

/// The tokio runtime DataFusion's plans run on, shared by every database
/// of the process; `Error` when the OS refused its threads.
pub fn runtime(py: Python<'_>) -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>> = std::sync::OnceLock::new();
    let made = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("basalt-sql")
            .enable_all()
            .build()
            .map_err(|e| format!("starting the SQL runtime's threads: {e}"))
    });
    made.as_ref().map_err(|e| errors::io(py, e.clone()))
}
