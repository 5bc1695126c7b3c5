//! Open SST readers by file number. A reader keeps its file handle, fence
//! keys, filter and learned model in memory; data blocks go through the
//! block cache, which this cache owns.
//!
//! Unbounded (the default), a reader once opened stays open as long as its
//! file is live, and is also kept in the file's metadata so that point
//! lookups reach it without a lock or a reference-count update. With
//! `Options::max_open_files`, at most that many readers are kept: the one
//! used longest ago is closed when another must open, and lookups take
//! each reader from the map (a read lock and a reference count).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::files;
use crate::ids::TreeId;
use crate::io::Fs;
use crate::sst::block_cache::BlockCache;
use crate::sst::reader::SstReader;
use crate::version::FileMeta;

/// A kept reader and when it was last used (a tick of [`SstReaders::clock`]).
struct Kept {
    reader: Arc<SstReader>,
    used: AtomicU64,
}

/// Readers of the SSTs in use, opened on first access.
pub(crate) struct SstReaders {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    readers: RwLock<HashMap<u64, Kept>>,
    /// Most readers kept; `None`: no limit.
    capacity: Option<usize>,
    /// Ticks once per access of a bounded cache, to order readers by use.
    clock: AtomicU64,
    /// Read SSTs through memory maps (`Options::mmap_reads`).
    mmap_reads: bool,
    block_cache: Arc<BlockCache>,
}

/// A reader borrowed from its file's metadata, or shared from a bounded
/// cache (which may close its file while the caller still reads it).
pub(crate) enum ReaderRef<'a> {
    Kept(&'a SstReader),
    Shared(Arc<SstReader>),
}

impl std::ops::Deref for ReaderRef<'_> {
    type Target = SstReader;

    fn deref(&self) -> &SstReader {
        match self {
            ReaderRef::Kept(r) => r,
            ReaderRef::Shared(r) => r,
        }
    }
}

impl SstReaders {
    /// `capacity` 0 keeps every reader.
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        mmap_reads: bool,
        capacity: usize,
        block_cache: Arc<BlockCache>,
    ) -> Self {
        SstReaders {
            fs,
            dir,
            readers: RwLock::new(HashMap::new()),
            capacity: (capacity > 0).then_some(capacity),
            clock: AtomicU64::new(0),
            mmap_reads,
            block_cache,
        }
    }

    /// The block cache every reader reads through.
    pub(crate) fn block_cache(&self) -> &BlockCache {
        &self.block_cache
    }

    /// The reader of `file`, an SST of `tree`, opening it if needed. A
    /// file opened here must be the one its MANIFEST entry describes.
    pub(crate) fn get(&self, tree: TreeId, file: &FileMeta) -> Result<Arc<SstReader>> {
        if let Some(kept) = self.readers.read().get(&file.number) {
            if self.capacity.is_some() {
                kept.used.store(self.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
            }
            return Ok(kept.reader.clone());
        }
        let path = self.dir.join(files::sst(file.number));
        let reader =
            SstReader::open(self.fs.as_ref(), &path, file.number, self.block_cache.clone(), self.mmap_reads)?;
        check_manifest_entry(&reader, tree, file)?;
        reader.set_schema_version(file.schema_version);
        let mut readers = self.readers.write();
        if let Some(capacity) = self.capacity
            && readers.len() >= capacity
            && !readers.contains_key(&file.number)
        {
            // Closes the least recently used; an iterator still reading it
            // keeps its own reference until it is done.
            let oldest = readers.iter().min_by_key(|(_, k)| k.used.load(Ordering::Relaxed)).map(|(n, _)| *n);
            if let Some(n) = oldest {
                readers.remove(&n);
            }
        }
        let used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed));
        Ok(readers.entry(file.number).or_insert(Kept { reader, used }).reader.clone())
    }

    /// The reader of `file` for a point lookup: unbounded, kept in its
    /// metadata after the first call, so lookups after that take no lock and
    /// update no reference count.
    pub(crate) fn reader<'a>(&self, tree: TreeId, file: &'a FileMeta) -> Result<ReaderRef<'a>> {
        if self.capacity.is_some() {
            return Ok(ReaderRef::Shared(self.get(tree, file)?));
        }
        if let Some(reader) = file.reader.get() {
            return Ok(ReaderRef::Kept(reader));
        }
        Ok(ReaderRef::Kept(file.reader.set(self.get(tree, file)?)))
    }

    /// Forgets a deleted SST and drops its cached blocks.
    pub(crate) fn evict(&self, number: u64) {
        self.readers.write().remove(&number);
        self.block_cache.evict_file(number);
    }

    /// Bytes of learned models per SST entry, over the open readers.
    pub(crate) fn model_bytes_per_key(&self) -> f64 {
        let readers = self.readers.read();
        let (bytes, entries) = readers.values().fold((0usize, 0u64), |(b, e), k| {
            let r = &k.reader;
            (b + r.model().map_or(0, crate::sst::model::Model::bytes), e + r.properties().entries)
        });
        if entries == 0 { 0.0 } else { bytes as f64 / entries as f64 }
    }

    /// Data blocks not yet checked for in-place reads, over the open readers.
    pub(crate) fn blocks_unchecked(&self) -> u64 {
        self.readers.read().values().map(|k| k.reader.blocks_unchecked() as u64).sum()
    }

    /// Memory the open readers hold besides cached blocks.
    pub(crate) fn metadata_bytes(&self) -> u64 {
        self.readers.read().values().map(|k| k.reader.metadata_bytes() as u64).sum()
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
    // A file written outside any database names file 0 and takes the
    // number its ingest gave it; the other checks hold for it as for any.
    let external = p.file_number == Some(crate::sst::format::EXTERNAL_FILE_NUMBER);
    let mismatch = if p.file_number.is_some_and(|n| n != file.number) && !external {
        Some(format!("its properties name file {}", p.file_number.unwrap_or_default()))
    } else if p.schema_version.is_some_and(|v| v != file.schema_version) {
        Some(format!(
            "its rows are of schema version {}, the MANIFEST says {}",
            p.schema_version.unwrap_or_default(),
            file.schema_version
        ))
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
