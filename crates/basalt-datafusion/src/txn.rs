//! `BEGIN … COMMIT` in a session: the statements between read the
//! database as of `BEGIN` (one `basalt::Transaction`'s snapshot) and write
//! into that transaction, which `COMMIT` applies at once — or refuses with
//! a conflict when another commit wrote a row it wrote since `BEGIN` —
//! and `ROLLBACK` drops. Outside a block every statement commits on its
//! own, as before.
//!
//! Reads of a table the block wrote see its own writes: each scan merges
//! them over the snapshot (`basalt::TableOverlay`). What a block does not
//! do yet, refused with an error rather than answered wrongly: run DDL, or
//! UPDATE a key column.

use std::collections::BTreeSet;
use std::sync::Arc;

use basalt::{Db, Snapshot, WriteBatch};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::execution::config::SessionConfig;
use datafusion::execution::context::SessionContext;
use parking_lot::Mutex;

use crate::error::to_df;

/// The open transaction of a session, if any (a session extension).
#[derive(Default)]
pub(crate) struct SessionTransaction {
    open: Mutex<Option<Open>>,
}

struct Open {
    tx: basalt::Transaction,
    /// Tables the transaction has written (by name).
    written: BTreeSet<String>,
    /// Why a statement of the block failed, if one did: its COMMIT rolls
    /// back.
    failed: Option<String>,
}

impl SessionTransaction {
    /// The session's transaction slot (`None`: a session not made by
    /// `basalt_datafusion::session`).
    pub(crate) fn of(config: &SessionConfig) -> Option<Arc<SessionTransaction>> {
        config.get_extension::<SessionTransaction>()
    }

    /// Whether `ctx` is inside a block, without cloning its state (the
    /// prepared statements' hot path asks before every run).
    pub(crate) fn open_in(ctx: &datafusion::prelude::SessionContext) -> bool {
        let state = ctx.state_ref();
        let slot = state.read().config().get_extension::<SessionTransaction>();
        slot.is_some_and(|slot| slot.is_open())
    }

    /// Whether a block is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.lock().is_some()
    }

    /// `BEGIN`.
    pub(crate) fn begin(&self, db: &Db) -> Result<()> {
        let mut open = self.open.lock();
        if open.is_some() {
            return plan_err!("BEGIN inside a transaction: COMMIT or ROLLBACK the open one first");
        }
        *open = Some(Open { tx: db.transaction(), written: BTreeSet::new(), failed: None });
        Ok(())
    }

    /// `COMMIT`: applies the block's writes at once (blocking: the caller
    /// runs it off the async workers). The block ends whatever happens.
    pub(crate) fn commit(&self) -> Result<()> {
        let Some(open) = self.open.lock().take() else {
            return plan_err!("COMMIT without BEGIN: no transaction is open");
        };
        if let Some(reason) = open.failed {
            return exec_err!("COMMIT of a block in which a statement failed ({reason}): it was rolled back");
        }
        match open.tx.commit() {
            Err(e @ basalt::Error::Conflict(_)) => {
                exec_err!("{e}; the transaction was rolled back: run it again")
            }
            other => other.map_err(to_df),
        }
    }

    /// Marks the open block failed (see `fail_transaction`).
    pub(crate) fn fail(&self, reason: &str) {
        if let Some(open) = self.open.lock().as_mut() {
            open.failed.get_or_insert_with(|| reason.to_string());
        }
    }

    /// `ROLLBACK`.
    pub(crate) fn rollback(&self) -> Result<()> {
        if self.open.lock().take().is_none() {
            return plan_err!("ROLLBACK without BEGIN: no transaction is open");
        }
        Ok(())
    }

    /// What a read of `table` inside the block reads: the block's snapshot,
    /// and its own writes to the table when it wrote some (a scan merges
    /// them over the snapshot). `None` outside a block.
    pub(crate) fn read_view(
        &self,
        table: &basalt::Table,
    ) -> Option<(Snapshot, Option<basalt::TableOverlay>)> {
        let open = self.open.lock();
        let open = open.as_ref()?;
        let overlay = open.written.contains(table.name()).then(|| open.tx.overlay(table));
        Some((open.tx.snapshot().clone(), overlay))
    }

    /// Writes `batch` (rows of `table`) into the open block; `None` when
    /// no block is open (the caller writes it on its own).
    pub(crate) fn write(&self, table: &str, batch: WriteBatch) -> Option<Result<()>> {
        let mut open = self.open.lock();
        let open = open.as_mut()?;
        let written = open.tx.write(batch).map_err(to_df);
        match &written {
            Ok(()) => {
                open.written.insert(table.to_string());
            }
            Err(e) => {
                open.failed.get_or_insert_with(|| e.to_string());
            }
        }
        Some(written)
    }
}

/// Whether `ctx` is inside `BEGIN … COMMIT`: the statements since `BEGIN`
/// read its snapshot and write into one transaction, which `COMMIT`
/// applies at once or refuses with a conflict, and `ROLLBACK` (or dropping
/// the session) discards.
pub fn in_transaction(ctx: &SessionContext) -> bool {
    SessionTransaction::open_in(ctx)
}

/// Marks the open block of `ctx` as failed (a statement in it failed):
/// its `COMMIT` then rolls it back and says why, as PostgreSQL does, so
/// a script that goes on after an error never commits half of its block.
/// Does nothing outside a block.
pub fn fail_transaction(ctx: &SessionContext, reason: &str) {
    if let Some(slot) = SessionTransaction::of(ctx.state_ref().read().config()) {
        slot.fail(reason);
    }
}

/// The transaction slot of a session made by [`crate::session`].
pub(crate) fn transaction(ctx: &SessionContext) -> Result<Arc<SessionTransaction>> {
    let Some(slot) = SessionTransaction::of(ctx.state_ref().read().config()) else {
        return plan_err!("this session has no Basalt database: make it with basalt_datafusion::session");
    };
    Ok(slot)
}
