//! Byte layout of a WAL record's payload: one encoded write batch (drawn in
//! `docs/format.md`).
//!
//! ```text
//! batch   := seqno: u64 LE | count: u32 LE | entry*
//! entry   := 0 (delete)     | tree: varint | key: varint len + bytes
//!          | 1 (put)        | tree: varint | key: varint len + bytes
//!                           | value: varint len + bytes
//!          | 2 (table put)  | tree: varint | rows: varint (>= 1)
//!                           | Arrow IPC stream: varint len + bytes
//!          | 3 (table delete: key rows) | same as 2
//!          | 4 (range delete) | tree: varint | start: varint len + bytes
//!                           | u8 (1: an end follows; 0: no end)
//!                           | [end: varint len + bytes]
//!          | 5 (merge)      | tree: varint | key: varint len + bytes
//!                           | operand: varint len + bytes
//! ```
//!
//! A range delete covers every key `k` with `start <= k < end` (no end:
//! every key from `start` on) and takes one seqno.
//!
//! `seqno` is the sequence number of the first entry; each key entry takes
//! one seqno and each Arrow row one, in order, and `count` is their total.

/// Bytes of the batch header: seqno then count.
pub const BATCH_HEADER_BYTES: usize = 12;

/// Entry kind: a key deleted from a keyspace (`codec::internal::Kind::Delete`).
pub const ENTRY_DELETE: u8 = 0;
/// Entry kind: a key set in a keyspace (`codec::internal::Kind::Put`).
pub const ENTRY_PUT: u8 = 1;
/// Entry kind: Arrow rows upserted into a table (or a keyspace's table face).
pub const ENTRY_ROWS_PUT: u8 = 2;
/// Entry kind: Arrow key rows deleted from a table.
pub const ENTRY_ROWS_DELETE: u8 = 3;
/// Entry kind: every key of a range deleted from a tree (one seqno).
pub const ENTRY_RANGE_DELETE: u8 = 4;
/// Entry kind: a merge operand for a key of a keyspace
/// (`codec::internal::Kind::Merge`).
pub const ENTRY_MERGE: u8 = 5;
