//! Dumping and checking the on-disk formats (feature `inspect`): how the
//! fuzz targets, the crash tester and an operator's tools read an SST, a
//! log (WAL or MANIFEST) record, a key or a schema without opening a
//! database, and list a database's levels and files. Everything here
//! reads; nothing repairs. The layouts are drawn in `docs/format.md`.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::internal::SeqNo;
use crate::codec::key;
use crate::error::Result;
use crate::io::Fs;
use crate::sst::SstIter;
use crate::sst::block_cache::BlockCache;
use crate::sst::reader::{LookupTrace, SstReader};
use crate::version::VersionEdit;
use crate::{Db, KeyValue, OwnedKeyValue};

pub use crate::codec::internal::Kind as EntryKind;
pub use crate::codec::key::KeyType;
pub use crate::db::IndexCheck;
pub use crate::log::reader::LogContents;
pub use crate::row::{schema_from_ipc, schema_to_ipc};
pub use crate::sst::meta::Properties as SstProperties;
pub use crate::wal::batch::{BatchEntry as WalEntry, DecodedBatch as WalBatch};

/// Constants and checksums of the SST layout, for tools that build or
/// patch SST bytes (the fuzz targets make checksums valid with them).
pub mod sst_format {
    pub use crate::sst::format::{FOOTER_BYTES, META_INDEX, block_crc, mask_crc};
}

/// Decodes a key of the given column types (the order-preserving key
/// encoding of `docs/key-encoding.md`).
pub fn decode_key(bytes: &[u8], types: &[KeyType]) -> Result<Vec<OwnedKeyValue>> {
    key::decode(bytes, types)
}

/// Decodes a key whose columns may be null (the encoding of index keys).
pub fn decode_nullable_key(bytes: &[u8], types: &[KeyType]) -> Result<Vec<Option<OwnedKeyValue>>> {
    key::decode_nullable(bytes, types)
}

/// Encodes a key of non-null values.
pub fn encode_key(parts: &[KeyValue<'_>]) -> Vec<u8> {
    key::encode(parts)
}

/// Encodes a key whose values may be null.
pub fn encode_nullable_key(parts: &[Option<KeyValue<'_>>]) -> Vec<u8> {
    key::encode_nullable(parts)
}

/// The records of a log file held in memory (`path` names it in errors).
pub fn read_log(path: &Path, bytes: &[u8]) -> Result<LogContents> {
    crate::log::reader::read_log(path, bytes)
}

/// Log bytes holding `payloads` as records, each followed by the seal
/// record the engine ends every append with. Empty payloads are skipped
/// (a record is never empty).
pub fn frame_log<'a>(payloads: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for payload in payloads.into_iter().filter(|p| !p.is_empty()) {
        crate::log::format::encode_record(payload, &mut out);
        crate::log::format::encode_record(crate::log::format::SEAL_PAYLOAD, &mut out);
    }
    out
}

/// Decodes one WAL record's payload (a write batch) found at `offset` of
/// `path`.
pub fn decode_wal_batch<'a>(payload: &'a [u8], path: &Path, offset: u64) -> Result<WalBatch<'a>> {
    crate::wal::batch::decode(payload, path, offset)
}

/// One MANIFEST record: a version edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEdit(VersionEdit);

impl ManifestEdit {
    /// Decodes the record payload found at `offset` of `path`.
    pub fn decode(payload: &[u8], path: &Path, offset: u64) -> Result<ManifestEdit> {
        VersionEdit::decode(payload, path, offset).map(ManifestEdit)
    }

    /// The record payload this edit encodes to.
    pub fn encode(&self) -> Vec<u8> {
        self.0.encode()
    }
}

/// An SST opened on its own, outside any database.
#[derive(Debug)]
pub struct Sst {
    reader: Arc<SstReader>,
}

/// Bytes of block cache an inspected SST reads through.
const INSPECT_CACHE_BYTES: usize = 1 << 20;

impl Sst {
    /// Opens the SST at `path`, which the database numbers `file_number`;
    /// `mmap` reads it through a memory map, as the engine does by default.
    /// Every structure the open reads (footer, metaindex, index, filter,
    /// properties) is checked; a damaged one is `Error::Corruption`.
    pub fn open(fs: &dyn Fs, path: &Path, file_number: u64, mmap: bool) -> Result<Sst> {
        let cache = Arc::new(BlockCache::new(INSPECT_CACHE_BYTES));
        Ok(Sst { reader: SstReader::open(fs, path, file_number, cache, mmap)? })
    }

    /// What the file says it holds.
    pub fn properties(&self) -> &SstProperties {
        self.reader.properties()
    }

    /// False only if the file's filter rules `user_key` out.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.reader.may_contain_hash(crate::sst::filter::key_hash(user_key))
    }

    /// The newest entry of `user_key` with a seqno at or below `seqno`, as
    /// (trailer, value), through the same filter and lookup a read uses.
    pub fn get(&self, user_key: &[u8], seqno: SeqNo) -> Result<Option<(u64, Bytes)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let found = self.reader.find(user_key, seqno, &mut LookupTrace::default())?;
        Ok(found.map(|(block, i)| {
            let rows = block.rows();
            (rows.trailer(i), Bytes::copy_from_slice(rows.value(i)))
        }))
    }

    /// A cursor over the entries, unpositioned.
    pub fn cursor(&self) -> SstCursor {
        SstCursor(SstIter::new(self.reader.clone(), crate::sst::Blocks::Cached))
    }

    /// Reads every entry in order, checking each block, and returns how
    /// many there are; checks they agree with the properties.
    pub fn verify(&self) -> Result<u64> {
        let mut cursor = self.cursor();
        cursor.seek_to_first()?;
        let mut entries = 0u64;
        while cursor.valid() {
            entries += 1;
            cursor.next()?;
        }
        let expected = self.reader.properties().entries;
        if entries != expected {
            return Err(crate::Error::corruption(
                self.reader.path(),
                0,
                format!("{entries} entries read, the properties say {expected}"),
            ));
        }
        Ok(entries)
    }
}

/// A cursor over an inspected SST's entries in internal-key order (user
/// key ascending, newest version first). A failed move leaves it invalid.
#[derive(Debug)]
pub struct SstCursor(SstIter);

impl SstCursor {
    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.0.valid()
    }

    /// Moves to the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.0.seek_to_first()
    }

    /// Moves to the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.0.seek_to_last()
    }

    /// Moves to the first entry at or after `(user_key, trailer)`.
    pub fn seek(&mut self, user_key: &[u8], trailer: u64) -> Result<()> {
        self.0.seek(user_key, trailer)
    }

    /// Moves to the next entry (past the end: invalid).
    #[expect(clippy::should_implement_trait, reason = "a fallible cursor step, not an Iterator")]
    pub fn next(&mut self) -> Result<()> {
        self.0.next()
    }

    /// Moves to the previous entry (before the start: invalid).
    pub fn prev(&mut self) -> Result<()> {
        self.0.prev()
    }

    /// The current entry's user key (empty when invalid).
    pub fn user_key(&self) -> &[u8] {
        self.0.user_key()
    }

    /// The current entry's trailer: seqno << 8 | kind (0 when invalid).
    pub fn trailer(&self) -> u64 {
        self.0.trailer()
    }

    /// The current entry's value (empty when invalid or a delete).
    pub fn value(&self) -> &[u8] {
        self.0.value()
    }
}

/// One SST of a database, as the current version lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileInfo {
    /// Name of the tree (keyspace, table or index) the file belongs to.
    pub tree: String,
    /// Level (0 to 6).
    pub level: usize,
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Bytes on disk.
    pub size: u64,
    /// Entries, deletes included.
    pub entries: u64,
    /// Smallest and largest user key.
    pub key_range: (Bytes, Bytes),
    /// Smallest and largest seqno.
    pub seqno_range: (u64, u64),
}

/// Every SST of the database's current version, tree by tree, level by
/// level (L0 newest first, deeper levels in key order).
pub fn files(db: &Db) -> Vec<FileInfo> {
    let state = db.inner().versions.load_full();
    let mut out = Vec::new();
    for (id, tree) in &state.version.trees {
        let name = state.version.catalog.tree(*id).map(|t| t.name.clone()).unwrap_or_default();
        for (level, f) in tree.all_files() {
            out.push(FileInfo {
                tree: name.clone(),
                level,
                number: f.number,
                size: f.size,
                entries: f.entries,
                key_range: (f.smallest.user_key.clone(), f.largest.user_key.clone()),
                seqno_range: (f.min_seqno, f.max_seqno),
            });
        }
    }
    out
}

/// Checks every blob file of the database's current version whole: each
/// record's length and checksum, in order, and the footer against the
/// MANIFEST's counts. Returns the number of records checked; damage is
/// `Error::Corruption` naming the blob file and the record's offset.
pub fn verify_blob_files(db: &Db) -> Result<u64> {
    let state = db.inner().versions.load_full();
    let mut records = 0;
    for b in state.version.blobs.values() {
        db.inner().blob_files.check_file(b.number, b.size, b.records, b.value_bytes)?;
        records += b.records;
    }
    Ok(records)
}

/// Checks every index of `table` against its rows at one snapshot: each
/// row must have exactly the entry the write path makes for it, and the
/// index nothing else. Streams the table and each index once, in constant
/// memory.
pub fn check_indexes(table: &crate::Table) -> Result<Vec<IndexCheck>> {
    table.check_indexes()
}
