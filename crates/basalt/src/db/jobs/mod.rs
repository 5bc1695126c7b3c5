//! Work on files: opening and recovery, flushes, compactions, bulk loads,
//! checkpoints, and the collection of files no version needs.

pub(crate) mod checkpoint;
pub(crate) mod cleanup;
pub(crate) mod compact;
pub(crate) mod flush;
pub(crate) mod ingest;
pub(crate) mod open;
