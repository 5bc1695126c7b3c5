//! Starting a file's writeback without waiting for it: the early half of
//! an fsync. A flush or compaction that hands its SST's pages to the device
//! as it writes them finds little left to wait for at its fsync, so the
//! device works while the CPU builds the rest (RocksDB's `bytes_per_sync`).
//!
//! With [`mmap`](super::mmap), the engine's only `unsafe` code: one system
//! call on a descriptor borrowed for the call.
#![expect(unsafe_code, reason = "one system call on a borrowed descriptor")]

use std::fs::File;

use super::fs::WritableFile;
use crate::error::Result;

/// A file that starts the writeback of what was appended each time
/// another `every_bytes` went in.
pub(crate) struct WritebackEvery {
    inner: Box<dyn WritableFile>,
    every_bytes: u64,
    started_at: u64,
}

impl WritebackEvery {
    pub(crate) fn new(inner: Box<dyn WritableFile>, every_bytes: u64) -> WritebackEvery {
        WritebackEvery { started_at: inner.len(), inner, every_bytes: every_bytes.max(1) }
    }
}

impl WritableFile for WritebackEvery {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)?;
        if self.inner.len() - self.started_at >= self.every_bytes {
            self.start_writeback()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }

    fn start_writeback(&mut self) -> Result<()> {
        self.started_at = self.inner.len();
        self.inner.start_writeback()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn abandon(self: Box<Self>) {
        self.inner.abandon();
    }
}

/// Asks Linux to start writing every dirty page of `file` to the device
/// (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`: no wait for the
/// writes, no metadata); elsewhere does nothing.
#[cfg(target_os = "linux")]
pub(super) fn start(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor stays open while `file` is borrowed, and the
    // call reads and writes no memory of this process.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Elsewhere: nothing (the fsync does all of it).
#[cfg(not(target_os = "linux"))]
pub(super) fn start(_file: &File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// Counts the writebacks asked of it.
    struct Counting {
        len: u64,
        started: Arc<AtomicU64>,
    }

    impl WritableFile for Counting {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.len += data.len() as u64;
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            Ok(())
        }
        fn start_writeback(&mut self) -> Result<()> {
            self.started.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn len(&self) -> u64 {
            self.len
        }
    }

    #[test]
    fn writeback_starts_once_per_interval_appended() {
        let started = Arc::new(AtomicU64::new(0));
        let mut f = WritebackEvery::new(Box::new(Counting { len: 0, started: started.clone() }), 100);
        for _ in 0..9 {
            f.append(&[0; 30]).expect("append");
        }
        // 270 bytes: at 120 and at 240.
        assert_eq!((f.len(), started.load(Ordering::Relaxed)), (270, 2));
        f.append(&[0; 1000]).expect("append");
        assert_eq!(started.load(Ordering::Relaxed), 3, "one large append, one writeback");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_real_file_takes_the_hint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = File::create(dir.path().join("f")).expect("create");
        std::io::Write::write_all(&mut &file, &[7; 4096]).expect("write");
        start(&file).expect("sync_file_range accepts an open file");
    }
}
