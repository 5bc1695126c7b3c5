//! A file system that stops changing anything once its database is closed.
//!
//! A closed database releases its directory lock, and another handle (or
//! process) may open the directory at once. Work of the closed handle
//! still in flight at that moment — a compaction run on a caller's
//! thread, an index build, a checkpoint — must not create, rename or
//! delete a file there: it would act on the new owner's files with the
//! old owner's idea of what is live. The database marks the release just
//! before it releases the lock; from then on every call that would change
//! the directory fails with [`Error::Closed`]. Reads go on (they change
//! nothing, and handles may still read what they hold).
//!
//! A `create` already inside the wrapped file system when the directory is released
//! cannot be stopped; it is undone (the file removed) as soon as it
//! returns. Its file number was handed out before the close logged the
//! next file number, so no later owner uses that name. A file created
//! before the release (an SST a compaction is writing) takes no more
//! appends, flushes or syncs after it, and what it still buffers is
//! dropped, not written: it stays as it was at the release.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{FileLock, Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// Marked once, when the database that owns the guarded file system lets
/// its directory go.
#[derive(Debug, Clone, Default)]
pub struct DirectoryRelease(Arc<AtomicBool>);

impl DirectoryRelease {
    /// From now on the guarded file system changes nothing.
    pub fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_marked(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn check(&self, what: &str, path: &Path) -> Result<()> {
        if self.is_marked() {
            return Err(Error::Closed(format!(
                "the database is closed: refused to {what} {}",
                path.display()
            )));
        }
        Ok(())
    }
}

/// `inner`, refusing every change once `released` is marked.
#[derive(Debug)]
pub struct GuardedFs {
    inner: Arc<dyn Fs>,
    released: DirectoryRelease,
}

impl GuardedFs {
    pub fn new(inner: Arc<dyn Fs>, released: DirectoryRelease) -> GuardedFs {
        GuardedFs { inner, released }
    }
}

/// A file created through a [`GuardedFs`]: unchanged once the directory
/// is released.
struct GuardedWritableFile {
    /// `None` only while dropping.
    inner: Option<Box<dyn WritableFile>>,
    released: DirectoryRelease,
    path: std::path::PathBuf,
}

impl GuardedWritableFile {
    fn open_inner(&mut self, what: &str) -> Result<&mut Box<dyn WritableFile>> {
        self.released.check(what, &self.path)?;
        self.inner.as_mut().ok_or_else(|| Error::Closed(format!("{} was given up", self.path.display())))
    }
}

impl WritableFile for GuardedWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.open_inner("write")?.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.open_inner("flush")?.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.open_inner("sync")?.sync()
    }

    fn start_writeback(&mut self) -> Result<()> {
        self.open_inner("flush")?.start_writeback()
    }

    fn len(&self) -> u64 {
        self.inner.as_ref().map_or(0, |f| f.len())
    }

    fn abandon(mut self: Box<Self>) {
        if let Some(inner) = self.inner.take() {
            inner.abandon();
        }
    }
}

impl Drop for GuardedWritableFile {
    fn drop(&mut self) {
        if self.released.is_marked()
            && let Some(inner) = self.inner.take()
        {
            inner.abandon();
        }
    }
}

impl Fs for GuardedFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.released.check("create", path)?;
        let file = self.inner.create(path)?;
        if self.released.is_marked() {
            // The directory was released while the file was being created: undo it.
            drop(file);
            let _ = self.inner.remove(path);
            return Err(Error::Closed(format!(
                "the database closed while {} was being created",
                path.display()
            )));
        }
        Ok(Box::new(GuardedWritableFile {
            inner: Some(file),
            released: self.released.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>> {
        self.inner.open(path)
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.released.check("rename", from)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.released.check("remove", path)?;
        self.inner.remove(path)
    }

    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        self.released.check("link", to)?;
        self.inner.link(from, to)
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        self.released.check("remove", path)?;
        self.inner.remove_dir_all(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }

    fn is_dir(&self, path: &Path) -> Result<bool> {
        self.inner.is_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.released.check("create the directory", path)?;
        self.inner.create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.released.check("sync", path)?;
        self.inner.sync_dir(path)
    }

    fn lock(&self, path: &Path, dir: &Path) -> Result<Box<dyn FileLock>> {
        self.released.check("lock", path)?;
        self.inner.lock(path, dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemFs;

    #[test]
    fn a_released_directory_refuses_every_change_and_allows_reads() {
        let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
        let released = DirectoryRelease::default();
        let fs = GuardedFs::new(mem.clone(), released.clone());
        let dir = Path::new("/d");
        fs.create_dir_all(dir).expect("dir");
        let mut f = fs.create(&dir.join("a")).expect("create");
        f.append(b"x").expect("append");
        f.sync().expect("sync");
        released.mark();
        assert!(matches!(fs.create(&dir.join("b")), Err(Error::Closed(_))));
        assert!(matches!(fs.remove(&dir.join("a")), Err(Error::Closed(_))));
        assert!(matches!(fs.rename(&dir.join("a"), &dir.join("c")), Err(Error::Closed(_))));
        assert!(matches!(fs.link(&dir.join("a"), &dir.join("c")), Err(Error::Closed(_))));
        assert!(matches!(fs.sync_dir(dir), Err(Error::Closed(_))));
        assert!(matches!(fs.create_dir_all(&dir.join("e")), Err(Error::Closed(_))));
        assert_eq!(fs.read_all(&dir.join("a")).expect("read"), b"x");
        assert_eq!(fs.list(dir).expect("list"), vec!["a".to_string()]);
        // A file created before the release (an SST a compaction on a
        // caller's thread is writing) takes nothing more.
        assert!(matches!(f.append(b"y"), Err(Error::Closed(_))));
        assert!(matches!(f.flush(), Err(Error::Closed(_))));
        assert!(matches!(f.sync(), Err(Error::Closed(_))));
        drop(f);
        assert_eq!(fs.read_all(&dir.join("a")).expect("read"), b"x");
    }

    /// On the real file system a file buffers its appends: given up after
    /// the release, the buffered bytes are not written (dropping the
    /// buffer would write them).
    #[test]
    fn a_file_of_a_released_directory_drops_its_buffered_bytes() {
        let tmp = tempfile::tempdir().expect("dir");
        let released = DirectoryRelease::default();
        let fs = GuardedFs::new(Arc::new(crate::io::RealFs), released.clone());
        let (kept, dropped) = (tmp.path().join("kept"), tmp.path().join("dropped"));
        let mut f = fs.create(&kept).expect("create");
        f.append(b"buffered").expect("append");
        drop(f);
        let mut f = fs.create(&dropped).expect("create");
        f.append(b"buffered").expect("append");
        released.mark();
        drop(f);
        assert_eq!(std::fs::read(&kept).expect("read"), b"buffered", "dropped before the release: written");
        assert_eq!(std::fs::read(&dropped).expect("read"), b"", "dropped after the release: not written");
    }
}
