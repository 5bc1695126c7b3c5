//! Identifiers every layer shares. They live at the bottom of the crate so
//! that the log, the memtable, versions and compaction can name a tree
//! without importing the module that writes batches.

/// Identifies one LSM tree (a key-value keyspace, a table or an index)
/// within a database. Tree ids come from the file-number counter, so they
/// are never reused.
pub type TreeId = u32;

/// The tree of the key-value API's default keyspace.
pub const DEFAULT_TREE: TreeId = 0;
