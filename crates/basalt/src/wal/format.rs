//! Byte layout of a WAL record's payload: one encoded write batch.
//!
//! ```text
//! batch   := seqno: u64 LE | count: u32 LE | entry{count}
//! entry   := kind: u8 | tree: varint | key: varint len + bytes | [value]
//! value   := varint len + bytes        (present only when kind = Put)
//! ```
//!
//! `seqno` is the sequence number of the first entry; entry i has seqno + i.
//! `kind` is `codec::internal::Kind` (0 delete, 1 put).

/// Bytes of the batch header: seqno then count.
pub const BATCH_HEADER_BYTES: usize = 12;
