//! Appends framed records to a log file.

use super::format;
use crate::error::{Error, Result};
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
    /// A payload over [`format::PAYLOAD_BYTES_MAX`] is refused, and
    /// nothing written: recovery would read it as a torn tail. Callers
    /// refuse such records first; this is the last line.
    pub fn append<'a>(&mut self, payloads: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        self.append_sealed(payloads, format::SEAL_PAYLOAD)
    }

    /// [`LogWriter::append`] ended by the WAL's timed seal: the commit
    /// time of the append, read back with its records.
    pub fn append_timed<'a>(
        &mut self,
        payloads: impl IntoIterator<Item = &'a [u8]>,
        unix_ms: u64,
    ) -> Result<()> {
        self.append_sealed(payloads, &format::timed_seal(unix_ms))
    }

    fn append_sealed<'a>(&mut self, payloads: impl IntoIterator<Item = &'a [u8]>, seal: &[u8]) -> Result<()> {
        self.scratch.clear();
        for p in payloads {
            if p.len() > format::PAYLOAD_BYTES_MAX {
                self.scratch.clear();
                return Err(Error::InvalidArgument(format!(
                    "a log record of {} bytes is over the limit of {} bytes",
                    p.len(),
                    format::PAYLOAD_BYTES_MAX
                )));
            }
            format::encode_record(p, &mut self.scratch);
        }
        if self.scratch.is_empty() {
            return Ok(());
        }
        format::encode_record(seal, &mut self.scratch);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::io::{Fs, MemFs};

    /// A payload over the record limit is refused with nothing written,
    /// also when records before it in the same append fit: recovery would
    /// read it as a torn tail and drop it and every later record.
    #[test]
    fn a_record_over_the_limit_is_refused_and_nothing_is_written() {
        let fs = MemFs::new();
        let path = Path::new("/000001.log");
        let mut log = LogWriter::new(fs.create(path).expect("create"));
        log.append([&b"fits"[..]]).expect("a small record");
        let written = fs.file_len(path);
        // Zeroed pages are not touched: the refusal comes before encoding.
        let huge = vec![0u8; format::PAYLOAD_BYTES_MAX + 1];
        let result = log.append([&b"also fits"[..], huge.as_slice()]);
        assert!(matches!(result, Err(Error::InvalidArgument(_))), "{result:?}");
        assert_eq!(fs.file_len(path), written, "nothing of the refused append was written");
        assert_eq!(Some(log.len()), written);
    }
}
