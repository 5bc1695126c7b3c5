//! Writes: what a commit group does (validation, conflict checks, index
//! upkeep, the WAL append and memtable inserts), the write-buffer policy
//! that paces it, and optimistic transactions.

pub(crate) mod commit;
pub(crate) mod index_upkeep;
pub(crate) mod transaction;
pub(crate) mod write_buffer;
