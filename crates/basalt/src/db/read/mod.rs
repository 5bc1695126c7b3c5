//! Reads: the point path (memtables, then each SST that may hold the key),
//! row views (a row read where it lies), the cursors that merge sorted runs, iterators, scans and their plans,
//! size and value estimates, and snapshots.

pub(crate) mod changes;
pub(crate) mod cursor;
pub(crate) mod estimates;
pub(crate) mod history;
pub(crate) mod iter;
pub(crate) mod key_history;
pub(crate) mod merged;
pub(crate) mod overlay;
pub(crate) mod point;
pub(crate) mod row_view;
pub(crate) mod scan;
pub(crate) mod snapshot;
pub(crate) mod ttl;
