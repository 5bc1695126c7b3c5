//! `WriteBatch`: a group of puts and deletes applied atomically. Its
//! in-memory representation is exactly its WAL payload (`wal/format.rs`), so
//! committing it costs no re-encoding.

use std::path::Path;

use bytes::Bytes;

use super::format::{
    BATCH_HEADER_BYTES, ENTRY_DELETE, ENTRY_MERGE, ENTRY_PUT, ENTRY_RANGE_DELETE, ENTRY_ROWS_DELETE,
    ENTRY_ROWS_PUT,
};
use crate::codec::internal::{Kind, SeqNo};
use crate::codec::varint::{self, Reader};
use crate::error::Result;
use crate::ids::{DEFAULT_TREE, TreeId};

/// An atomic group of writes.
///
/// Key-value writes go to the key-value store and table rows to their
/// table ([`WriteBatch::put_table`]); there is no way to write raw bytes
/// into a table's tree, whose entries must be rows of its layout:
///
/// ```compile_fail
/// let mut batch = basalt::WriteBatch::new();
/// batch.put_raw(1, b"key", b"not a row");
/// ```
#[derive(Clone, Debug)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// Seqnos the batch consumes: one per key entry, one per Arrow row.
    count: u32,
    /// Pre-encoded rows of each Arrow entry, in entry order.
    encoded: Vec<EncodedRows>,
    /// The database whose tables the Arrow entries were encoded for (its
    /// tree ids and layouts): set by the first table write, checked by
    /// every later one and by the database the batch is written to.
    db: Option<u64>,
    /// What the engine checks of a batch before taking it, gathered as it
    /// is built so the check need not decode it: the longest key and value
    /// of its key-value entries, and the trees it writes (with whether as
    /// Arrow rows), consecutive repeats folded.
    kv_key_max: usize,
    kv_value_max: usize,
    trees: Vec<(TreeId, bool)>,
    /// Whether some entry is a range delete.
    has_range_deletes: bool,
    /// The longest bound of its range deletes.
    range_bound_max: usize,
    /// Whether some entry is a merge operand.
    has_merges: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

/// One decoded entry of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// Put or delete.
    pub kind: Kind,
    /// The tree written.
    pub tree: TreeId,
    /// The user key.
    pub key: &'a [u8],
    /// The value (empty for deletes); for Arrow rows, the Arrow IPC stream
    /// holding them.
    pub value: &'a [u8],
    /// 0 for a single key; otherwise the number of Arrow rows in `value`
    /// (upserted rows for a put, key rows for a delete), each taking a seqno.
    pub arrow_rows: u32,
    /// For a range delete (kind `Delete`, `key` its first key): where the
    /// range ends. `None` for every other entry.
    pub range_end: Option<RangeEnd<'a>>,
}

/// Where a range delete's range ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeEnd<'a> {
    /// Before this key (excluded).
    Before(&'a [u8]),
    /// At the end of the key space.
    Unbounded,
}

impl<'a> RangeEnd<'a> {
    /// The end key, `None` for no end.
    pub fn key(self) -> Option<&'a [u8]> {
        match self {
            RangeEnd::Before(k) => Some(k),
            RangeEnd::Unbounded => None,
        }
    }
}

impl BatchEntry<'_> {
    /// Seqnos this entry consumes.
    pub fn seqnos(&self) -> u64 {
        if self.arrow_rows == 0 { 1 } else { u64::from(self.arrow_rows) }
    }
}

/// Rows of a table write, encoded before the write is queued so that the
/// group-commit leader only appends and inserts.
#[derive(Debug, Clone, Default)]
pub(crate) struct EncodedRows {
    /// (user key, row bytes); row bytes are empty for deletes.
    pub rows: Vec<(Bytes, Bytes)>,
    /// The table schema version the rows were encoded under: the WAL keeps
    /// the caller's batch (column names included, for deletes too), which
    /// recovery checks against the current schema, so rows of an older
    /// version must never reach it (`None`: rows of no table schema).
    pub schema_version: Option<u32>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0u8; BATCH_HEADER_BYTES],
            count: 0,
            encoded: Vec::new(),
            db: None,
            kv_key_max: 0,
            kv_value_max: 0,
            trees: Vec::new(),
            has_range_deletes: false,
            range_bound_max: 0,
            has_merges: false,
        }
    }

    /// Sets `key` to `value` in the key-value store.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_raw(DEFAULT_TREE, key.as_ref(), value.as_ref());
    }

    /// Adds `operand` to `key` of the key-value store: the default
    /// keyspace's merge operator folds it onto the key's value when it is
    /// read (`Keyspace::set_merge_operator`; the write is refused without
    /// one).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.merge_raw(DEFAULT_TREE, key.as_ref(), operand.as_ref());
    }

    /// Adds a merge operand for `key` in `tree`.
    pub(crate) fn merge_raw(&mut self, tree: TreeId, key: &[u8], operand: &[u8]) {
        self.rep.push(ENTRY_MERGE);
        varint::put_u64(&mut self.rep, u64::from(tree));
        varint::put_bytes(&mut self.rep, key);
        varint::put_bytes(&mut self.rep, operand);
        self.count += 1;
        self.note_kv(tree, key.len(), operand.len());
        self.has_merges = true;
    }

    /// Whether the batch holds a merge operand.
    pub(crate) fn has_merges(&self) -> bool {
        self.has_merges
    }

    /// Deletes `key` from the key-value store.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.delete_raw(DEFAULT_TREE, key.as_ref());
    }

    /// Sets `key` to `value` in `tree`. Not public: a tree of a table takes
    /// only rows encoded with its layout (`put_rows`).
    pub(crate) fn put_raw(&mut self, tree: TreeId, key: &[u8], value: &[u8]) {
        self.rep.push(ENTRY_PUT);
        varint::put_u64(&mut self.rep, u64::from(tree));
        varint::put_bytes(&mut self.rep, key);
        varint::put_bytes(&mut self.rep, value);
        self.count += 1;
        self.note_kv(tree, key.len(), value.len());
    }

    fn note_kv(&mut self, tree: TreeId, key: usize, value: usize) {
        self.kv_key_max = self.kv_key_max.max(key);
        self.kv_value_max = self.kv_value_max.max(value);
        self.note_tree(tree, false);
    }

    fn note_tree(&mut self, tree: TreeId, arrow: bool) {
        if self.trees.last() != Some(&(tree, arrow)) {
            self.trees.push((tree, arrow));
        }
    }

    /// The longest key and value of the key-value entries.
    pub(crate) fn kv_lengths_max(&self) -> (usize, usize) {
        (self.kv_key_max, self.kv_value_max)
    }

    /// The trees written, each with whether as Arrow rows (repeats may
    /// remain, not in a row).
    pub(crate) fn trees(&self) -> &[(TreeId, bool)] {
        &self.trees
    }

    /// Deletes `key` from `tree` (not public, as `put_raw`).
    pub(crate) fn delete_raw(&mut self, tree: TreeId, key: &[u8]) {
        self.rep.push(ENTRY_DELETE);
        varint::put_u64(&mut self.rep, u64::from(tree));
        varint::put_bytes(&mut self.rep, key);
        self.count += 1;
        self.note_kv(tree, key.len(), 0);
    }

    /// Deletes every key of `range` from the key-value store: one entry
    /// (and one seqno) however many keys the range holds. An empty range
    /// adds nothing.
    pub fn delete_range<K: AsRef<[u8]>>(&mut self, range: impl std::ops::RangeBounds<K>) {
        let (start, end) = crate::range_del::bytes_range(&range);
        self.delete_range_raw(DEFAULT_TREE, &start, end.as_deref());
    }

    /// Deletes every key from `start` (included) to `end` (excluded; `None`:
    /// no end) from `tree`; nothing when the range holds no key.
    pub(crate) fn delete_range_raw(&mut self, tree: TreeId, start: &[u8], end: Option<&[u8]>) {
        if !crate::range_del::is_nonempty_range(start, end) {
            return;
        }
        self.rep.push(ENTRY_RANGE_DELETE);
        varint::put_u64(&mut self.rep, u64::from(tree));
        varint::put_bytes(&mut self.rep, start);
        match end {
            Some(end) => {
                self.rep.push(1);
                varint::put_bytes(&mut self.rep, end);
            }
            None => self.rep.push(0),
        }
        self.count += 1;
        // A bound may be a key and one byte more (the key right after an
        // included end); checked against the key limit so. Noted as a write
        // of the tree's keys, which a table's tree takes too (its rows').
        self.range_bound_max = self.range_bound_max.max(start.len()).max(end.map_or(0, <[u8]>::len));
        self.note_tree(tree, true);
        self.has_range_deletes = true;
    }

    /// The longest bound of the batch's range deletes (0: none).
    pub(crate) fn range_bound_max(&self) -> usize {
        self.range_bound_max
    }

    /// Whether the batch holds a range delete.
    pub(crate) fn has_range_deletes(&self) -> bool {
        self.has_range_deletes
    }

    /// The database this batch's table rows belong to, if it has any.
    pub(crate) fn database(&self) -> Option<u64> {
        self.db
    }

    /// Binds the batch to database `db` for a table write; false (and
    /// nothing changed) when it already holds rows of another database.
    pub(crate) fn bind_database(&mut self, db: u64) -> bool {
        *self.db.get_or_insert(db) == db
    }

    /// Appends every entry of `other` after this batch's own, in order (a
    /// transaction gathers its writes this way, each checked alone first).
    /// False, and nothing appended, when the two are bound to different
    /// databases or would hold more than 2^32 - 1 seqnos together.
    pub(crate) fn append(&mut self, other: WriteBatch) -> bool {
        if other.db.is_some_and(|db| self.db.is_some_and(|mine| mine != db))
            || self.count.checked_add(other.count).is_none()
        {
            return false;
        }
        if let Some(db) = other.db {
            self.bind_database(db);
        }
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_BYTES..]);
        self.count += other.count;
        self.encoded.extend(other.encoded);
        self.kv_key_max = self.kv_key_max.max(other.kv_key_max);
        self.kv_value_max = self.kv_value_max.max(other.kv_value_max);
        self.has_range_deletes |= other.has_range_deletes;
        self.range_bound_max = self.range_bound_max.max(other.range_bound_max);
        self.has_merges |= other.has_merges;
        for (tree, arrow) in other.trees {
            self.note_tree(tree, arrow);
        }
        true
    }

    /// Appends Arrow rows of a table: `ipc` is the Arrow IPC stream the WAL
    /// keeps; `rows` the pre-encoded (key, row bytes) of each row.
    pub(crate) fn put_rows(&mut self, tree: TreeId, ipc: &[u8], rows: EncodedRows, delete: bool) {
        self.rep.push(if delete { ENTRY_ROWS_DELETE } else { ENTRY_ROWS_PUT });
        varint::put_u64(&mut self.rep, u64::from(tree));
        varint::put_u64(&mut self.rep, rows.rows.len() as u64);
        varint::put_bytes(&mut self.rep, ipc);
        self.count += rows.rows.len() as u32;
        self.encoded.push(rows);
        self.note_tree(tree, true);
    }

    /// The table writes of the batch, in order: each Arrow entry's tree,
    /// kind and pre-encoded rows.
    pub(crate) fn table_writes(&self) -> impl Iterator<Item = (TreeId, Kind, &EncodedRows)> {
        self.entries().filter(|e| e.arrow_rows > 0).zip(&self.encoded).map(|(e, rows)| (e.tree, e.kind, rows))
    }

    /// Number of seqnos the batch consumes (entries, counting each Arrow row).
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch holds no entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.rep.truncate(BATCH_HEADER_BYTES);
        self.count = 0;
        self.encoded.clear();
        self.db = None;
        self.kv_key_max = 0;
        self.kv_value_max = 0;
        self.trees.clear();
        self.has_range_deletes = false;
        self.range_bound_max = 0;
        self.has_merges = false;
    }

    /// Size of the encoded batch in bytes.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    /// Stamps the first seqno and count into the header and returns the
    /// WAL payload.
    pub(crate) fn seal(&mut self, first_seqno: SeqNo) {
        self.rep[0..8].copy_from_slice(&first_seqno.to_le_bytes());
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// The encoded bytes (after [`WriteBatch::seal`]).
    pub(crate) fn sealed_bytes(&self) -> &[u8] {
        &self.rep
    }

    /// The pre-encoded rows of the Arrow entries, in entry order.
    pub(crate) fn encoded_rows(&self) -> &[EncodedRows] {
        &self.encoded
    }

    /// Iterates over the entries of this (well-formed) batch.
    pub fn entries(&self) -> impl Iterator<Item = BatchEntry<'_>> {
        let mut reader = Reader::new(&self.rep[BATCH_HEADER_BYTES..], Path::new(""), 0);
        std::iter::from_fn(move || if reader.is_empty() { None } else { next_entry(&mut reader).ok() })
    }
}

/// A decoded WAL payload: first seqno and the entries, validated.
#[derive(Debug)]
pub struct DecodedBatch<'a> {
    /// Seqno of the first entry.
    pub first_seqno: SeqNo,
    /// The entries, in order.
    pub entries: Vec<BatchEntry<'a>>,
}

#[inline]
fn next_entry<'a>(r: &mut Reader<'a, '_>) -> Result<BatchEntry<'a>> {
    let kind_byte = r.u8()?;
    let tree = r.varint()?;
    let tree = TreeId::try_from(tree).map_err(|_| r.corrupt(format!("tree id {tree} out of range")))?;
    if matches!(kind_byte, ENTRY_ROWS_PUT | ENTRY_ROWS_DELETE) {
        let rows = r.varint()?;
        let rows =
            u32::try_from(rows).ok().filter(|&n| n > 0).ok_or_else(|| r.corrupt(format!("{rows} rows")))?;
        let ipc = r.len_bytes()?;
        let kind = if kind_byte == ENTRY_ROWS_PUT { Kind::Put } else { Kind::Delete };
        return Ok(BatchEntry { kind, tree, key: &[], value: ipc, arrow_rows: rows, range_end: None });
    }
    if kind_byte == ENTRY_RANGE_DELETE {
        let start = r.len_bytes()?;
        let end = match r.u8()? {
            0 => RangeEnd::Unbounded,
            1 => RangeEnd::Before(r.len_bytes()?),
            flag => return Err(r.corrupt(format!("range delete end flag {flag}"))),
        };
        if !crate::range_del::is_nonempty_range(start, end.key()) {
            return Err(r.corrupt("a range delete of an empty range".to_string()));
        }
        return Ok(BatchEntry {
            kind: Kind::Delete,
            tree,
            key: start,
            value: &[],
            arrow_rows: 0,
            range_end: Some(end),
        });
    }
    let kind = match kind_byte {
        ENTRY_PUT => Kind::Put,
        ENTRY_DELETE => Kind::Delete,
        ENTRY_MERGE => Kind::Merge,
        _ => return Err(r.corrupt(format!("unknown entry kind {kind_byte}"))),
    };
    let key = r.len_bytes()?;
    let value = if kind == Kind::Delete { &[] } else { r.len_bytes()? };
    Ok(BatchEntry { kind, tree, key, value, arrow_rows: 0, range_end: None })
}

/// Decodes and validates a WAL payload that starts at `offset` of `file`.
pub fn decode<'a>(payload: &'a [u8], file: &Path, offset: u64) -> Result<DecodedBatch<'a>> {
    let mut r = Reader::new(payload, file, offset);
    let first_seqno = r.u64_le()?;
    let count = r.u32_le()?;
    // The entries vector grows with the entries read, each at least three
    // bytes, so the header's count bounds no allocation and is checked only
    // against the entries found. (It cannot be checked against the payload's
    // size: an Arrow entry's rows can take less than a byte each, as a
    // Boolean key column does.)
    let mut entries = Vec::new();
    let mut seqnos = 0u64;
    while !r.is_empty() {
        let e = next_entry(&mut r)?;
        seqnos += e.seqnos();
        if seqnos > u64::from(count) {
            return Err(r.corrupt(format!("batch holds more than its {count} entries")));
        }
        entries.push(e);
    }
    if seqnos != u64::from(count) {
        return Err(r.corrupt(format!("batch holds {seqnos} entries, its header says {count}")));
    }
    Ok(DecodedBatch { first_seqno, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_round_trips_through_its_payload() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put_raw(7, b"c", b"");
        b.seal(42);
        let payload = b.sealed_bytes().to_vec();
        let d = decode(&payload, Path::new("w"), 0).expect("valid");
        assert_eq!(d.first_seqno, 42);
        assert_eq!(d.entries.len(), 3);
        assert_eq!(
            d.entries[1],
            BatchEntry { kind: Kind::Delete, tree: 0, key: b"b", value: b"", arrow_rows: 0, range_end: None }
        );
        assert_eq!(d.entries[2].tree, 7);
        assert_eq!(b.entries().count(), 3);
    }

    #[test]
    fn range_deletes_round_trip_and_empty_ranges_add_nothing() {
        let mut b = WriteBatch::new();
        b.delete_range(&b"b"[..]..&b"d"[..]);
        b.delete_range(&b"x"[..]..);
        b.delete_range(&b"d"[..]..&b"d"[..]);
        b.delete_range(&b"d"[..]..=&b"d"[..]);
        b.seal(7);
        let payload = b.sealed_bytes().to_vec();
        let d = decode(&payload, Path::new("w"), 0).expect("valid");
        let ranges: Vec<_> = d.entries.iter().map(|e| (e.key, e.range_end)).collect();
        assert_eq!(
            ranges,
            vec![
                (&b"b"[..], Some(RangeEnd::Before(b"d"))),
                (&b"x"[..], Some(RangeEnd::Unbounded)),
                (&b"d"[..], Some(RangeEnd::Before(b"d\0"))),
            ]
        );
        assert_eq!(b.len(), 3);
        assert!(b.has_range_deletes());
        for cut in 0..payload.len() {
            assert!(decode(&payload[..cut], Path::new("w"), 0).is_err());
        }
    }

    #[test]
    fn truncated_or_padded_payloads_are_corrupt() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.seal(1);
        let payload = b.sealed_bytes().to_vec();
        for cut in 0..payload.len() {
            assert!(decode(&payload[..cut], Path::new("w"), 0).is_err());
        }
        let mut padded = payload.clone();
        padded.push(0);
        assert!(decode(&padded, Path::new("w"), 0).is_err());
    }
}
