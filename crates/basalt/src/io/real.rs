//! The operating system's file system.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::fs::{FileLock, Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The real file system, through `std::fs` (pread, fdatasync, flock).
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// Appends go through a 64 KiB buffer: SST writers append many small pieces;
/// the WAL appends one group at a time and flushes after each.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

struct RealWritableFile {
    path: PathBuf,
    out: BufWriter<File>,
    len: u64,
}

impl WritableFile for RealWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.out.write_all(data).map_err(|e| Error::io(&self.path, e))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.out.get_ref().sync_data().map_err(|e| Error::io(&self.path, e))
    }

    fn start_writeback(&mut self) -> Result<()> {
        self.flush()?;
        super::writeback::start(self.out.get_ref()).map_err(|e| Error::io(&self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn abandon(self: Box<Self>) {
        // The buffered bytes go with the buffer; dropping the `BufWriter`
        // itself would write them.
        let (_file, _unwritten) = self.out.into_parts();
    }
}

struct RealRandomAccessFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl RandomAccessFile for RealRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("read of {len} bytes past end of file ({} bytes)", self.len),
            ));
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn map(&self) -> Result<Option<bytes::Bytes>> {
        super::mmap::map(&self.file, &self.path, self.len)
    }
}

/// Holds the open LOCK file; the OS releases the flock when it is closed.
struct RealFileLock {
    _file: File,
}

impl FileLock for RealFileLock {}

impl Fs for RealFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(RealWritableFile {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            len: 0,
        }))
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Box::new(RealRandomAccessFile { path: path.to_path_buf(), file, len }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            // Another device or no hard links here: copy, then sync.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::CrossesDevices | std::io::ErrorKind::Unsupported
                ) || e.raw_os_error() == Some(1) =>
            {
                std::fs::copy(from, to).map_err(|e| Error::io(to, e))?;
                std::fs::File::open(to).and_then(|f| f.sync_all()).map_err(|e| Error::io(to, e))
            }
            Err(e) => Err(Error::io(to, e)),
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| Error::io(path, e))
    }

    fn is_dir(&self, path: &Path) -> Result<bool> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
            _ => Ok(()),
        }
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        File::open(path).and_then(|d| d.sync_all()).map_err(|e| Error::io(path, e))
    }

    fn lock(&self, path: &Path, dir: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // flock is per open file description, so a second open in this
        // process conflicts just as one from another process does.
        match file.try_lock() {
            Ok(()) => Ok(Box::new(RealFileLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
        }
    }
}
