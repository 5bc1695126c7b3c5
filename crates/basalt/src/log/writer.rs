//! Appends framed records to a log file.

use super::format;
use crate::error::Result;
use crate::io::WritableFile;

/// Writes records to one log file. Several records can be appended in one
/// write (group commit), so a torn write can only damage the tail.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    scratch: Vec<u8>,
}

impl LogWriter {
    /// Wraps a freshly created file.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        LogWriter { file, scratch: Vec::new() }
    }

    /// Appends one record per payload and a seal record in a single write,
    /// then hands the bytes to the OS.
    pub fn append<'a>(&mut self, payloads: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        self.scratch.clear();
        for p in payloads {
            format::encode_record(p, &mut self.scratch);
        }
        if self.scratch.is_empty() {
            return Ok(());
        }
        format::encode_record(format::SEAL_PAYLOAD, &mut self.scratch);
        self.file.append(&self.scratch)?;
        // Keep the scratch buffer from pinning a huge allocation.
        if self.scratch.capacity() > 8 << 20 {
            self.scratch = Vec::new();
        }
        self.file.flush()
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.file.len()
    }
}
