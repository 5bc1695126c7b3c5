//! The bodies of the fuzz targets, one function per target. Each takes
//! arbitrary bytes and must return without panicking, hanging or
//! allocating without bound; decoders must also keep their own promises
//! (what decodes re-encodes to the same bytes, readers stay in bounds).
//!
//! The cargo-fuzz crate in `fuzz/` calls these under libFuzzer; the stable
//! test `tests/fuzz_smoke.rs` replays the committed corpora and seeded
//! mutations of them, so every CI run exercises the targets even where no
//! nightly toolchain is installed. [`seeds`] writes the seed corpora.

mod cells;
mod input;
mod ops;
mod ops_seeds;
mod table_ops;

use std::path::Path;

use basalt::KeyValue;
use basalt::inspect::{self, KeyType, ManifestEdit, Sst, read_log};
use basalt::testing::MemFs;
pub use ops::ops;

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Source files whose panics the engine catches by design and reports as
/// `Error::Corruption`: arrow-ipc panics on some malformed streams.
pub const CAUGHT_PANIC_SOURCES: [&str; 1] = ["/arrow-ipc-"];

/// Makes the panic hook pass over panics the engine catches by design
/// (see [`CAUGHT_PANIC_SOURCES`]): libFuzzer's hook aborts on every panic,
/// even a caught one. Every other panic goes to the hook installed before.
/// Each target calls this; only the first call installs it.
pub fn skip_caught_panics_in_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map(|l| l.file().to_string()).unwrap_or_default();
            if !CAUGHT_PANIC_SOURCES.iter().any(|s| file.contains(s)) {
                previous(info);
            }
        }));
    });
}

/// The targets by name, as `fuzz/fuzz_targets/<name>.rs` and the corpus
/// folders `fuzz/corpus/<name>/` name them.
pub const TARGETS: [(&str, Target); 6] = [
    ("wal", wal),
    ("sst", sst),
    ("manifest", manifest),
    ("key_codec", key_codec),
    ("arrow_schema", arrow_schema),
    ("ops", ops),
];

/// An input starting with this byte has its checksums made valid before
/// it is read: log records are framed from the rest (see [`framed_log`]),
/// an SST gets every checksum it reaches recomputed (see
/// [`fix_sst_checksums`]). Without it the fuzzer would rarely get past a
/// CRC to the decoders behind it.
pub const FIX_CHECKSUMS: u8 = 0xC5;

/// A log file of records holding pieces of `data`, each followed by a seal
/// record: every 2 bytes give the next payload's length (mod 4096), the
/// payload follows (empty ones are skipped: a record is never empty).
pub fn framed_log(data: &[u8]) -> Vec<u8> {
    let mut payloads = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]) % 4096).min(rest.len() - 2);
        payloads.push(&rest[2..2 + n]);
        rest = &rest[2 + n..];
    }
    inspect::frame_log(payloads)
}

/// `data` as a log file: framed with valid checksums when it asks for it.
fn log_input(data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match data.split_first() {
        Some((&FIX_CHECKSUMS, rest)) => std::borrow::Cow::Owned(framed_log(rest)),
        _ => std::borrow::Cow::Borrowed(data),
    }
}

/// A WAL file: its records, each decoded as a write batch.
pub fn wal(data: &[u8]) {
    skip_caught_panics_in_hook();
    let data = &*log_input(data);
    let path = Path::new("000007.wal");
    let Ok(log) = read_log(path, data) else { return };
    let mut last_end = 0u64;
    for (offset, payload) in &log.records {
        assert!(*offset >= last_end, "records overlap");
        last_end = offset + payload.len() as u64;
        assert!(last_end <= data.len() as u64, "a record runs past the file");
        if let Ok(batch) = basalt::inspect::decode_wal_batch(payload, path, *offset) {
            assert!(batch.entries.len() <= payload.len(), "more entries than bytes");
        }
    }
    if let Some(tail) = log.torn_tail_at {
        assert!(tail >= last_end && tail <= data.len() as u64, "torn tail out of place");
    }
}

/// An SST read from arbitrary bytes: open, then every entry forwards and
/// backwards, and point lookups of the keys seen.
pub fn sst(data: &[u8]) {
    skip_caught_panics_in_hook();
    let fixed;
    let data = match data.split_first() {
        Some((&FIX_CHECKSUMS, rest)) => {
            fixed = fix_sst_checksums(rest);
            &fixed[..]
        }
        _ => data,
    };
    let fs = MemFs::new();
    let path = Path::new("/f/000009.sst");
    if fs.write_file_synced(path, data).is_err() {
        return;
    }
    // The engine's default, a memory map (`MemFs` maps by copying).
    let Ok(sst) = Sst::open(&fs, path, 9, true) else { return };
    // Each entry takes bytes of the file, which bounds a correct walk.
    let limit = data.len() + 1;
    let mut keys = Vec::new();
    let mut it = sst.cursor();
    let mut ok = it.seek_to_first().is_ok();
    while ok && it.valid() && keys.len() <= limit {
        keys.push((it.user_key().to_vec(), it.trailer()));
        let _ = it.value();
        ok = it.next().is_ok();
    }
    assert!(keys.len() <= limit, "forward walk does not end");
    let mut back = 0;
    let mut ok = it.seek_to_last().is_ok();
    while ok && it.valid() && back <= limit {
        back += 1;
        ok = it.prev().is_ok();
    }
    assert!(back <= limit, "backward walk does not end");
    for (k, trailer) in keys.iter().take(64) {
        let _ = sst.get(k, trailer >> 8);
        let _ = sst.may_contain(k);
    }
}

fn le_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn le_u64(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Recomputes the block checksum of the block at `offset` of `size` bytes
/// (its trailer follows it), if it lies in `data`.
fn fix_block(data: &mut [u8], offset: usize, size: usize) -> Option<()> {
    let kind = *data.get(offset.checked_add(size)?)?;
    let crc = basalt::inspect::sst_format::block_crc(data.get(offset..offset + size)?, kind);
    data.get_mut(offset + size + 1..offset + size + 5)?.copy_from_slice(&crc.to_le_bytes());
    Some(())
}

/// `data` with the checksums of an SST made valid, as far as its structure
/// can be followed: the footer, the metaindex, the meta blocks it lists,
/// and the data blocks an index block (kind 2) points to. The fuzzer then
/// reaches the block decoders behind the checksums.
pub fn fix_sst_checksums(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let _ = fix_sst(&mut out);
    out
}

fn fix_sst(data: &mut [u8]) -> Option<()> {
    let footer = data.len().checked_sub(basalt::inspect::sst_format::FOOTER_BYTES)?;
    let crc = basalt::inspect::sst_format::mask_crc(crc32c_of(&data[footer..footer + 28]));
    data[footer + 28..footer + 32].copy_from_slice(&crc.to_le_bytes());
    let meta = usize::try_from(le_u64(data, footer)?).ok()?;
    let meta_size = le_u32(data, footer + 8)? as usize;
    fix_block(data, meta, meta_size)?;
    let count = (le_u32(data, meta)? as usize).min(64);
    for i in 0..count {
        let at = meta + 4 + 13 * i;
        let kind = *data.get(at)?;
        let offset = usize::try_from(le_u64(data, at + 1)?).ok()?;
        let size = le_u32(data, at + 9)? as usize;
        fix_block(data, offset, size)?;
        if kind == basalt::inspect::sst_format::META_INDEX {
            fix_data_blocks(data, offset, size);
        }
    }
    Some(())
}

/// Fixes the data blocks the index block at `offset` points to: its rows'
/// values (buffer 4, cut by the offsets in buffer 3) are block handles.
fn fix_data_blocks(data: &mut [u8], offset: usize, size: usize) -> Option<()> {
    let block = data.get(offset..offset.checked_add(size)?)?.to_vec();
    let rows = (le_u32(&block, 0)? as usize).min(block.len());
    let dir = |i: usize| Some((le_u32(&block, 8 + 8 * i)? as usize, le_u32(&block, 12 + 8 * i)? as usize));
    let (value_offsets, _) = dir(3)?;
    let (value_data, _) = dir(4)?;
    for r in 0..rows {
        let start = le_u32(&block, value_offsets + 4 * r)? as usize;
        let handle = value_data.checked_add(start)?;
        let block_offset = usize::try_from(le_u64(&block, handle)?).ok()?;
        let block_size = le_u32(&block, handle + 8)? as usize;
        fix_block(data, block_offset, block_size);
    }
    Some(())
}

fn crc32c_of(bytes: &[u8]) -> u32 {
    // CRC-32C, bit by bit: the fuzz crate needs no extra dependency for it.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// A MANIFEST: its records decoded as version edits; each edit that
/// decodes must encode back to the same edit. Raw bytes are tried as one
/// edit too.
pub fn manifest(data: &[u8]) {
    skip_caught_panics_in_hook();
    let data = &*log_input(data);
    let path = Path::new("MANIFEST-000001");
    round_trip_edit(data, path, 0);
    let Ok(log) = read_log(path, data) else { return };
    for (offset, payload) in &log.records {
        round_trip_edit(payload, path, *offset);
    }
}

fn round_trip_edit(payload: &[u8], path: &Path, offset: u64) {
    let Ok(edit) = ManifestEdit::decode(payload, path, offset) else { return };
    let again = ManifestEdit::decode(&edit.encode(), path, 0).expect("an encoded edit decodes");
    assert_eq!(again, edit, "edit changed across encode and decode");
}

/// The types a key-codec input starts with.
const KEY_TYPES: [KeyType; 13] = [
    KeyType::Bool,
    KeyType::I8,
    KeyType::I16,
    KeyType::I32,
    KeyType::I64,
    KeyType::U8,
    KeyType::U16,
    KeyType::U32,
    KeyType::U64,
    KeyType::F32,
    KeyType::F64,
    KeyType::Bytes,
    KeyType::Str,
];

/// The key codec: the first byte gives the number of parts (up to 4), the
/// next ones their types; the rest is decoded as a key of those types,
/// plain and nullable. A key that decodes is canonical: it encodes back to
/// the same bytes.
pub fn key_codec(data: &[u8]) {
    skip_caught_panics_in_hook();
    let Some((&n, rest)) = data.split_first() else { return };
    let n = usize::from(n % 5);
    if rest.len() < n {
        return;
    }
    let (type_bytes, bytes) = rest.split_at(n);
    let types: Vec<KeyType> =
        type_bytes.iter().map(|&b| KEY_TYPES[usize::from(b) % KEY_TYPES.len()]).collect();
    if let Ok(values) = inspect::decode_key(bytes, &types) {
        let parts: Vec<KeyValue<'_>> = values.iter().map(basalt::OwnedKeyValue::as_value).collect();
        assert_eq!(inspect::encode_key(&parts), bytes, "a decoded key is not canonical");
    }
    if let Ok(values) = inspect::decode_nullable_key(bytes, &types) {
        let parts: Vec<Option<KeyValue<'_>>> =
            values.iter().map(|v| v.as_ref().map(basalt::OwnedKeyValue::as_value)).collect();
        assert_eq!(inspect::encode_nullable_key(&parts), bytes, "a decoded nullable key is not canonical");
    }
}

/// A table schema as the MANIFEST keeps it (an Arrow IPC stream): a
/// typed error or a schema, never a panic or an allocation beyond the
/// input's size; and a decoded schema, once encoded, must survive further
/// round trips unchanged. (The first round trip may normalize: arrow-ipc
/// reads a time zone of `""` back as none.) The decoding of logged Arrow rows
/// (`batch_from_ipc`) is not public yet; its target is pending.
pub fn arrow_schema(data: &[u8]) {
    skip_caught_panics_in_hook();
    let round_trip = |schema: &arrow_schema::Schema| {
        let bytes = basalt::inspect::schema_to_ipc(schema).expect("a decoded schema encodes");
        basalt::inspect::schema_from_ipc(&bytes).expect("an encoded schema decodes")
    };
    if let Ok(schema) = basalt::inspect::schema_from_ipc(data) {
        let once = round_trip(&schema);
        assert_eq!(round_trip(&once), once, "schema changed across encode and decode");
    }
}

/// Writing the seed corpora: small valid inputs of each target, made with
/// the engine's own writers, so the fuzzers start from real formats.
pub mod seeds {
    use std::path::Path;
    use std::sync::Arc;

    use basalt::KeyValue;
    use basalt::inspect::{self, encode_key};
    use basalt::testing::MemFs;
    use basalt::{Compression, Db, Options, WriteBatch};

    /// Writes `<out>/<target>/seed-<n>` files for every target.
    pub fn write_all(out: &Path) -> std::io::Result<usize> {
        let written = std::cell::Cell::new(0);
        let put = |target: &str, n: usize, bytes: &[u8]| -> std::io::Result<()> {
            let dir = out.join(target);
            std::fs::create_dir_all(&dir)?;
            written.set(written.get() + 1);
            std::fs::write(dir.join(format!("seed-{n}")), bytes)
        };
        for (i, compression) in [Compression::None, Compression::Lz4].into_iter().enumerate() {
            let files = database_files(compression);
            for (name, bytes) in &files {
                let extension = Path::new(name).extension().and_then(|e| e.to_str());
                let target = if extension == Some("wal") {
                    "wal"
                } else if extension == Some("sst") {
                    "sst"
                } else if name.starts_with("MANIFEST") {
                    "manifest"
                } else {
                    continue;
                };
                let n = i * 100 + written_index(name);
                put(target, n, bytes)?;
                // The same with checksums fixed up by the target.
                let fixed = if target == "sst" { bytes.clone() } else { payloads_framed(bytes) };
                put(target, n + 1000, &[&[super::FIX_CHECKSUMS][..], &fixed].concat())?;
            }
        }
        let keys: [(&[u8], Vec<u8>); 4] = [
            (&[1, 4], encode_key(&[KeyValue::I64(-42)])),
            (&[2, 12, 3], encode_key(&[KeyValue::Str("a\0b"), KeyValue::I32(7)])),
            (
                &[3, 11, 10, 0],
                encode_key(&[KeyValue::Bytes(b"\x00\xff"), KeyValue::F64(-0.5), KeyValue::Bool(true)]),
            ),
            (&[1, 9], encode_key(&[KeyValue::F32(f32::NAN)])),
        ];
        for (n, (types, bytes)) in keys.iter().enumerate() {
            put("key_codec", n, &[types.to_vec(), bytes.clone()].concat())?;
        }
        put("arrow_schema", 0, &schema_bytes())?;
        for (n, bytes) in super::ops_seeds::all().iter().enumerate() {
            put("ops", n, bytes)?;
        }
        Ok(written.get())
    }

    /// A log file's payloads in the form `framed_log` takes.
    fn payloads_framed(log: &[u8]) -> Vec<u8> {
        let records = inspect::read_log(Path::new("seed"), log).expect("an intact log");
        let mut out = Vec::new();
        for (_, payload) in records.records {
            out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
            out.extend_from_slice(&payload);
        }
        out
    }

    /// A number from a file name's digits, so seeds of one kind differ.
    fn written_index(name: &str) -> usize {
        name.chars().filter(char::is_ascii_digit).collect::<String>().parse().unwrap_or(0)
    }

    /// The files of a small closed database: two SSTs, a WAL with puts,
    /// deletes and a batch, and the MANIFEST.
    fn database_files(compression: Compression) -> Vec<(String, Vec<u8>)> {
        let fs = MemFs::new();
        let options = Options::default()
            .fs(Arc::new(fs.clone()))
            .block_bytes_target(128)
            .compression(compression)
            .auto_compaction(false);
        let db = Db::open("/db", options).expect("create");
        for i in 0..40u32 {
            db.put(format!("key{i:03}"), format!("value-{i}-").repeat(3)).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..40u32).step_by(7) {
            db.delete(format!("key{i:03}")).expect("delete");
        }
        db.flush().expect("flush");
        db.put(b"wal-put", b"v").expect("put");
        db.delete(b"key001").expect("delete");
        let mut wb = WriteBatch::new();
        wb.put(b"b1", b"x");
        wb.delete(b"b2");
        db.write(wb).expect("batch");
        db.close().expect("close");
        fs.file_names(Path::new("/db"))
            .into_iter()
            .filter_map(|n| fs.read_file(&Path::new("/db").join(&n)).map(|b| (n, b)))
            .collect()
    }

    fn schema_bytes() -> Vec<u8> {
        use arrow_schema::{DataType, Field, Schema};
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, false),
        ]);
        basalt::inspect::schema_to_ipc(&schema).expect("schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_seeds_run_every_op_and_are_committed() {
        let mut total = ops::Coverage::default();
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/ops");
        for (n, seed) in ops_seeds::all().iter().enumerate() {
            let run = ops::run_ops(seed);
            for (sum, count) in total.steps.iter_mut().zip(run.steps) {
                *sum += count;
            }
            total.zero_copy_rows += run.zero_copy_rows;
            total.blocks_skipped += run.blocks_skipped;
            let path = committed.join(format!("seed-{n}"));
            let on_disk = std::fs::read(&path).unwrap_or_default();
            assert!(
                on_disk == *seed,
                "{} differs from ops seed {n}: run `basalt-crashtest fuzz-seeds --out <dir>` and copy its ops/",
                path.display()
            );
        }
        let missing: Vec<u8> =
            (0..ops::op::OPS).filter(|&c| ops::op::of(c) == c && total.steps[usize::from(c)] == 0).collect();
        assert!(missing.is_empty(), "no ops seed runs op codes {missing:?}");
        assert!(total.zero_copy_rows > 0, "no ops seed scans rows straight from SST blocks: {total:?}");
        assert!(total.blocks_skipped > 0, "no ops seed skips a block by its zone map: {total:?}");
    }

    #[test]
    fn fixing_checksums_keeps_valid_files_and_framing_keeps_payloads() {
        let dir = std::env::temp_dir().join(format!("basalt-seeds-{}", std::process::id()));
        seeds::write_all(&dir).expect("seeds");
        let mut ssts = 0;
        for entry in std::fs::read_dir(dir.join("sst")).expect("sst seeds") {
            let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
            if bytes[0] != FIX_CHECKSUMS {
                assert_eq!(fix_sst_checksums(&bytes), bytes, "fixing an intact SST changed it");
                ssts += 1;
                // Damage in the first data block and in the last meta
                // block: fixed up, no checksum fails any more.
                let mut damaged = bytes.clone();
                damaged[20] ^= 0x40;
                let meta_end = damaged.len() - basalt::inspect::sst_format::FOOTER_BYTES - 6;
                damaged[meta_end] ^= 0x01;
                let fixed = fix_sst_checksums(&damaged);
                let fs = MemFs::new();
                fs.write_file_synced(Path::new("/s.sst"), &fixed).expect("write");
                let opened = Sst::open(&fs, Path::new("/s.sst"), 1, true);
                let read = opened.and_then(|sst| sst.cursor().seek_to_first());
                assert!(read.as_ref().is_ok() || !format!("{read:?}").contains("checksum"), "{read:?}");
            }
        }
        assert!(ssts >= 2);
        for entry in std::fs::read_dir(dir.join("wal")).expect("wal seeds") {
            let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
            if let Some((&FIX_CHECKSUMS, rest)) = bytes.split_first() {
                let log = read_log(Path::new("w"), &framed_log(rest)).expect("framed log reads");
                assert!(log.records.len() >= 3 && log.torn_tail_at.is_none());
                for (offset, payload) in &log.records {
                    basalt::inspect::decode_wal_batch(payload, Path::new("w"), *offset)
                        .expect("a real batch");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
