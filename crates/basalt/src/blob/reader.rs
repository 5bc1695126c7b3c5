//! Reads values out of blob files, by pointer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use super::format::{
    BlobPointer, FOOTER_BYTES, RECORD_HEADER_BYTES, RECORD_OVERHEAD_BYTES, RECORD_TRAILER_BYTES, record_crc,
};
use crate::error::{Error, Result};
use crate::files;
use crate::io::{Fs, RandomAccessFile};

/// The open blob files of a database, opened on first read and closed
/// when the file is deleted. A read is one `pread` of the record: blob
/// values are large (kilobytes and up), read once per lookup, and a cache
/// of them would only hold copies of what the page cache holds.
pub struct BlobFiles {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    open: RwLock<HashMap<u64, Arc<dyn RandomAccessFile>>>,
}

impl BlobFiles {
    /// The blob files of the database in `dir`.
    pub fn new(fs: Arc<dyn Fs>, dir: PathBuf) -> Self {
        BlobFiles { fs, dir, open: RwLock::new(HashMap::new()) }
    }

    fn file(&self, number: u64, size: u64) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(f) = self.open.read().get(&number) {
            return Ok(f.clone());
        }
        let path = self.dir.join(files::blob(number));
        let file: Arc<dyn RandomAccessFile> = Arc::from(self.fs.open(&path)?);
        if file.len() != size {
            return Err(Error::corruption(
                &path,
                0,
                format!("blob file of {} bytes, the MANIFEST says {size}", file.len()),
            ));
        }
        Ok(self.open.write().entry(number).or_insert(file).clone())
    }

    /// The value `pointer` points to, in a blob file of `size` bytes (the
    /// MANIFEST's figure). A pointer past the records, or a record whose
    /// length or checksum disagrees, is corruption naming the blob file
    /// and the record's offset.
    pub fn read(&self, pointer: &BlobPointer, size: u64) -> Result<Bytes> {
        let path = || self.dir.join(files::blob(pointer.file));
        let records_end = size.saturating_sub(FOOTER_BYTES as u64);
        let end = pointer.offset.checked_add(pointer.len).and_then(|e| e.checked_add(RECORD_OVERHEAD_BYTES));
        let Some(end) = end.filter(|&e| e <= records_end) else {
            return Err(Error::corruption(
                path(),
                pointer.offset,
                format!("a pointer to {} bytes past the file's records", pointer.len),
            ));
        };
        let len = usize::try_from(end - pointer.offset)
            .map_err(|_| Error::corruption(path(), pointer.offset, "a value too large to read"))?;
        let bytes = self.file(pointer.file, size)?.read_at(pointer.offset, len)?;
        check_record(&bytes, pointer.file, pointer.offset)
            .map_err(|what| Error::corruption(path(), pointer.offset, what))?;
        let header = RECORD_HEADER_BYTES as usize;
        Ok(Bytes::from(bytes).slice(header..len - RECORD_TRAILER_BYTES as usize))
    }

    #[cfg(any(test, feature = "inspect"))]
    /// Checks blob file `number` of `size` bytes whole: every record's
    /// checksum in order, then the footer against the MANIFEST's counts.
    pub fn check_file(&self, number: u64, size: u64, records: u64, value_bytes: u64) -> Result<()> {
        let path = self.dir.join(files::blob(number));
        let file = self.file(number, size)?;
        let bad = |at: u64, what: &str| Error::corruption(&path, at, what.to_string());
        let footer_at = size
            .checked_sub(FOOTER_BYTES as u64)
            .ok_or_else(|| bad(0, "a blob file shorter than its footer"))?;
        let footer = file.read_at(footer_at, FOOTER_BYTES)?;
        if super::format::decode_footer(&footer, &path, footer_at)? != (records, value_bytes) {
            return Err(bad(footer_at, "blob file footer disagrees with the MANIFEST"));
        }
        let (mut at, mut seen, mut seen_bytes) = (0u64, 0u64, 0u64);
        while at < footer_at {
            if footer_at - at < RECORD_OVERHEAD_BYTES {
                return Err(bad(at, "a record cut short by the footer"));
            }
            let head = file.read_at(at, RECORD_HEADER_BYTES as usize)?;
            let len = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
            if len > footer_at - at - RECORD_OVERHEAD_BYTES {
                return Err(bad(at, "a record length past the footer"));
            }
            let bytes = file.read_at(at, (len + RECORD_OVERHEAD_BYTES) as usize)?;
            check_record(&bytes, number, at).map_err(|what| bad(at, what))?;
            (seen, seen_bytes) = (seen + 1, seen_bytes + len);
            at += len + RECORD_OVERHEAD_BYTES;
        }
        if (seen, seen_bytes) != (records, value_bytes) {
            return Err(bad(footer_at, "blob file records disagree with its footer"));
        }
        Ok(())
    }

    /// Closes blob file `number` (it is being deleted).
    pub fn evict(&self, number: u64) {
        self.open.write().remove(&number);
    }
}

/// The value of a whole record (`bytes`) read at `offset` of blob file
/// `file`, once its length and checksum agree.
fn check_record(bytes: &[u8], file: u64, offset: u64) -> std::result::Result<&[u8], &'static str> {
    let header = RECORD_HEADER_BYTES as usize;
    if bytes.len() < RECORD_OVERHEAD_BYTES as usize {
        return Err("a record shorter than its header and checksum");
    }
    let head = [bytes[0], bytes[1], bytes[2], bytes[3]];
    let value = &bytes[header..bytes.len() - 4];
    if u32::from_le_bytes(head) as usize != value.len() {
        return Err("a record whose length field disagrees with its pointer");
    }
    let tail = &bytes[bytes.len() - 4..];
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if record_crc(file, offset, head, value) != stored {
        return Err("blob record checksum mismatch");
    }
    Ok(value)
}
