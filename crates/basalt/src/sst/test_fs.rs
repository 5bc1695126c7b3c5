//! A minimal in-memory [`Fs`] for the SST tests: files are byte vectors that
//! tests can read back, damage and replace. It has no crash simulation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::io::{FileLock, Fs, RandomAccessFile, WritableFile};

type Files = Arc<Mutex<HashMap<PathBuf, Arc<Vec<u8>>>>>;

#[derive(Debug, Default, Clone)]
pub struct TestFs {
    files: Files,
}

impl TestFs {
    pub fn get(&self, path: &Path) -> Vec<u8> {
        self.files.lock().get(path).map(|f| f.to_vec()).unwrap_or_default()
    }

    pub fn put(&self, path: &Path, bytes: Vec<u8>) {
        self.files.lock().insert(path.to_path_buf(), Arc::new(bytes));
    }
}

struct MemWritable {
    path: PathBuf,
    buf: Vec<u8>,
    files: Files,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.files.lock().insert(self.path.clone(), Arc::new(self.buf.clone()));
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.flush()
    }
    fn len(&self) -> u64 {
        self.buf.len() as u64
    }
}

struct MemReadable {
    path: PathBuf,
    data: Arc<Vec<u8>>,
}

impl RandomAccessFile for MemReadable {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start.checked_add(len).and_then(|end| self.data.get(start..end)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(Error::corruption(&self.path, offset, "read past end of file")),
        }
    }
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn map(&self) -> Result<Option<bytes::Bytes>> {
        Ok(Some(bytes::Bytes::copy_from_slice(&self.data)))
    }
}

fn unsupported(what: &str) -> Error {
    Error::io("", std::io::Error::other(format!("TestFs does not support {what}")))
}

impl Fs for TestFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.put(path, Vec::new());
        Ok(Box::new(MemWritable {
            path: path.to_path_buf(),
            buf: Vec::new(),
            files: Arc::clone(&self.files),
        }))
    }
    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>> {
        let data = self.files.lock().get(path).cloned();
        let data = data.ok_or_else(|| Error::io(path, std::io::ErrorKind::NotFound.into()))?;
        Ok(Box::new(MemReadable { path: path.to_path_buf(), data }))
    }
    fn rename(&self, _: &Path, _: &Path) -> Result<()> {
        Err(unsupported("rename"))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.files.lock().remove(path);
        Ok(())
    }
    fn list(&self, _: &Path) -> Result<Vec<String>> {
        Err(unsupported("list"))
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        Ok(self.files.lock().contains_key(path))
    }
    fn is_dir(&self, _: &Path) -> Result<bool> {
        Ok(false)
    }
    fn create_dir_all(&self, _: &Path) -> Result<()> {
        Ok(())
    }
    fn sync_dir(&self, _: &Path) -> Result<()> {
        Ok(())
    }
    fn lock(&self, _: &Path, _: &Path) -> Result<Box<dyn FileLock>> {
        Err(unsupported("lock"))
    }
}
