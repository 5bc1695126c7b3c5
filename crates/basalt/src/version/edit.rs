//! Version edits: the records of the MANIFEST. Each edit is a list of tagged
//! fields (byte layout in `docs/format.md`):
//!
//! ```text
//! edit  := field*
//! field := tag: u8 | body
//! 1 log number      varint        WALs numbered below it are obsolete
//! 2 next file       varint        next unused file number
//! 3 last seqno      varint        seqnos at or below it are in SSTs
//! 4 tree created    varint id | varint len + name
//! 5 tree dropped    varint id
//! 6 file added      varint tree | u8 level | file meta
//! 7 file deleted    varint tree | u8 level | varint number
//! 8 tree schema     varint tree | varint n | varint key column{n}
//!                   | varint len + Arrow IPC stream of the schema
//!                   (written before tree kinds; still read)
//! 9 tree kind       varint tree | u8 kind | kind body:
//!                   1 keyspace: nothing
//!                   2 table:    varint n | varint key column{n}
//!                               | varint len + Arrow IPC stream of the schema
//!                   3 index:    varint table tree | u8 flags (bit 0: unique,
//!                               bit 1: being built)
//!                               | varint n | varint column{n}
//!                               | varint m | varint included column{m}
//! 10 blob file added  varint number | varint size | varint records
//!                     | varint value bytes
//! 11 file added with blob pointers:
//!                   as 6 | varint n | (varint blob file | varint bytes){n}
//!                   (the value bytes the file's entries point to in each
//!                   blob file; written instead of 6 only by such files, so
//!                   databases without blob files keep the old records)
//! 12 table schema version  varint tree | varint version
//!                   | varint n | varint key column{n}
//!                   | varint m | varint column id{m}
//!                   | varint len + Arrow IPC stream of the schema
//!                   | varint d | (varint column | varint len + Arrow IPC
//!                     stream of the one-row batch of its default){d}
//!                   (applied after the edit's table kinds and before its
//!                   index kinds)
//! 13 file schema    varint tree | varint file number | varint version
//!                   (after the file's 6 or 11 in the same edit; written
//!                   only for a version other than 0)
//! 14 tree history   varint tree | u8 flags (bit 0: keep for, bit 1: keep
//!                   versions; none: history off) | varint milliseconds
//!                   (bit 0) | varint versions (bit 1) | varint since seqno
//!                   (applied after every tree kind of the edit)
//! 15 commit times   varint after | varint n | (varint seqno - previous
//!                   seqno | varint unix ms - previous ms){n}: the last
//!                   seqno committed in each millisecond
//!                   (`db/state/clock.rs`), seqnos ascending, times never
//!                   descending, the first mark's
//!                   deltas from zero; they time every commit after
//!                   seqno `after` (no marks: the MANIFEST's marks are
//!                   dropped, no tree keeping history)
//! 16 table version start  varint tree | varint version | varint seqno:
//!                   rows of commits after the seqno are of that schema
//!                   version or a later one (applied after tag 12)
//! 17 range tombstone  varint tree | varint seqno | varint len + start
//!                   | u8 (1: an end follows; 0: no end) | [varint len + end]
//!                   (every key of [start, end) deleted at seqno;
//!                   `range_del.rs`; applied after the edit's files)
//! 18 range tombstone dropped  varint tree | varint seqno (it covers no
//!                   entry any more)
//! 19 merge operator varint tree | varint len + name: the keyspace takes
//!                   merge operands folded by the operator of that name
//!                   (`merge.rs`; applied after every tree kind)
//! file meta := number | size | entries | min seqno | max seqno (varints)
//!              | smallest: varint len + key | u64 LE trailer
//!              | largest:  varint len + key | u64 LE trailer
//! ```

use std::path::Path;

use bytes::Bytes;

use super::version::LEVELS;
use crate::catalog::{HistoryWindow, TableVersionRecord, TreeHistory, TreeKindRecord};
use crate::codec::internal::{InternalKey, SeqNo};
use crate::codec::varint::{self, Reader};
use crate::error::Result;
use crate::ids::TreeId;
use crate::range_del::RangeTombstone;

const TAG_LOG_NUMBER: u8 = 1;
const TAG_NEXT_FILE: u8 = 2;
const TAG_LAST_SEQNO: u8 = 3;
const TAG_TREE_CREATED: u8 = 4;
const TAG_TREE_DROPPED: u8 = 5;
const TAG_FILE_ADDED: u8 = 6;
const TAG_FILE_DELETED: u8 = 7;
const TAG_TREE_SCHEMA: u8 = 8;
const TAG_TREE_KIND: u8 = 9;
const TAG_BLOB_FILE_ADDED: u8 = 10;
const TAG_FILE_ADDED_WITH_BLOBS: u8 = 11;
const TAG_TABLE_VERSION: u8 = 12;
const TAG_FILE_SCHEMA: u8 = 13;
const TAG_TREE_HISTORY: u8 = 14;
const TAG_COMMIT_TIMES: u8 = 15;
const TAG_TABLE_VERSION_START: u8 = 16;
const TAG_RANGE_TOMBSTONE: u8 = 17;
const TAG_RANGE_TOMBSTONE_DROPPED: u8 = 18;
const TAG_MERGE_OPERATOR: u8 = 19;
const TAG_TREE_TTL: u8 = 20;

/// Longest merge operator name accepted in a MANIFEST.
const MERGE_OPERATOR_NAME_BYTES_MAX: usize = 256;

/// Flags of a tree history record.
const HISTORY_KEEP_FOR: u8 = 1;
const HISTORY_KEEP_VERSIONS: u8 = 2;

/// Most commit-time marks one record may hold.
const COMMIT_TIMES_MAX: usize = 1 << 26;

/// Most blob files one SST may point into in a MANIFEST record.
const BLOB_REFS_MAX: usize = 1 << 20;

const KIND_KEYSPACE: u8 = 1;
const KIND_TABLE: u8 = 2;
const KIND_INDEX: u8 = 3;

/// Bit of an index record's flags: the index is unique.
const INDEX_UNIQUE: u8 = 1;
/// Index flag: still being built (backfilled); a MANIFEST that ends with
/// it set belongs to a creation that never finished.
const INDEX_BUILDING: u8 = 2;

/// Most key, indexed or included columns a record may list (a table has
/// at most `COLUMNS_MAX` columns).
const RECORD_COLUMNS_MAX: usize = 1024;

/// Largest Arrow IPC schema accepted in a MANIFEST; `create_table` refuses
/// larger ones.
pub(crate) const SCHEMA_BYTES_MAX: usize = 16 << 20;

/// Longest tree name accepted in a MANIFEST.
const TREE_NAME_BYTES_MAX: usize = 4096;

/// What the version set knows about one SST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Number of entries.
    pub entries: u64,
    /// Smallest seqno in the file.
    pub min_seqno: SeqNo,
    /// Largest seqno in the file.
    pub max_seqno: SeqNo,
    /// Smallest internal key.
    pub smallest: InternalKey,
    /// Largest internal key.
    pub largest: InternalKey,
    /// Blob files the file's entries point into, with the value bytes
    /// they point to in each, by blob file number (empty for most files).
    /// A blob file lives while some SST of a live version lists it.
    pub blob_refs: Vec<(u64, u64)>,
    /// The table schema version its rows were written under (0 for every
    /// file of a keyspace or an index).
    pub schema_version: u32,
    /// The file's open reader, once a read asked for it.
    pub(crate) reader: ReaderSlot,
    /// Range reads that had to merge this file with a run below it.
    pub(crate) merged_reads: MergedReads,
}

/// What the version set knows about one blob file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobFileMeta {
    /// File number (`NNNNNN.blob`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Values it holds.
    pub records: u64,
    /// Sum of their lengths.
    pub value_bytes: u64,
}

/// The open reader of an SST, set on first use (by the table cache) and
/// kept with the file's metadata: a lookup reaches it through the version
/// it already holds, without the table cache's lock or a reference-count
/// update, both cache lines that parallel readers would bounce between
/// cores. Not part of the metadata's identity: equal to any other slot,
/// and a clone starts empty.
#[derive(Default)]
pub struct ReaderSlot(std::sync::OnceLock<std::sync::Arc<crate::sst::reader::SstReader>>);

impl ReaderSlot {
    /// The reader, if set.
    pub(crate) fn get(&self) -> Option<&std::sync::Arc<crate::sst::reader::SstReader>> {
        self.0.get()
    }

    /// The reader, set to `reader` unless another thread set it first.
    pub(crate) fn set(
        &self,
        reader: std::sync::Arc<crate::sst::reader::SstReader>,
    ) -> &std::sync::Arc<crate::sst::reader::SstReader> {
        self.0.get_or_init(|| reader)
    }
}

impl Clone for ReaderSlot {
    fn clone(&self) -> Self {
        ReaderSlot::default()
    }
}

impl PartialEq for ReaderSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ReaderSlot {}

impl std::fmt::Debug for ReaderSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "ReaderSlot(open)" } else { "ReaderSlot(empty)" })
    }
}

/// How many range reads had to merge a file with a sorted run below it
/// (another L0 file or a deeper level holding keys of the range): each
/// such read seeks and steps through both. Not part of the metadata's
/// identity; a clone starts at zero, as a file moved or rewritten by a
/// compaction no longer overlaps what it did.
#[derive(Default)]
pub struct MergedReads(std::sync::atomic::AtomicU64);

impl MergedReads {
    /// Counts `reads` more; true when these reach `allowed`.
    pub(crate) fn charge(&self, reads: u64, allowed: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        // Past the allowance the count no longer matters: no write, so
        // parallel readers do not bounce the line between cores.
        if self.0.load(Relaxed) >= allowed {
            return false;
        }
        let before = self.0.fetch_add(reads, Relaxed);
        before < allowed && before.saturating_add(reads) >= allowed
    }

    /// Reads counted so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The same count, for the file moved down a level unchanged: it still
    /// overlaps the runs below that reads paid for, and keeps asking until
    /// it reaches them.
    pub(crate) fn carried(&self) -> MergedReads {
        MergedReads(std::sync::atomic::AtomicU64::new(self.get()))
    }
}

impl Clone for MergedReads {
    fn clone(&self) -> Self {
        MergedReads::default()
    }
}

impl PartialEq for MergedReads {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for MergedReads {}

impl std::fmt::Debug for MergedReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergedReads({})", self.get())
    }
}

/// Bytes of a file per merged read it is allowed before it asks for a
/// compaction. LevelDB's reasoning for its seek compaction (`version_set.cc`,
/// `allowed_seeks`): a seek costs about what compacting 40 KB costs, and
/// it charges one seek per 16 KiB, conservatively; the same holds for a
/// range read that merges two runs, whose cost here is a seek and a
/// comparison per entry in each.
const MERGED_READ_BYTES: u64 = 16 << 10;

/// Fewest merged reads a file is allowed, however small.
const MERGED_READS_MIN: u64 = 100;

impl FileMeta {
    /// Merged reads this file allows before it asks for a compaction.
    pub(crate) fn merged_reads_allowed(&self) -> u64 {
        (self.size / MERGED_READ_BYTES).max(MERGED_READS_MIN)
    }

    /// Counts a range read that merged this file with a run below it;
    /// true when the file has now asked for a compaction. A read of the
    /// whole file (`whole`) counts for half its allowance: it merges every
    /// entry, as a compaction would, so two of them pay for one.
    pub(crate) fn charge_merged_read(&self, whole: bool) -> bool {
        let allowed = self.merged_reads_allowed();
        self.merged_reads.charge(if whole { allowed.div_ceil(2) } else { 1 }, allowed)
    }

    /// Whether reads that merged this file with runs below it reached its
    /// allowance: compacting it into the level below saves them.
    pub(crate) fn reads_ask_compaction(&self) -> bool {
        self.merged_reads.get() >= self.merged_reads_allowed()
    }

    /// Whether `user_key` lies within the file's key range.
    pub fn may_contain_key(&self, user_key: &[u8]) -> bool {
        self.smallest.user_key.as_ref() <= user_key && user_key <= self.largest.user_key.as_ref()
    }
}

/// A change to the version set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// WALs numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// Every seqno up to this one is durable in SSTs or earlier WALs.
    pub last_seqno: Option<SeqNo>,
    /// Trees created, with their names.
    pub trees_created: Vec<(TreeId, String)>,
    /// Trees dropped.
    pub trees_dropped: Vec<TreeId>,
    /// Table schemas of MANIFESTs written before tree kinds: (tree,
    /// primary key column indices, Arrow IPC schema). Read, never written
    /// by new edits (they record `tree_kinds`).
    pub tree_schemas: Vec<(TreeId, Vec<usize>, Vec<u8>)>,
    /// The kind of each tree created.
    pub tree_kinds: Vec<(TreeId, TreeKindRecord)>,
    /// Later schema versions of tables.
    pub table_versions: Vec<(TreeId, TableVersionRecord)>,
    /// Files added: (tree, level, meta).
    pub files_added: Vec<(TreeId, usize, FileMeta)>,
    /// Files deleted: (tree, level, number).
    pub files_deleted: Vec<(TreeId, usize, u64)>,
    /// Blob files added. A blob file leaves the version when no SST points
    /// into it any more, without a record of its own.
    pub blob_files_added: Vec<BlobFileMeta>,
    /// History windows set (`None`: turned off).
    pub(crate) tree_histories: Vec<(TreeId, Option<TreeHistory>)>,
    /// (seqno, unix milliseconds) marks: the last seqno committed in each
    /// millisecond, ascending (kept by the version set, not the version).
    pub commit_times: Vec<(SeqNo, u64)>,
    /// The marks time every commit after this seqno.
    pub commit_times_after: SeqNo,
    /// The MANIFEST's marks are dropped (no tree keeps history any more;
    /// written as tag 15 with no marks).
    pub commit_times_cleared: bool,
    /// (table, schema version, the seqno it began after).
    pub table_version_starts: Vec<(TreeId, u32, SeqNo)>,
    /// Range tombstones now in the version (flushed from memtables).
    pub range_tombstones_added: Vec<(TreeId, RangeTombstone)>,
    /// Range tombstones, by tree and seqno, that cover no entry any more.
    pub range_tombstones_dropped: Vec<(TreeId, SeqNo)>,
    /// Keyspaces bound to a merge operator, by its name.
    pub tree_merge_operators: Vec<(TreeId, String)>,
    /// Times to live set (`None`: turned off), tag 20.
    pub tree_ttls: Vec<(TreeId, Option<crate::catalog::TreeTtl>)>,
}

fn put_key(out: &mut Vec<u8>, key: &InternalKey) {
    varint::put_bytes(out, &key.user_key);
    out.extend_from_slice(&key.trailer.to_le_bytes());
}

fn read_key(r: &mut Reader<'_, '_>) -> Result<InternalKey> {
    let user_key = Bytes::copy_from_slice(r.len_bytes()?);
    let trailer = r.u64_le()?;
    Ok(InternalKey { user_key, trailer })
}

fn read_level(r: &mut Reader<'_, '_>) -> Result<usize> {
    let level = usize::from(r.u8()?);
    if level >= LEVELS {
        return Err(r.corrupt(format!("level {level} out of range")));
    }
    Ok(level)
}

fn read_tree(r: &mut Reader<'_, '_>) -> Result<TreeId> {
    let v = r.varint()?;
    TreeId::try_from(v).map_err(|_| r.corrupt(format!("tree id {v} out of range")))
}

fn put_columns(out: &mut Vec<u8>, columns: &[usize]) {
    varint::put_u64(out, columns.len() as u64);
    for &c in columns {
        varint::put_u64(out, c as u64);
    }
}

fn read_columns(r: &mut Reader<'_, '_>) -> Result<Vec<usize>> {
    let n = r.varint_len(RECORD_COLUMNS_MAX)?;
    (0..n).map(|_| r.varint_len(1 << 16)).collect()
}

fn read_table_version(r: &mut Reader<'_, '_>) -> Result<(TreeId, TableVersionRecord)> {
    let tree = read_tree(r)?;
    let version = read_u32(r)?;
    let primary_key = read_columns(r)?;
    let ids = r.varint_len(RECORD_COLUMNS_MAX)?;
    let column_ids = (0..ids).map(|_| read_u32(r)).collect::<Result<Vec<_>>>()?;
    let schema_ipc = read_schema(r)?;
    let count = r.varint_len(RECORD_COLUMNS_MAX)?;
    let mut defaults = Vec::with_capacity(count);
    for _ in 0..count {
        let column = r.varint_len(RECORD_COLUMNS_MAX)?;
        defaults.push((column, read_schema(r)?));
    }
    Ok((tree, TableVersionRecord { version, primary_key, column_ids, schema_ipc, defaults }))
}

fn read_commit_times(r: &mut Reader<'_, '_>, e: &mut VersionEdit) -> Result<()> {
    e.commit_times_after = r.varint()?;
    let n = r.varint_len(COMMIT_TIMES_MAX)?;
    e.commit_times_cleared = n == 0;
    let (mut seqno, mut ms) = (0u64, 0u64);
    for _ in 0..n {
        let (ds, dt) = (r.varint()?, r.varint()?);
        seqno = seqno.checked_add(ds).ok_or_else(|| r.corrupt("commit time seqno overflows"))?;
        ms = ms.checked_add(dt).ok_or_else(|| r.corrupt("commit time overflows"))?;
        if e.commit_times.last().is_some_and(|&(s, t)| s >= seqno || t > ms) || seqno <= e.commit_times_after
        {
            return Err(r.corrupt("commit times out of order"));
        }
        e.commit_times.push((seqno, ms));
    }
    Ok(())
}

fn read_tree_created(r: &mut Reader<'_, '_>) -> Result<(TreeId, String)> {
    let tree = read_tree(r)?;
    let name = r.len_bytes()?;
    if name.len() > TREE_NAME_BYTES_MAX {
        return Err(r.corrupt("tree name too long"));
    }
    let name = String::from_utf8(name.to_vec()).map_err(|_| r.corrupt("tree name is not UTF-8"))?;
    Ok((tree, name))
}

fn read_merge_operator(r: &mut Reader<'_, '_>) -> Result<(TreeId, String)> {
    let tree = read_tree(r)?;
    let name = r.len_bytes()?;
    if name.len() > MERGE_OPERATOR_NAME_BYTES_MAX {
        return Err(r.corrupt(format!("a merge operator name of {} bytes", name.len())));
    }
    let name = std::str::from_utf8(name).map_err(|_| r.corrupt("a merge operator name that is not UTF-8"))?;
    Ok((tree, name.to_string()))
}

/// Tag 20: the tree, then 0 (no time to live) or 1 followed by the TTL in
/// milliseconds, the seqno and the unix millisecond it was set at, and the
/// expiry floor when it was last changed.
fn read_tree_ttl(r: &mut Reader<'_, '_>) -> Result<(TreeId, Option<crate::catalog::TreeTtl>)> {
    let tree = read_tree(r)?;
    match r.u8()? {
        0 => Ok((tree, None)),
        1 => {
            let ttl_ms = r.varint()?;
            if ttl_ms == 0 {
                return Err(r.corrupt("a time to live of 0 ms"));
            }
            let ttl = crate::catalog::TreeTtl {
                ttl_ms,
                since_seqno: r.varint()?,
                since_ms: r.varint()?,
                floor_min: r.varint()?,
            };
            Ok((tree, Some(ttl)))
        }
        flag => Err(r.corrupt(format!("unknown time to live flag {flag:#x}"))),
    }
}

fn read_tree_seqno(r: &mut Reader<'_, '_>) -> Result<(TreeId, SeqNo)> {
    Ok((read_tree(r)?, r.varint()?))
}

fn read_range_tombstone(r: &mut Reader<'_, '_>) -> Result<(TreeId, RangeTombstone)> {
    let tree = read_tree(r)?;
    let seqno = r.varint()?;
    let start = Bytes::copy_from_slice(r.len_bytes()?);
    let end = match r.u8()? {
        0 => None,
        1 => Some(Bytes::copy_from_slice(r.len_bytes()?)),
        flag => return Err(r.corrupt(format!("range tombstone end flag {flag}"))),
    };
    if !crate::range_del::is_nonempty_range(&start, end.as_deref()) {
        return Err(r.corrupt("a range tombstone of an empty range"));
    }
    Ok((tree, RangeTombstone { start, end, seqno }))
}

fn read_tree_history(r: &mut Reader<'_, '_>) -> Result<(TreeId, Option<TreeHistory>)> {
    let tree = read_tree(r)?;
    let flags = r.u8()?;
    if flags & !(HISTORY_KEEP_FOR | HISTORY_KEEP_VERSIONS) != 0 {
        return Err(r.corrupt(format!("unknown history flags {flags:#x}")));
    }
    let keep_for = if flags & HISTORY_KEEP_FOR != 0 {
        Some(std::time::Duration::from_millis(r.varint()?))
    } else {
        None
    };
    let keep_versions = if flags & HISTORY_KEEP_VERSIONS != 0 { Some(read_u32(r)?) } else { None };
    let since = r.varint()?;
    let history =
        (flags != 0).then_some(TreeHistory { window: HistoryWindow { keep_for, keep_versions }, since });
    Ok((tree, history))
}

fn read_u32(r: &mut Reader<'_, '_>) -> Result<u32> {
    let v = r.varint()?;
    u32::try_from(v).map_err(|_| r.corrupt(format!("{v} does not fit 32 bits")))
}

fn read_schema(r: &mut Reader<'_, '_>) -> Result<Vec<u8>> {
    let ipc = r.len_bytes()?;
    if ipc.len() > SCHEMA_BYTES_MAX {
        return Err(r.corrupt("table schema too large"));
    }
    Ok(ipc.to_vec())
}

fn encode_kind(out: &mut Vec<u8>, kind: &TreeKindRecord) {
    match kind {
        TreeKindRecord::Keyspace => out.push(KIND_KEYSPACE),
        TreeKindRecord::Table { primary_key, schema_ipc } => {
            out.push(KIND_TABLE);
            put_columns(out, primary_key);
            varint::put_bytes(out, schema_ipc);
        }
        TreeKindRecord::Index { table, unique, building, columns, include } => {
            out.push(KIND_INDEX);
            varint::put_u64(out, u64::from(*table));
            let flags = if *unique { INDEX_UNIQUE } else { 0 } | if *building { INDEX_BUILDING } else { 0 };
            out.push(flags);
            put_columns(out, columns);
            put_columns(out, include);
        }
    }
}

fn decode_kind(r: &mut Reader<'_, '_>) -> Result<TreeKindRecord> {
    match r.u8()? {
        KIND_KEYSPACE => Ok(TreeKindRecord::Keyspace),
        KIND_TABLE => {
            let primary_key = read_columns(r)?;
            let schema_ipc = read_schema(r)?;
            Ok(TreeKindRecord::Table { primary_key, schema_ipc })
        }
        KIND_INDEX => {
            let table = read_tree(r)?;
            let flags = r.u8()?;
            if flags & !(INDEX_UNIQUE | INDEX_BUILDING) != 0 {
                return Err(r.corrupt(format!("unknown index flags {flags:#x}")));
            }
            let columns = read_columns(r)?;
            let include = read_columns(r)?;
            Ok(TreeKindRecord::Index {
                table,
                unique: flags & INDEX_UNIQUE != 0,
                building: flags & INDEX_BUILDING != 0,
                columns,
                include,
            })
        }
        kind => Err(r.corrupt(format!("unknown tree kind {kind}"))),
    }
}

impl VersionEdit {
    /// Encodes the edit as a MANIFEST record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let num = |out: &mut Vec<u8>, tag: u8, v: Option<u64>| {
            if let Some(v) = v {
                out.push(tag);
                varint::put_u64(out, v);
            }
        };
        num(&mut out, TAG_LOG_NUMBER, self.log_number);
        num(&mut out, TAG_NEXT_FILE, self.next_file_number);
        num(&mut out, TAG_LAST_SEQNO, self.last_seqno);
        for (tree, name) in &self.trees_created {
            out.push(TAG_TREE_CREATED);
            varint::put_u64(&mut out, u64::from(*tree));
            varint::put_bytes(&mut out, name.as_bytes());
        }
        for (tree, key, ipc) in &self.tree_schemas {
            out.push(TAG_TREE_SCHEMA);
            varint::put_u64(&mut out, u64::from(*tree));
            put_columns(&mut out, key);
            varint::put_bytes(&mut out, ipc);
        }
        for (tree, kind) in &self.tree_kinds {
            out.push(TAG_TREE_KIND);
            varint::put_u64(&mut out, u64::from(*tree));
            encode_kind(&mut out, kind);
        }
        for (tree, v) in &self.table_versions {
            out.push(TAG_TABLE_VERSION);
            varint::put_u64(&mut out, u64::from(*tree));
            varint::put_u64(&mut out, u64::from(v.version));
            put_columns(&mut out, &v.primary_key);
            varint::put_u64(&mut out, v.column_ids.len() as u64);
            for &id in &v.column_ids {
                varint::put_u64(&mut out, u64::from(id));
            }
            varint::put_bytes(&mut out, &v.schema_ipc);
            varint::put_u64(&mut out, v.defaults.len() as u64);
            for (c, ipc) in &v.defaults {
                varint::put_u64(&mut out, *c as u64);
                varint::put_bytes(&mut out, ipc);
            }
        }
        self.encode_history(&mut out);
        for tree in &self.trees_dropped {
            out.push(TAG_TREE_DROPPED);
            varint::put_u64(&mut out, u64::from(*tree));
        }
        for b in &self.blob_files_added {
            out.push(TAG_BLOB_FILE_ADDED);
            for v in [b.number, b.size, b.records, b.value_bytes] {
                varint::put_u64(&mut out, v);
            }
        }
        for (tree, level, f) in &self.files_added {
            out.push(if f.blob_refs.is_empty() { TAG_FILE_ADDED } else { TAG_FILE_ADDED_WITH_BLOBS });
            varint::put_u64(&mut out, u64::from(*tree));
            out.push(*level as u8);
            for v in [f.number, f.size, f.entries, f.min_seqno, f.max_seqno] {
                varint::put_u64(&mut out, v);
            }
            put_key(&mut out, &f.smallest);
            put_key(&mut out, &f.largest);
            if !f.blob_refs.is_empty() {
                varint::put_u64(&mut out, f.blob_refs.len() as u64);
                for &(blob, bytes) in &f.blob_refs {
                    varint::put_u64(&mut out, blob);
                    varint::put_u64(&mut out, bytes);
                }
            }
            if f.schema_version != 0 {
                out.push(TAG_FILE_SCHEMA);
                varint::put_u64(&mut out, u64::from(*tree));
                varint::put_u64(&mut out, f.number);
                varint::put_u64(&mut out, u64::from(f.schema_version));
            }
        }
        for (tree, level, number) in &self.files_deleted {
            out.push(TAG_FILE_DELETED);
            varint::put_u64(&mut out, u64::from(*tree));
            out.push(*level as u8);
            varint::put_u64(&mut out, *number);
        }
        self.encode_range_tombstones(&mut out);
        out
    }

    /// Tags 17 and 18: range tombstones added and dropped; tag 19: merge
    /// operators bound.
    fn encode_range_tombstones(&self, out: &mut Vec<u8>) {
        for (tree, ttl) in &self.tree_ttls {
            out.push(TAG_TREE_TTL);
            varint::put_u64(out, u64::from(*tree));
            match ttl {
                None => out.push(0),
                Some(t) => {
                    out.push(1);
                    varint::put_u64(out, t.ttl_ms);
                    varint::put_u64(out, t.since_seqno);
                    varint::put_u64(out, t.since_ms);
                    varint::put_u64(out, t.floor_min);
                }
            }
        }
        for (tree, name) in &self.tree_merge_operators {
            out.push(TAG_MERGE_OPERATOR);
            varint::put_u64(out, u64::from(*tree));
            varint::put_bytes(out, name.as_bytes());
        }
        for (tree, t) in &self.range_tombstones_added {
            out.push(TAG_RANGE_TOMBSTONE);
            varint::put_u64(out, u64::from(*tree));
            varint::put_u64(out, t.seqno);
            varint::put_bytes(out, &t.start);
            match &t.end {
                Some(end) => {
                    out.push(1);
                    varint::put_bytes(out, end);
                }
                None => out.push(0),
            }
        }
        for &(tree, seqno) in &self.range_tombstones_dropped {
            out.push(TAG_RANGE_TOMBSTONE_DROPPED);
            varint::put_u64(out, u64::from(tree));
            varint::put_u64(out, seqno);
        }
    }

    /// Tags 14, 15 and 16: history windows, commit times, schema version
    /// starts.
    fn encode_history(&self, out: &mut Vec<u8>) {
        for &(tree, version, seqno) in &self.table_version_starts {
            out.push(TAG_TABLE_VERSION_START);
            varint::put_u64(out, u64::from(tree));
            varint::put_u64(out, u64::from(version));
            varint::put_u64(out, seqno);
        }
        for (tree, history) in &self.tree_histories {
            out.push(TAG_TREE_HISTORY);
            varint::put_u64(out, u64::from(*tree));
            // `None` is written as no bound: set windows always have one.
            let window = history.map(|h| h.window).unwrap_or_default();
            let ms = window.keep_for.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let flags = if ms.is_some() { HISTORY_KEEP_FOR } else { 0 }
                | if window.keep_versions.is_some() { HISTORY_KEEP_VERSIONS } else { 0 };
            out.push(flags);
            if let Some(ms) = ms {
                varint::put_u64(out, ms);
            }
            if let Some(n) = window.keep_versions {
                varint::put_u64(out, u64::from(n));
            }
            varint::put_u64(out, history.map_or(0, |h| h.since));
        }
        if !self.commit_times.is_empty() || self.commit_times_cleared {
            out.push(TAG_COMMIT_TIMES);
            varint::put_u64(out, self.commit_times_after);
            varint::put_u64(out, self.commit_times.len() as u64);
            let (mut seqno, mut ms) = (0, 0);
            for &(s, t) in &self.commit_times {
                varint::put_u64(out, s - seqno);
                varint::put_u64(out, t - ms);
                (seqno, ms) = (s, t);
            }
        }
    }

    /// Decodes a MANIFEST record that starts at `offset` of `file`.
    pub fn decode(payload: &[u8], file: &Path, offset: u64) -> Result<VersionEdit> {
        let mut r = Reader::new(payload, file, offset);
        let mut e = VersionEdit::default();
        while !r.is_empty() {
            match r.u8()? {
                TAG_LOG_NUMBER => e.log_number = Some(r.varint()?),
                TAG_NEXT_FILE => e.next_file_number = Some(r.varint()?),
                TAG_LAST_SEQNO => e.last_seqno = Some(r.varint()?),
                TAG_TREE_CREATED => e.trees_created.push(read_tree_created(&mut r)?),
                TAG_TREE_DROPPED => e.trees_dropped.push(read_tree(&mut r)?),
                TAG_TREE_SCHEMA => {
                    let tree = read_tree(&mut r)?;
                    let key = read_columns(&mut r)?;
                    let ipc = read_schema(&mut r)?;
                    e.tree_schemas.push((tree, key, ipc));
                }
                TAG_TREE_KIND => {
                    let tree = read_tree(&mut r)?;
                    let kind = decode_kind(&mut r)?;
                    e.tree_kinds.push((tree, kind));
                }
                TAG_TABLE_VERSION => e.table_versions.push(read_table_version(&mut r)?),
                TAG_TREE_HISTORY => e.tree_histories.push(read_tree_history(&mut r)?),
                TAG_COMMIT_TIMES => read_commit_times(&mut r, &mut e)?,
                TAG_RANGE_TOMBSTONE => e.range_tombstones_added.push(read_range_tombstone(&mut r)?),
                TAG_MERGE_OPERATOR => e.tree_merge_operators.push(read_merge_operator(&mut r)?),
                TAG_TREE_TTL => e.tree_ttls.push(read_tree_ttl(&mut r)?),
                TAG_RANGE_TOMBSTONE_DROPPED => e.range_tombstones_dropped.push(read_tree_seqno(&mut r)?),
                TAG_TABLE_VERSION_START => {
                    let tree = read_tree(&mut r)?;
                    e.table_version_starts.push((tree, read_u32(&mut r)?, r.varint()?));
                }
                TAG_FILE_SCHEMA => {
                    let tree = read_tree(&mut r)?;
                    let number = r.varint()?;
                    let version = read_u32(&mut r)?;
                    let Some((_, _, meta)) =
                        e.files_added.iter_mut().find(|(t, _, f)| *t == tree && f.number == number)
                    else {
                        return Err(
                            r.corrupt(format!("schema version of file {number}, not added before it"))
                        );
                    };
                    meta.schema_version = version;
                }
                TAG_BLOB_FILE_ADDED => {
                    let (number, size) = (r.varint()?, r.varint()?);
                    let (records, value_bytes) = (r.varint()?, r.varint()?);
                    e.blob_files_added.push(BlobFileMeta { number, size, records, value_bytes });
                }
                tag @ (TAG_FILE_ADDED | TAG_FILE_ADDED_WITH_BLOBS) => {
                    let tree = read_tree(&mut r)?;
                    let level = read_level(&mut r)?;
                    let (number, size, entries) = (r.varint()?, r.varint()?, r.varint()?);
                    let (min_seqno, max_seqno) = (r.varint()?, r.varint()?);
                    let smallest = read_key(&mut r)?;
                    let largest = read_key(&mut r)?;
                    if smallest > largest || min_seqno > max_seqno {
                        return Err(r.corrupt(format!("file {number} has an inverted key or seqno range")));
                    }
                    let mut blob_refs = Vec::new();
                    if tag == TAG_FILE_ADDED_WITH_BLOBS {
                        let n = r.varint_len(BLOB_REFS_MAX)?;
                        for _ in 0..n {
                            blob_refs.push((r.varint()?, r.varint()?));
                        }
                        if n == 0 || !blob_refs.is_sorted_by(|a, b| a.0 < b.0) {
                            return Err(r.corrupt(format!("file {number} lists blob files out of order")));
                        }
                    }
                    let meta = FileMeta {
                        number,
                        size,
                        entries,
                        min_seqno,
                        max_seqno,
                        smallest,
                        largest,
                        blob_refs,
                        schema_version: 0,
                        reader: ReaderSlot::default(),
                        merged_reads: MergedReads::default(),
                    };
                    e.files_added.push((tree, level, meta));
                }
                TAG_FILE_DELETED => {
                    let tree = read_tree(&mut r)?;
                    let level = read_level(&mut r)?;
                    e.files_deleted.push((tree, level, r.varint()?));
                }
                tag => return Err(r.corrupt(format!("unknown version edit tag {tag}"))),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::Kind;

    #[expect(clippy::too_many_lines, reason = "one edit holding every kind of field")]
    fn sample() -> VersionEdit {
        let key = |s: &'static [u8], seq| InternalKey::new(Bytes::from_static(s), seq, Kind::Put);
        VersionEdit {
            log_number: Some(9),
            next_file_number: Some(12),
            last_seqno: Some(1000),
            trees_created: vec![(0, "default".into()), (3, "users".into())],
            trees_dropped: vec![2],
            tree_schemas: vec![(3, vec![0, 2], vec![1, 2, 3])],
            tree_kinds: vec![
                (0, TreeKindRecord::Keyspace),
                (4, TreeKindRecord::Table { primary_key: vec![1], schema_ipc: vec![9, 8] }),
                (
                    5,
                    TreeKindRecord::Index {
                        table: 4,
                        unique: true,
                        building: true,
                        columns: vec![0, 2],
                        include: vec![3],
                    },
                ),
                (
                    6,
                    TreeKindRecord::Index {
                        table: 4,
                        unique: false,
                        building: false,
                        columns: vec![2],
                        include: vec![],
                    },
                ),
            ],
            files_added: vec![
                (
                    0,
                    0,
                    FileMeta {
                        number: 10,
                        size: 4096,
                        entries: 7,
                        min_seqno: 1,
                        max_seqno: 9,
                        smallest: key(b"a", 3),
                        largest: key(b"z", 1),
                        blob_refs: Vec::new(),
                        schema_version: 0,
                        reader: ReaderSlot::default(),
                        merged_reads: MergedReads::default(),
                    },
                ),
                (
                    0,
                    2,
                    FileMeta {
                        number: 13,
                        size: 512,
                        entries: 2,
                        min_seqno: 4,
                        max_seqno: 5,
                        smallest: key(b"b", 5),
                        largest: key(b"c", 4),
                        blob_refs: vec![(11, 9000), (12, 1 << 33)],
                        schema_version: 3,
                        reader: ReaderSlot::default(),
                        merged_reads: MergedReads::default(),
                    },
                ),
            ],
            table_versions: vec![(
                4,
                TableVersionRecord {
                    version: 1,
                    primary_key: vec![0],
                    column_ids: vec![0, 2, 5],
                    schema_ipc: vec![7, 7],
                    defaults: vec![(2, vec![1, 2, 3])],
                },
            )],
            files_deleted: vec![(3, 1, 5)],
            blob_files_added: vec![
                BlobFileMeta { number: 11, size: 20_000, records: 2, value_bytes: 19_000 },
                BlobFileMeta { number: 12, size: 1 << 34, records: 9, value_bytes: 1 << 33 },
            ],
            tree_histories: vec![
                (
                    4,
                    Some(TreeHistory {
                        window: HistoryWindow {
                            keep_for: Some(std::time::Duration::from_secs(3600)),
                            keep_versions: Some(3),
                        },
                        since: 77,
                    }),
                ),
                (5, Some(TreeHistory { window: HistoryWindow::versions(9), since: 80 })),
                (6, None),
            ],
            commit_times: vec![(10, 1_795_000_000_000), (12, 1_795_000_000_000), (40, 1_795_000_000_009)],
            commit_times_after: 3,
            commit_times_cleared: false,
            table_version_starts: vec![(4, 1, 33)],
            range_tombstones_added: vec![
                (
                    4,
                    RangeTombstone {
                        start: Bytes::from_static(b"a"),
                        end: Some(Bytes::from_static(b"m")),
                        seqno: 41,
                    },
                ),
                (5, RangeTombstone { start: Bytes::new(), end: None, seqno: 42 }),
            ],
            range_tombstones_dropped: vec![(4, 30)],
            tree_merge_operators: vec![(5, "add_i64".to_string())],
            tree_ttls: vec![
                (
                    4,
                    Some(crate::catalog::TreeTtl {
                        ttl_ms: 60_000,
                        since_seqno: 90,
                        since_ms: 1_795_000_000_500,
                        floor_min: 70,
                    }),
                ),
                (6, None),
            ],
        }
    }

    /// History records and commit times, byte for byte (a format fixture).
    #[test]
    fn history_records_keep_their_bytes() {
        let edit = VersionEdit {
            tree_histories: vec![
                (
                    4,
                    Some(TreeHistory {
                        window: HistoryWindow::duration(std::time::Duration::from_millis(300)),
                        since: 5,
                    }),
                ),
                (6, None),
            ],
            commit_times: vec![(7, 1000), (9, 1000), (12, 1002)],
            commit_times_after: 2,
            ..VersionEdit::default()
        };
        let bytes = edit.encode();
        assert_eq!(
            bytes,
            vec![
                14, 4, 1, 0xac, 0x02, 5, // tree 4: keep for 300 ms since seqno 5
                14, 6, 0, 0, // tree 6: off
                15, 2, 3, 7, 0xe8, 0x07, 2, 0, 3, 2, // after 2: (7, 1000), (9, 1000), (12, 1002)
            ]
        );
        assert_eq!(VersionEdit::decode(&bytes, Path::new("M"), 0).expect("valid"), edit);
    }

    #[test]
    fn edits_round_trip() {
        let e = sample();
        let d = VersionEdit::decode(&e.encode(), Path::new("M"), 0).expect("valid");
        assert_eq!(d, e);
    }

    #[test]
    fn every_truncation_fails_or_decodes_a_prefix_without_panicking() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            let _ = VersionEdit::decode(&bytes[..cut], Path::new("M"), 0);
        }
        let mut bad = bytes.clone();
        bad[0] = 99;
        assert!(VersionEdit::decode(&bad, Path::new("M"), 0).is_err());
    }

    /// The catalog records of tree kinds, byte for byte (a format
    /// fixture): a keyspace, a table and an index of it. A change to these
    /// bytes is a change of the MANIFEST format.
    #[test]
    fn tree_kind_records_keep_their_bytes() {
        let edit = VersionEdit {
            trees_created: vec![(0, "default".into()), (4, "t".into()), (5, "by_name".into())],
            tree_kinds: vec![
                (0, TreeKindRecord::Keyspace),
                (4, TreeKindRecord::Table { primary_key: vec![0], schema_ipc: vec![0xAB, 0xCD] }),
                (
                    5,
                    TreeKindRecord::Index {
                        table: 4,
                        unique: true,
                        building: false,
                        columns: vec![1, 2],
                        include: vec![3],
                    },
                ),
            ],
            ..VersionEdit::default()
        };
        let hex = edit.encode().iter().fold(String::new(), |mut hex, b| {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
            hex
        });
        assert_eq!(hex, FIXTURE_HEX);
        assert_eq!(VersionEdit::decode(&edit.encode(), Path::new("M"), 0).expect("decodes"), edit);
    }

    const FIXTURE_HEX: &str =
        "04000764656661756c740404017404050762795f6e616d65090001090402010002abcd09050304010201020103";
}
