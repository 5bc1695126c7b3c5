//! Read-only memory maps of immutable files, as [`bytes::Bytes`].
//!
//! One of the engine's two modules with `unsafe` code (with
//! `writeback.rs`): mapping a file is unsafe because the map's bytes
//! change if the file is written or truncated while it is mapped (and a
//! read past a truncation raises `SIGBUS`). The engine maps only files it never changes after they are
//! synced and renamed into place (SSTs), and removes them only by
//! unlinking, which leaves a mapping intact. Writing to or truncating a
//! database's files from outside while it is open is outside the contract,
//! as it is for LMDB and for LevelDB and `RocksDB` with mmap reads; the
//! engine's checksums catch such bytes on a process's first read of each
//! block, not afterwards (the block cache does the same for what it holds;
//! docs/architecture.md, "in-place reads").
#![expect(unsafe_code, reason = "memory maps; the invariant is in the module doc")]

use std::fs::File;
use std::path::Path;

use bytes::Bytes;

use crate::error::{Error, Result};

/// The first `len` bytes of `file` (its length when opened) mapped
/// read-only, or `None` where the platform's address space is too small to
/// map data files freely, or for an empty file (nothing to map).
pub(super) fn map(file: &File, path: &Path, len: u64) -> Result<Option<Bytes>> {
    if cfg!(not(target_pointer_width = "64")) || len == 0 {
        return Ok(None);
    }
    let len = usize::try_from(len)
        .map_err(|_| Error::InvalidArgument(format!("{} is too large", path.display())))?;
    // SAFETY: the engine maps only files it never modifies or truncates
    // while they exist under their name (see the module doc), so the
    // mapped bytes stay what they were when the file was synced.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.map_err(|e| Error::io(path, e))?;
    Ok(Some(Bytes::from_owner(map)))
}
