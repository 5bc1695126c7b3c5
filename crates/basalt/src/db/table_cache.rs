//! Open SST readers by file number. A reader keeps its file handle, fence
//! keys and filter in memory; data blocks go through the block cache.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::cache::BlockCache;
use crate::error::Result;
use crate::files;
use crate::io::Fs;
use crate::sst::reader::SstReader;
use crate::version::FileMeta;

/// Readers of the SSTs in use, opened on first access.
pub(crate) struct TableCache {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    readers: RwLock<HashMap<u64, Arc<SstReader>>>,
    /// Read SSTs through memory maps (`Options::mmap_reads`).
    mmap_reads: bool,
}

impl TableCache {
    pub(crate) fn new(fs: Arc<dyn Fs>, dir: PathBuf, mmap_reads: bool) -> Self {
        TableCache { fs, dir, readers: RwLock::new(HashMap::new()), mmap_reads }
    }

    /// The reader of SST `number`, opening it if needed.
    pub(crate) fn get(&self, number: u64, cache: &Arc<BlockCache>) -> Result<Arc<SstReader>> {
        if let Some(r) = self.readers.read().get(&number) {
            return Ok(r.clone());
        }
        let path = self.dir.join(files::sst(number));
        let reader = SstReader::open(self.fs.as_ref(), &path, number, cache.clone(), self.mmap_reads)?;
        Ok(self.readers.write().entry(number).or_insert(reader).clone())
    }

    /// Forgets a deleted SST and drops its cached blocks.
    /// The reader of `file`, kept in its metadata after the first call, so
    /// lookups after that take no lock and update no reference count.
    pub(crate) fn reader<'a>(&self, file: &'a FileMeta, cache: &Arc<BlockCache>) -> Result<&'a SstReader> {
        if let Some(reader) = file.reader.get() {
            return Ok(reader);
        }
        Ok(file.reader.set(self.get(file.number, cache)?))
    }

    pub(crate) fn evict(&self, number: u64, cache: &BlockCache) {
        self.readers.write().remove(&number);
        cache.evict_file(number);
    }

    /// Bytes of learned models per SST entry, over the open readers.
    pub(crate) fn model_bytes_per_key(&self) -> f64 {
        let readers = self.readers.read();
        let (bytes, entries) = readers.values().fold((0usize, 0u64), |(b, e), r| {
            (b + r.model().map_or(0, crate::sst::model::Model::bytes), e + r.properties().entries)
        });
        if entries == 0 { 0.0 } else { bytes as f64 / entries as f64 }
    }

    /// Data blocks not yet checked for in-place reads, over the open readers.
    pub(crate) fn blocks_unchecked(&self) -> u64 {
        self.readers.read().values().map(|r| r.blocks_unchecked() as u64).sum()
    }

    /// Number of open readers.
    pub(crate) fn len(&self) -> usize {
        self.readers.read().len()
    }
}
