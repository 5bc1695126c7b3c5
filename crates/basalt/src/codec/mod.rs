//! Byte encodings shared by every format: memcomparable keys, internal keys
//! (user key + seqno + kind) and little helpers for varints.

pub mod internal;
pub mod key;
pub mod varint;
