//! A transaction's own writes to one table, as a scan inside the
//! transaction merges them over its snapshot (`write/transaction.rs`
//! makes them).

use std::sync::Arc;

use bytes::Bytes;

use crate::db::state::handles::Table;
use crate::error::{Error, Result};
use crate::ids::TreeId;

/// A transaction's own rows of one table, in key order: (user key, row
/// bytes, or `None` for a delete).
pub(crate) type OwnRows = Arc<Vec<(Vec<u8>, Option<Bytes>)>>;

/// A transaction's own writes to one table at one moment
/// ([`Transaction::overlay`](crate::Transaction::overlay)), for a scan to read over the transaction's
/// snapshot ([`ScanOptions::overlay`](crate::ScanOptions)): what a scan of
/// the table inside the transaction must see.
#[derive(Debug, Clone)]
pub struct TableOverlay {
    /// The transaction's database (`None`: the overlay was asked for a
    /// table of another one). Tree ids are per database, so the tree alone
    /// does not say whose rows these are.
    pub(crate) db: Option<u64>,
    pub(crate) tree: TreeId,
    /// The schema version the rows were encoded under (`None`: no rows).
    pub(crate) schema_version: Option<u32>,
    /// (user key, row bytes or `None` for a delete), in key order.
    pub(crate) rows: OwnRows,
}

impl TableOverlay {
    /// The rows a scan of `table` over `range` merges, checked against the
    /// scan's table and `layout`; `None` when there are none.
    pub(crate) fn rows_in(
        &self,
        table: &Table,
        layout: &crate::row::layout::TableLayout,
        range: &crate::db::read::cursor::KeyRange,
    ) -> Result<Option<(OwnRows, std::ops::Range<usize>)>> {
        if self.db != Some(table.inner.id) {
            return Err(Error::InvalidArgument(format!(
                "the overlay is of a transaction of another database than table {}'s",
                table.name()
            )));
        }
        if self.tree != table.shared.id {
            return Err(Error::InvalidArgument(format!(
                "the overlay is of another table than {}",
                table.name()
            )));
        }
        if self.schema_version.is_some_and(|v| v != layout.version()) {
            return Err(schema_changed(table.name()));
        }
        let start = self.rows.partition_point(|(k, _)| match &range.0 {
            std::ops::Bound::Included(lo) => k < lo,
            std::ops::Bound::Excluded(lo) => k <= lo,
            std::ops::Bound::Unbounded => false,
        });
        if start == self.rows.len() {
            return Ok(None);
        }
        Ok(Some((self.rows.clone(), start..self.rows.len())))
    }
}

/// The error of a transaction that wrote rows of table `table` before its
/// columns changed: the commit would be refused, so it is refused now.
pub(crate) fn schema_changed(table: &str) -> Error {
    Error::Conflict(format!(
        "the columns of table {table} changed after this transaction wrote rows of it; roll back and retry"
    ))
}
