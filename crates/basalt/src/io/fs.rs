//! The file-system interface the engine is written against.
//!
//! The engine only ever creates a file, appends to it, syncs it and later
//! reads it at random offsets; it never rewrites bytes in place. Renames and
//! deletions are made durable by [`Fs::sync_dir`].

use std::path::Path;

use crate::error::Result;

/// A file being written: append-only.
pub trait WritableFile: Send + Sync {
    /// Appends `data` to the file. It may sit in a buffer until
    /// [`WritableFile::flush`] or [`WritableFile::sync`].
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system, so that a crash of the
    /// process (not the machine) keeps them.
    fn flush(&mut self) -> Result<()>;
    /// Makes every appended byte durable (flush + fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Hands buffered bytes to the operating system and asks it to start
    /// writing them to the device, without waiting: a later
    /// [`WritableFile::sync`] then waits for less. A hint; the default
    /// does nothing.
    fn start_writeback(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Gives the file up without writing what is still buffered (a file of
    /// a database that let its directory go must not change). The default
    /// drops it, right for a file that buffers nothing.
    fn abandon(self: Box<Self>) {}
}

/// A file opened for reading at arbitrary offsets; shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`. Reading past the end is an error.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// The file's length in bytes at the time it was opened.
    fn len(&self) -> u64;
    /// The whole file (its first [`RandomAccessFile::len`] bytes) as bytes
    /// read without a call per read: a memory map on the real file system.
    /// `None` where the file system offers no such view. Only for files
    /// that are not modified while open, which is every file the engine
    /// reads this way.
    fn map(&self) -> Result<Option<bytes::Bytes>> {
        Ok(None)
    }
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An exclusive lock on a file, released when dropped.
pub trait FileLock: Send + Sync {}

/// The file system: the real one or a simulated one.
pub trait Fs: Send + Sync + std::fmt::Debug {
    /// Creates `path` (truncating any file there) for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for random reads.
    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open(path)?;
        let len = usize::try_from(file.len())
            .map_err(|_| crate::error::Error::InvalidArgument(format!("{} is too large", path.display())))?;
        file.read_at(0, len)
    }
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Deletes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes `to` name the file `from` names (a hard link), for files that
    /// are never written again; the new entry is durable after
    /// [`Fs::sync_dir`]. Where links are not possible (another device, a
    /// file system without them) the file is copied and synced instead,
    /// which is what this default does.
    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        let data = self.read_all(from)?;
        let mut out = self.create(to)?;
        out.append(&data)?;
        out.sync()
    }
    /// Names (not paths) of the entries of a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Whether anything exists at `path`.
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Whether `path` is a directory (false if it does not exist).
    fn is_dir(&self, path: &Path) -> Result<bool>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Makes the directory's entries (creations, renames, deletions) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// Deletes a directory and everything in it; nothing there is not an
    /// error. This default deletes the files, directory by directory, and
    /// leaves the (empty) directories: a file system that can remove
    /// directories removes them too.
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        if !self.is_dir(path)? {
            return Ok(());
        }
        for name in self.list(path)? {
            let entry = path.join(name);
            if self.is_dir(&entry)? {
                self.remove_dir_all(&entry)?;
            } else {
                self.remove(&entry)?;
            }
        }
        Ok(())
    }
    /// Takes an exclusive lock on `path` (created if missing), or fails with
    /// [`crate::Error::Locked`] naming `dir` when another holder has it.
    fn lock(&self, path: &Path, dir: &Path) -> Result<Box<dyn FileLock>>;
}
