//! Blob files: the values of key-value trees at or above
//! `Options::blob_value_bytes_min`, written apart from their keys by the
//! flush, so that compactions move a small pointer instead of rewriting the
//! value at every level (`WiscKey`; `RocksDB`'s integrated `BlobDB`). The SST
//! entry of such a value has kind `Blob` and the pointer as its value.
//!
//! A blob file is written once, synced before the MANIFEST edit that names
//! it, and never changed. It stays as long as an SST of a live version
//! points into it: the version set derives that from the pointers each
//! SST's metadata counts, so no reference count can drift. Compactions
//! move the values still pointed to out of files that are mostly garbage
//! (`Options::blob_gc_garbage_percent`) into a file of their own; the old
//! file then loses its last pointer and is collected with the SSTs.

pub mod format;
pub mod reader;
pub mod writer;

pub use format::BlobPointer;
pub use reader::BlobFiles;
pub use writer::BlobWriter;
