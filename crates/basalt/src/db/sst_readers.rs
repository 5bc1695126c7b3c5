//! Open SST readers by file number. A reader keeps its file handle, fence
//! keys and filter in memory; data blocks go through the block cache.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::files;
use crate::ids::TreeId;
use crate::io::Fs;
use crate::sst::block_cache::BlockCache;
use crate::sst::reader::SstReader;
use crate::version::FileMeta;

/// Readers of the SSTs in use, opened on first access.
pub(crate) struct SstReaders {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    readers: RwLock<HashMap<u64, Arc<SstReader>>>,
    /// Read SSTs through memory maps (`Options::mmap_reads`).
    mmap_reads: bool,
}

impl SstReaders {
    pub(crate) fn new(fs: Arc<dyn Fs>, dir: PathBuf, mmap_reads: bool) -> Self {
        SstReaders { fs, dir, readers: RwLock::new(HashMap::new()), mmap_reads }
    }

    /// The reader of `file`, an SST of `tree`, opening it if needed. A
    /// file opened here must be the one its MANIFEST entry describes.
    pub(crate) fn get(
        &self,
        tree: TreeId,
        file: &FileMeta,
        cache: &Arc<BlockCache>,
    ) -> Result<Arc<SstReader>> {
        if let Some(r) = self.readers.read().get(&file.number) {
            return Ok(r.clone());
        }
        let path = self.dir.join(files::sst(file.number));
        let reader = SstReader::open(self.fs.as_ref(), &path, file.number, cache.clone(), self.mmap_reads)?;
        check_manifest_entry(&reader, tree, file)?;
        Ok(self.readers.write().entry(file.number).or_insert(reader).clone())
    }

    /// The reader of `file`, kept in its metadata after the first call, so
    /// lookups after that take no lock and update no reference count.
    pub(crate) fn reader<'a>(
        &self,
        tree: TreeId,
        file: &'a FileMeta,
        cache: &Arc<BlockCache>,
    ) -> Result<&'a SstReader> {
        if let Some(reader) = file.reader.get() {
            return Ok(reader);
        }
        Ok(file.reader.set(self.get(tree, file, cache)?))
    }

    /// Forgets a deleted SST and drops its cached blocks.
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

/// Checks an opened SST against its MANIFEST entry. Every checksum of a
/// file can hold while the file is not the one the MANIFEST means (two
/// SSTs that swapped names, a table's file under a key-value file's name):
/// reads would then answer from the wrong entries without an error. The
/// file number (recorded from format version 3), size, tree, key range,
/// seqno range and entry count must all agree, as RocksDB checks a table's
/// unique id against its MANIFEST record.
fn check_manifest_entry(reader: &SstReader, tree: TreeId, file: &FileMeta) -> Result<()> {
    let p = reader.properties();
    let mismatch = if p.file_number.is_some_and(|n| n != file.number) {
        Some(format!("its properties name file {}", p.file_number.unwrap_or_default()))
    } else if reader.file_size() != file.size {
        Some(format!("it has {} bytes, the MANIFEST says {}", reader.file_size(), file.size))
    } else if p.tree_id != tree {
        Some(format!("it holds tree {}, the MANIFEST lists it in tree {tree}", p.tree_id))
    } else if p.entries != file.entries {
        Some(format!("it has {} entries, the MANIFEST says {}", p.entries, file.entries))
    } else if (p.min_seqno, p.max_seqno) != (file.min_seqno, file.max_seqno) {
        Some("its seqno range differs from the MANIFEST's".to_string())
    } else if p.smallest != file.smallest || p.largest != file.largest {
        Some("its key range differs from the MANIFEST's".to_string())
    } else {
        None
    };
    match mismatch {
        Some(what) => {
            Err(Error::corruption(reader.path(), 0, format!("SST does not match its MANIFEST entry: {what}")))
        }
        None => Ok(()),
    }
}
