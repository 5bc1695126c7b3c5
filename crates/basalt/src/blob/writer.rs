//! Writes one blob file: records appended, then the footer, then one sync.

use super::format::{BlobPointer, VALUE_BYTES_MAX, encode_footer, record_crc};
use crate::error::{Error, Result};
use crate::io::WritableFile;

/// What a finished blob file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobSummary {
    /// The file's number.
    pub number: u64,
    /// Bytes in the file, footer included.
    pub size: u64,
    /// Values written.
    pub records: u64,
    /// Sum of their lengths.
    pub value_bytes: u64,
}

/// A blob file being written. Dropped without [`BlobWriter::finish`], it
/// leaves a partial file that no MANIFEST names; the obsolete-file
/// collection removes it once the caller no longer holds its number.
pub struct BlobWriter {
    file: Box<dyn WritableFile>,
    number: u64,
    records: u64,
    value_bytes: u64,
}

impl BlobWriter {
    /// A writer of blob file `number` into `file`.
    pub fn new(file: Box<dyn WritableFile>, number: u64) -> Self {
        BlobWriter { file, number, records: 0, value_bytes: 0 }
    }

    /// Appends `value`'s record; the pointer to it.
    pub fn add(&mut self, value: &[u8]) -> Result<BlobPointer> {
        let len = u32::try_from(value.len())
            .map_err(|_| Error::InvalidArgument(format!("a blob value above {VALUE_BYTES_MAX} bytes")))?;
        let offset = self.file.len();
        let header = len.to_le_bytes();
        self.file.append(&header)?;
        self.file.append(value)?;
        self.file.append(&record_crc(self.number, offset, header, value).to_le_bytes())?;
        self.records += 1;
        self.value_bytes += value.len() as u64;
        Ok(BlobPointer { file: self.number, offset, len: value.len() as u64 })
    }

    /// Writes the footer and syncs the file (the caller syncs the
    /// directory before a MANIFEST edit names it).
    pub fn finish(mut self) -> Result<BlobSummary> {
        self.file.append(&encode_footer(self.records, self.value_bytes))?;
        self.file.sync()?;
        Ok(BlobSummary {
            number: self.number,
            size: self.file.len(),
            records: self.records,
            value_bytes: self.value_bytes,
        })
    }
}
