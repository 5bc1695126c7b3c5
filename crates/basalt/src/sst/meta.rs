//! The metaindex (which meta blocks a file has, and where) and the
//! properties block (what an SST holds, for the version set and for checks
//! against the rest of the file).

use std::path::Path;

use bytes::Bytes;

use super::format::{
    BlockHandle, FORMAT_VERSION, FORMAT_VERSION_DISTINCT_KEYS, FORMAT_VERSION_FILE_NUMBER,
    FORMAT_VERSION_MIN, FORMAT_VERSION_PREFIXES, FORMAT_VERSION_SCHEMA, METAINDEX_ENTRIES_MAX,
    METAINDEX_ENTRY_BYTES, METAINDEX_HEADER_BYTES, PROPERTIES_FIXED_BYTES,
};
use crate::codec::internal::{InternalKey, SeqNo, compare, unpack_trailer};
use crate::codec::varint::Reader;
use crate::error::{Error, Result};

/// One metaindex entry: a kind (`META_*` in `format`) and where that block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaEntry {
    /// Which meta block this is.
    pub kind: u8,
    /// Where it is.
    pub handle: BlockHandle,
}

/// Encodes the metaindex block: entry count u32 LE, then 13-byte entries.
pub fn encode_metaindex(entries: &[MetaEntry]) -> Vec<u8> {
    debug_assert!(entries.len() <= METAINDEX_ENTRIES_MAX);
    let mut out = Vec::with_capacity(METAINDEX_HEADER_BYTES + entries.len() * METAINDEX_ENTRY_BYTES);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.push(e.kind);
        e.handle.encode_to(&mut out);
    }
    out
}

/// Decodes the metaindex block read at `offset` of `file`. Kinds this
/// version does not know are kept (the reader ignores them); a kind listed
/// twice is corruption.
pub fn decode_metaindex(data: &[u8], file: &Path, offset: u64) -> Result<Vec<MetaEntry>> {
    let mut r = Reader::new(data, file, offset);
    let count = r.u32_le()? as usize;
    if count > METAINDEX_ENTRIES_MAX || count * METAINDEX_ENTRY_BYTES != r.remaining() {
        return Err(Error::corruption(
            file,
            offset,
            format!("metaindex count {count} does not match its size"),
        ));
    }
    let mut entries: Vec<MetaEntry> = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = r.u8()?;
        let handle = BlockHandle::read(&mut r)?;
        if entries.iter().any(|e| e.kind == kind) {
            return Err(r.corrupt(format!("metaindex lists kind {kind} twice")));
        }
        entries.push(MetaEntry { kind, handle });
    }
    Ok(entries)
}

/// What an SST holds. Written once by the writer; checked against the index
/// when the file is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Properties {
    /// Format version the file was written with.
    pub format_version: u32,
    /// The tree (table or index) whose entries the file holds.
    pub tree_id: u32,
    /// The file's number, which names it (`NNNNNN.sst`); `None` in files of
    /// versions 1 and 2, which did not record it.
    pub file_number: Option<u64>,
    /// Entries, deletes included.
    pub entries: u64,
    /// Entries of kind `Delete`.
    pub deletions: u64,
    /// User keys, each counted once however many versions the file holds
    /// of it; `None` in files before version 5, which did not record it.
    pub distinct_keys: Option<u64>,
    /// Key prefixes (each leading run of an index entry's indexed values)
    /// the filter holds besides the whole keys; `None` in files before
    /// version 7. `Some(0)`: the filter answers for whole keys only.
    pub prefixes: Option<u64>,
    /// The table schema version the rows were written under (0 for a
    /// key-value or index tree); `None` in files before version 9.
    pub schema_version: Option<u32>,
    /// The fingerprint of the rows' table layout
    /// (`TableLayout::fingerprint`; 0 for a key-value or index tree);
    /// `None` in files before version 9.
    pub layout_fingerprint: Option<u64>,
    /// Data blocks.
    pub data_blocks: u64,
    /// Sum of user key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Smallest seqno of any entry.
    pub min_seqno: SeqNo,
    /// Largest seqno of any entry.
    pub max_seqno: SeqNo,
    /// First entry's internal key.
    pub smallest: InternalKey,
    /// Last entry's internal key.
    pub largest: InternalKey,
}

impl Properties {
    /// Encodes the fixed 80-byte part, the file number (u64 LE, from
    /// version 3), the count of distinct user keys (u64 LE, from version
    /// 5), the count of key prefixes in the filter (u64 LE, from version
    /// 7), the schema version of the rows and their layout's fingerprint
    /// (u64 LE each, from version 9), then
    /// the smallest and largest user keys, each as length u32 LE
    /// and bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            PROPERTIES_FIXED_BYTES + 24 + self.smallest.user_key.len() + self.largest.user_key.len(),
        );
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&self.tree_id.to_le_bytes());
        for v in [
            self.entries,
            self.deletions,
            self.data_blocks,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.min_seqno,
            self.max_seqno,
            self.smallest.trailer,
            self.largest.trailer,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        debug_assert_eq!(out.len(), PROPERTIES_FIXED_BYTES);
        let schema_version = self.schema_version.map(u64::from);
        let fields =
            [self.file_number, self.distinct_keys, self.prefixes, schema_version, self.layout_fingerprint];
        for n in fields.into_iter().flatten() {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for key in [&self.smallest.user_key, &self.largest.user_key] {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
        }
        out
    }

    /// Decodes and checks the properties block read at `offset` of `file`.
    pub fn decode(data: &[u8], file: &Path, offset: u64) -> Result<Properties> {
        let mut r = Reader::new(data, file, offset);
        let format_version = r.u32_le()?;
        let tree_id = r.u32_le()?;
        let mut fixed = [0u64; 9];
        for v in &mut fixed {
            *v = r.u64_le()?;
        }
        let [
            entries,
            deletions,
            data_blocks,
            raw_key_bytes,
            raw_value_bytes,
            min_seqno,
            max_seqno,
            t_small,
            t_large,
        ] = fixed;
        let file_number = if format_version >= FORMAT_VERSION_FILE_NUMBER { Some(r.u64_le()?) } else { None };
        let distinct_keys =
            if format_version >= FORMAT_VERSION_DISTINCT_KEYS { Some(r.u64_le()?) } else { None };
        let prefixes = if format_version >= FORMAT_VERSION_PREFIXES { Some(r.u64_le()?) } else { None };
        let (schema_version, layout_fingerprint) = if format_version >= FORMAT_VERSION_SCHEMA {
            let v = r.u64_le()?;
            let version =
                u32::try_from(v).map_err(|_| r.corrupt(format!("schema version {v} out of range")))?;
            (Some(version), Some(r.u64_le()?))
        } else {
            (None, None)
        };
        let mut key = || -> Result<Bytes> {
            let len = r.u32_le()? as usize;
            Ok(Bytes::copy_from_slice(r.bytes(len)?))
        };
        let smallest = InternalKey { user_key: key()?, trailer: t_small };
        let largest = InternalKey { user_key: key()?, trailer: t_large };
        if !r.is_empty() {
            return Err(r.corrupt("properties block has trailing bytes"));
        }
        let props = Properties {
            format_version,
            tree_id,
            file_number,
            entries,
            deletions,
            distinct_keys,
            prefixes,
            schema_version,
            layout_fingerprint,
            data_blocks,
            raw_key_bytes,
            raw_value_bytes,
            min_seqno,
            max_seqno,
            smallest,
            largest,
        };
        props.check().map_err(|what| Error::corruption(file, offset, format!("properties: {what}")))?;
        Ok(props)
    }

    /// Relations every properties block satisfies.
    fn check(&self) -> std::result::Result<(), &'static str> {
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&self.format_version) {
            return Err("unknown format version");
        }
        if self.file_number.is_some() != (self.format_version >= FORMAT_VERSION_FILE_NUMBER) {
            return Err("file number present in a version without it, or missing");
        }
        if self.entries == 0 || self.data_blocks == 0 || self.data_blocks > self.entries {
            return Err("impossible entry or block count");
        }
        if self.deletions > self.entries || self.min_seqno > self.max_seqno {
            return Err("impossible deletion count or seqno range");
        }
        if self.distinct_keys.is_some() != (self.format_version >= FORMAT_VERSION_DISTINCT_KEYS) {
            return Err("distinct key count present in a version without it, or missing");
        }
        if self.prefixes.is_some() != (self.format_version >= FORMAT_VERSION_PREFIXES) {
            return Err("prefix count present in a version without it, or missing");
        }
        if self.schema_version.is_some() != (self.format_version >= FORMAT_VERSION_SCHEMA)
            || self.layout_fingerprint.is_some() != self.schema_version.is_some()
        {
            return Err("schema version present in a version without it, or missing");
        }
        if self.distinct_keys.is_some_and(|d| d == 0 || d > self.entries) {
            return Err("impossible distinct key count");
        }
        let (Some((s_seq, _)), Some((l_seq, _))) =
            (unpack_trailer(self.smallest.trailer), unpack_trailer(self.largest.trailer))
        else {
            return Err("bounds have an unknown kind");
        };
        let in_range = |s: SeqNo| (self.min_seqno..=self.max_seqno).contains(&s);
        if !in_range(s_seq) || !in_range(l_seq) {
            return Err("bounds lie outside the seqno range");
        }
        let order = compare(
            &self.smallest.user_key,
            self.smallest.trailer,
            &self.largest.user_key,
            self.largest.trailer,
        );
        if order.is_gt() || (order.is_eq() && self.entries != 1) {
            return Err("smallest key is not below largest");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::Kind;

    fn sample() -> Properties {
        Properties {
            format_version: FORMAT_VERSION,
            tree_id: 7,
            file_number: Some(12),
            entries: 10,
            deletions: 2,
            distinct_keys: Some(6),
            prefixes: Some(4),
            schema_version: Some(2),
            layout_fingerprint: Some(0x1234_5678_9abc_def0),
            data_blocks: 3,
            raw_key_bytes: 40,
            raw_value_bytes: 400,
            min_seqno: 5,
            max_seqno: 50,
            smallest: InternalKey::new(Bytes::from_static(b"apple"), 50, Kind::Put),
            largest: InternalKey::new(Bytes::from_static(b"pear"), 5, Kind::Delete),
        }
    }

    #[test]
    fn properties_round_trip() {
        let p = sample();
        let bytes = p.encode();
        assert_eq!(bytes.len(), PROPERTIES_FIXED_BYTES + 8 + 8 + 8 + 8 + 8 + 8 + 5 + 4);
        assert_eq!(Properties::decode(&bytes, Path::new("p"), 0).expect("decodes"), p);
    }

    #[test]
    fn inconsistent_properties_are_corruption() {
        let mut bad = vec![];
        let mut p = sample();
        p.deletions = 11;
        bad.push(p.encode());
        let mut p = sample();
        p.min_seqno = 51;
        bad.push(p.encode());
        for distinct in [Some(0), Some(11), None] {
            let mut p = sample();
            p.distinct_keys = distinct;
            bad.push(p.encode());
        }
        let mut p = sample();
        std::mem::swap(&mut p.smallest, &mut p.largest);
        bad.push(p.encode());
        let mut p = sample().encode();
        p.push(0);
        bad.push(p);
        let p = sample().encode();
        bad.push(p[..p.len() - 1].to_vec());
        for b in bad {
            assert!(Properties::decode(&b, Path::new("p"), 3).expect_err("bad").is_corruption());
        }
    }

    #[test]
    fn metaindex_round_trips_and_rejects_duplicates() {
        let entries = vec![
            MetaEntry { kind: 1, handle: BlockHandle { offset: 10, size: 20 } },
            MetaEntry { kind: 9, handle: BlockHandle { offset: 35, size: 1 } },
        ];
        let bytes = encode_metaindex(&entries);
        assert_eq!(decode_metaindex(&bytes, Path::new("m"), 0).expect("decodes"), entries);
        let dup = encode_metaindex(&[entries[0], entries[0]]);
        assert!(decode_metaindex(&dup, Path::new("m"), 0).is_err());
        assert!(decode_metaindex(&bytes[..bytes.len() - 1], Path::new("m"), 0).is_err());
        assert!(decode_metaindex(&[], Path::new("m"), 0).is_err());
    }
}
