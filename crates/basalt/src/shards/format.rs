//! The bytes of a sharded store's map (`SHARDS`); `docs/format.md`,
//! "Shard map", draws them.
//!
//! ```text
//! magic "BSHARDS\n" (8) | format u32 LE | body length u32 LE | body | masked crc32c(body) u32 LE
//! body := varint map version | bytes table
//!         | bytes key schema (the key columns as an Arrow IPC schema stream)
//!         | varint shards, each: bytes directory, varint parts, bytes lower bound
//!                              [format 2: bytes node (empty: none)]
//! ```
//!
//! `bytes` is a varint length and the bytes. A shard's lower bound is a
//! key tuple of `parts` leading key columns in the key codec's encoding
//! (the engine's order); the first shard has none (`parts` 0, no bytes).

use std::path::Path;

use super::{Shard, ShardMap};
use crate::codec::key::{self, KeyType};
use crate::codec::varint::{Reader, put_bytes, put_u64};
use crate::error::{Error, Result};
use crate::log::format::mask_crc;
use crate::row::layout::key_type_of;
use crate::row::{schema_from_ipc, schema_to_ipc};

/// The map's file name in the store's directory.
pub const FILE: &str = "SHARDS";

/// The first eight bytes of the file.
pub const MAGIC: &[u8; 8] = b"BSHARDS\n";

/// The layout this code writes. Format 2 names a node per shard (where a
/// scheduler runs the shard's tasks); format 1 files, which name none, are
/// read as they were.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest layout this code reads.
const FORMAT_VERSION_MIN: u32 = 1;

/// Magic, format and body length.
const HEADER_BYTES: usize = 16;

/// Most key columns, shards and bytes of a name a reader accepts: bounds
/// the work a damaged count could ask for.
const COLUMNS_MAX: usize = 64;
const SHARDS_MAX: usize = 1 << 20;
const NAME_BYTES_MAX: usize = 4096;

/// The file's bytes.
pub(super) fn encode(map: &ShardMap) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    put_u64(&mut body, map.version);
    put_bytes(&mut body, map.table.as_bytes());
    put_bytes(&mut body, &schema_to_ipc(&map.key)?);
    put_u64(&mut body, map.shards.len() as u64);
    for shard in &map.shards {
        put_bytes(&mut body, shard.path.as_bytes());
        let lower = shard.lower.as_deref().unwrap_or_default();
        put_u64(&mut body, lower.len() as u64);
        let values: Vec<_> = lower.iter().map(crate::codec::key::OwnedKeyValue::as_value).collect();
        put_bytes(&mut body, &key::encode(&values));
        put_bytes(&mut body, shard.node.as_deref().unwrap_or_default().as_bytes());
    }
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&mask_crc(crc32c::crc32c(&body)).to_le_bytes());
    Ok(out)
}

/// The map in `data`, the bytes of `file`; any damage is
/// [`Error::Corruption`] naming the file and the offset.
pub(super) fn decode(data: &[u8], file: &Path) -> Result<ShardMap> {
    let mut r = Reader::new(data, file, 0);
    if r.bytes(MAGIC.len())? != MAGIC {
        return Err(Error::corruption(file, 0, "not a shard map (bad magic)"));
    }
    let format = r.u32_le()?;
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format) {
        return Err(Error::corruption(file, 8, format!("unknown shard map format {format}")));
    }
    let len = r.u32_le()? as usize;
    if r.remaining() != len.saturating_add(4) {
        return Err(r.corrupt(format!("body of {len} bytes and its checksum do not fill the file")));
    }
    let body = r.bytes(len)?;
    let stored = r.u32_le()?;
    if mask_crc(crc32c::crc32c(body)) != stored {
        return Err(Error::corruption(file, HEADER_BYTES as u64, "shard map checksum mismatch"));
    }
    let mut r = Reader::new(body, file, HEADER_BYTES as u64);
    let version = r.varint()?;
    let table = text(&mut r)?;
    let at = HEADER_BYTES as u64 + r.position() as u64;
    let key = schema_from_ipc(r.len_bytes()?)
        .map_err(|e| Error::corruption(file, at, format!("key schema: {}", e.reason())))?;
    let key_types = key
        .fields()
        .iter()
        .map(|f| key_type_of(f.data_type()))
        .collect::<Option<Vec<KeyType>>>()
        .filter(|t| (1..=COLUMNS_MAX).contains(&t.len()))
        .ok_or_else(|| Error::corruption(file, at, "key schema: no key columns, or a type no key has"))?;
    let count = r.varint_len(SHARDS_MAX)?;
    let mut shards = Vec::with_capacity(count);
    for _ in 0..count {
        let path = text(&mut r)?;
        let parts = r.varint_len(key_types.len())?;
        let at = r.position();
        let bytes = r.len_bytes()?;
        let lower = if parts == 0 && bytes.is_empty() {
            None
        } else {
            let types = &key_types[..parts];
            let values = key::decode(bytes, types).map_err(|e| {
                Error::corruption(
                    file,
                    HEADER_BYTES as u64 + at as u64,
                    format!("lower bound: {}", e.reason()),
                )
            })?;
            Some(values)
        };
        let node = if format >= 2 { Some(text(&mut r)?).filter(|n| !n.is_empty()) } else { None };
        shards.push(Shard { path, lower, node });
    }
    if !r.is_empty() {
        return Err(r.corrupt("trailing bytes after the shards"));
    }
    let map = ShardMap { version, table, key, key_types, shards };
    map.check().map_err(|what| Error::corruption(file, HEADER_BYTES as u64, what))?;
    Ok(map)
}

/// A length-prefixed UTF-8 name.
fn text(r: &mut Reader<'_, '_>) -> Result<String> {
    let len = r.varint_len(NAME_BYTES_MAX)?;
    let bytes = r.bytes(len)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| r.corrupt("a name that is not UTF-8"))
}
