//! Whole-SST tests: write with `SstWriter`, read back with `SstReader` and
//! `SstIter`, and compare with a sorted model; damage files byte by byte.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::{FOOTER_BYTES, FORMAT_VERSION, Footer};
use super::reader::SstReader;
use super::test_fs::TestFs;
use super::writer::{SstSummary, SstWriterOptions};
use super::{Blocks, SstIter, SstWriter};
use crate::codec::internal::{Kind, SEQNO_MAX, compare, pack_trailer, unpack_trailer};
use crate::error::{Error, Result};
use crate::io::{Fs, RealFs};
use crate::options::Compression;
use crate::sst::block_cache::BlockCache;

/// (user key, trailer, value), sorted in internal-key order.
type Entry = (Vec<u8>, u64, Vec<u8>);

fn options(block_bytes_target: usize, compression: Compression, bloom_bits_per_key: u32) -> SstWriterOptions {
    SstWriterOptions {
        block_bytes_target,
        bloom_bits_per_key,
        compression,
        tree_id: 3,
        layout: None,
        learned_index_epsilon: Some(4),
        file_number: 1,
        pack_integers: true,
        string_dictionaries: true,
        key_prefixes: None,
    }
}

/// The seed of a randomized test: `BASALT_TEST_SEED` if set, else `default`.
fn seed(default: u64) -> u64 {
    let seed = std::env::var("BASALT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    println!("seed {seed} (set BASALT_TEST_SEED to replay)");
    seed
}

/// Sorts into internal-key order and keeps one entry per (key, seqno).
fn normalize(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_by(|a, b| compare(&a.0, a.1, &b.0, b.1));
    entries.dedup_by(|b, a| a.0 == b.0 && a.1 >> 8 == b.1 >> 8);
    entries
}

/// Keys with 1..=4 versions each, some of them deletes, values that LZ4 likes.
fn random_entries(rng: &mut StdRng, keys: usize, value_reps_max: usize) -> Vec<Entry> {
    let mut out = Vec::new();
    for k in 0..keys {
        let key = format!("user/{:06}/{}", k * 7, "x".repeat(rng.random_range(0..8))).into_bytes();
        for _ in 0..rng.random_range(1..=4) {
            let seqno = rng.random_range(1..1000u64);
            if rng.random_bool(0.2) {
                out.push((key.clone(), pack_trailer(seqno, Kind::Delete), Vec::new()));
            } else {
                let len = rng.random_range(0..value_reps_max);
                out.push((
                    key.clone(),
                    pack_trailer(seqno, Kind::Put),
                    format!("v{seqno}-").repeat(len).into_bytes(),
                ));
            }
        }
    }
    normalize(out)
}

fn write_sst(fs: &dyn Fs, path: &Path, entries: &[Entry], opts: &SstWriterOptions) -> Result<SstSummary> {
    let mut w = SstWriter::new(fs.create(path)?, path.to_path_buf(), opts);
    for (k, t, v) in entries {
        w.add(k, *t, v)?;
    }
    w.finish()
}

/// Opens `path` read through a map (the default path of the engine).
fn open(fs: &dyn Fs, path: &Path) -> Result<Arc<SstReader>> {
    open_with(fs, path, true)
}

/// Opens `path`, read through a map or by `read_at` (`pread`).
fn open_with(fs: &dyn Fs, path: &Path, map: bool) -> Result<Arc<SstReader>> {
    SstReader::open(fs, path, 1, Arc::new(BlockCache::new(1 << 20)), map)
}

/// The newest entry of `key` at `seqno`, through the filter and the one
/// lookup ([`SstReader::find`]), copied out.
fn get(reader: &SstReader, key: &[u8], seqno: u64) -> Result<Option<(u64, bytes::Bytes)>> {
    let mut trace = super::reader::LookupTrace::default();
    if !reader.filter_hash_traced(super::filter::key_hash(key), &mut trace) {
        return Ok(None);
    }
    Ok(reader.find(key, seqno, &mut trace)?.map(|(block, i)| {
        let rows = block.rows();
        (rows.trailer(i), bytes::Bytes::copy_from_slice(rows.value(i)))
    }))
}

fn model_get(entries: &[Entry], key: &[u8], seqno: u64) -> Option<(u64, Vec<u8>)> {
    entries.iter().find(|(k, t, _)| k == key && t >> 8 <= seqno).map(|(_, t, v)| (*t, v.clone()))
}

/// Every key of the model, plus keys between and around them.
fn probe_keys(entries: &[Entry]) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
    keys.dedup();
    let mut more: Vec<Vec<u8>> = keys.iter().map(|k| [k.as_slice(), b"\0"].concat()).collect();
    more.extend([Vec::new(), b"\xff\xff".to_vec()]);
    keys.extend(more);
    keys
}

fn check_gets(reader: &SstReader, entries: &[Entry], seqnos: &[u64]) -> Result<()> {
    for key in probe_keys(entries) {
        for &s in seqnos {
            let got = get(reader, &key, s)?.map(|(t, v)| (t, v.to_vec()));
            assert_eq!(got, model_get(entries, &key, s), "get {key:?} at {s}");
        }
    }
    Ok(())
}

fn current(it: &SstIter) -> Entry {
    (it.user_key().to_vec(), it.trailer(), it.value().to_vec())
}

fn collect_forward(reader: &Arc<SstReader>, blocks: Blocks) -> Result<Vec<Entry>> {
    collect(SstIter::new(Arc::clone(reader), blocks))
}

/// Every entry of `it` from the first.
fn collect(mut it: SstIter) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push(current(&it));
        it.next()?;
    }
    Ok(out)
}

/// A pass in order as compaction makes it: reads ahead, past the map and
/// the block cache.
fn collect_ahead(reader: &Arc<SstReader>) -> Result<Vec<Entry>> {
    collect(SstIter::reading_ahead(Arc::clone(reader)))
}

/// Both ways a cursor takes blocks: through the cache, and in place in a
/// mapped file's blocks where the reader allows it.
const BLOCKS: [Blocks; 2] = [Blocks::Cached, Blocks::InPlace];

fn check_scans(reader: &Arc<SstReader>, entries: &[Entry]) -> Result<()> {
    assert_eq!(collect_ahead(reader)?, entries);
    for blocks in BLOCKS {
        assert_eq!(collect_forward(reader, blocks)?, entries, "{blocks:?}");
        let mut it = SstIter::new(Arc::clone(reader), blocks);
        it.seek_to_last()?;
        for e in entries.iter().rev() {
            assert_eq!(&current(&it), e, "{blocks:?}");
            it.prev()?;
        }
        assert!(!it.valid());
    }
    Ok(())
}

/// Seek targets: each entry's own key, keys just above and below it, and
/// keys between user keys.
fn targets(entries: &[Entry]) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    for (k, t, _) in entries {
        out.extend([
            (k.clone(), *t),
            (k.clone(), t + 1),
            (k.clone(), t.saturating_sub(1)),
            (k.clone(), u64::MAX),
            (k.clone(), 0),
        ]);
    }
    for k in probe_keys(entries) {
        out.push((k, pack_trailer(SEQNO_MAX, Kind::Put)));
    }
    out
}

fn check_seeks(reader: &Arc<SstReader>, entries: &[Entry]) -> Result<()> {
    for blocks in BLOCKS {
        check_seeks_of(reader, entries, blocks)?;
    }
    Ok(())
}

fn check_seeks_of(reader: &Arc<SstReader>, entries: &[Entry], blocks: Blocks) -> Result<()> {
    let mut it = SstIter::new(Arc::clone(reader), blocks);
    for (k, t) in targets(entries) {
        let at = entries.iter().position(|e| compare(&e.0, e.1, &k, t).is_ge());
        it.seek(&k, t)?;
        assert_eq!(it.valid().then(|| current(&it)), at.map(|i| entries[i].clone()), "seek {k:?}@{t:#x}");
        if let Some(i) = at {
            it.next()?;
            assert_eq!(it.valid().then(|| current(&it)), entries.get(i + 1).cloned());
        }
        let at = entries.iter().rposition(|e| compare(&e.0, e.1, &k, t).is_le());
        it.seek_for_prev(&k, t)?;
        assert_eq!(
            it.valid().then(|| current(&it)),
            at.map(|i| entries[i].clone()),
            "seek_for_prev {k:?}@{t:#x}"
        );
        if let Some(i) = at {
            it.prev()?;
            assert_eq!(it.valid().then(|| current(&it)), i.checked_sub(1).map(|j| entries[j].clone()));
        }
    }
    Ok(())
}

fn check_all(reader: &Arc<SstReader>, entries: &[Entry]) -> Result<()> {
    let mut seqnos: Vec<u64> =
        entries.iter().map(|e| e.1 >> 8).flat_map(|s| [s.saturating_sub(1), s]).collect();
    seqnos.extend([0, SEQNO_MAX, u64::MAX]);
    seqnos.sort_unstable();
    seqnos.dedup();
    seqnos.truncate(40);
    check_gets(reader, entries, &seqnos)?;
    check_scans(reader, entries)?;
    check_seeks(reader, entries)
}

#[test]
fn round_trips_across_block_sizes_and_compression() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed(7));
    let entries = random_entries(&mut rng, 400, 64);
    let fs = TestFs::default();
    for compression in [Compression::None, Compression::Lz4] {
        for target in [1, 200, 4096, 64 << 20] {
            let path = PathBuf::from(format!("{compression:?}-{target}.sst"));
            let summary = write_sst(&fs, &path, &entries, &options(target, compression, 10))?;
            let reader = open(&fs, &path)?;
            assert_eq!(summary.file_size, reader.file_size());
            assert_eq!(summary.entries, entries.len() as u64);
            let p = reader.properties();
            assert_eq!(
                (p.entries, p.deletions, p.tree_id, p.format_version),
                (summary.entries, summary.deletions, 3, FORMAT_VERSION)
            );
            assert_eq!((&p.smallest, &p.largest), (&summary.smallest, &summary.largest));
            if target == 1 {
                assert_eq!(reader.block_count(), entries.len());
            }
            if target == 64 << 20 {
                assert_eq!(reader.block_count(), 1);
            }
            check_all(&reader, &entries)?;
            check_all(&open_with(&fs, &path, false)?, &entries)?;
        }
    }
    let plain = fs.get(Path::new("None-4096.sst")).len();
    let packed = fs.get(Path::new("Lz4-4096.sst")).len();
    assert!(packed < plain * 3 / 4, "lz4 {packed} vs plain {plain}");
    Ok(())
}

/// Blocks larger than a read ahead, between small ones, plain and
/// compressed: a pass in order reads each whole, and the in-place check
/// (by `pread`) accepts them all.
#[test]
fn reads_ahead_take_blocks_larger_than_a_read() -> Result<()> {
    let fs = TestFs::default();
    let sizes = [10, 3 << 20, 100, (1 << 20) + 1, 5, 1 << 20, 4000, 2];
    let entries: Vec<Entry> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            (format!("k{i:02}").into_bytes(), pack_trailer(i as u64 + 1, Kind::Put), vec![i as u8; n])
        })
        .collect();
    for compression in [Compression::None, Compression::Lz4] {
        let path = PathBuf::from(format!("big-{compression:?}.sst"));
        write_sst(&fs, &path, &entries, &options(4096, compression, 10))?;
        let reader = open(&fs, &path)?;
        assert_eq!(collect_ahead(&reader)?, entries);
        reader.check_blocks_in_place()?;
        check_all(&reader, &entries)?;
    }
    Ok(())
}

#[test]
fn summary_matches_the_entries() -> Result<()> {
    let entries = normalize(vec![
        (b"a".to_vec(), pack_trailer(9, Kind::Put), b"1".to_vec()),
        (b"a".to_vec(), pack_trailer(4, Kind::Delete), Vec::new()),
        (b"b".to_vec(), pack_trailer(12, Kind::Put), b"22".to_vec()),
    ]);
    let fs = TestFs::default();
    let s = write_sst(&fs, Path::new("s.sst"), &entries, &options(4096, Compression::None, 10))?;
    assert_eq!((s.entries, s.deletions, s.min_seqno, s.max_seqno), (3, 1, 4, 12));
    assert_eq!((&s.smallest.user_key[..], s.smallest.seqno()), (&b"a"[..], 9));
    assert_eq!((&s.largest.user_key[..], s.largest.seqno()), (&b"b"[..], 12));
    let p = open(&fs, Path::new("s.sst"))?.properties().clone();
    assert_eq!((p.raw_key_bytes, p.raw_value_bytes, p.data_blocks), (3, 3, 1));
    Ok(())
}

#[test]
fn writer_rejects_bad_input() -> Result<()> {
    let fs = TestFs::default();
    let path = PathBuf::from("w.sst");
    let opts = options(4096, Compression::None, 10);
    let mut w = SstWriter::new(fs.create(&path)?, path.clone(), &opts);
    w.add(b"b", pack_trailer(5, Kind::Put), b"v")?;
    for (k, t) in [
        (&b"a"[..], pack_trailer(9, Kind::Put)),
        (b"b", pack_trailer(5, Kind::Put)),
        (b"b", pack_trailer(6, Kind::Put)),
    ] {
        assert!(matches!(w.add(k, t, b""), Err(Error::InvalidArgument(_))), "{k:?} {t}");
    }
    assert!(matches!(w.add(b"c", 5 << 8 | 7, b""), Err(Error::InvalidArgument(_))));
    w.add(b"b", pack_trailer(4, Kind::Delete), b"")?;
    assert_eq!(w.entries(), 2);
    w.finish()?;
    let empty = SstWriter::new(fs.create(&path)?, path.clone(), &opts);
    assert!(matches!(empty.finish(), Err(Error::InvalidArgument(_))));
    Ok(())
}

#[test]
fn filter_skips_absent_keys_and_can_be_disabled() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed(11));
    let entries = random_entries(&mut rng, 300, 64);
    let fs = TestFs::default();
    for bits in [0, 10] {
        let path = PathBuf::from(format!("bloom{bits}.sst"));
        write_sst(&fs, &path, &entries, &options(512, Compression::None, bits))?;
        let reader = open(&fs, &path)?;
        let absent = (0..1000).filter(|i| reader.may_contain(format!("absent{i}").as_bytes())).count();
        if bits == 0 {
            assert_eq!(absent, 1000);
        } else {
            assert!(absent < 50, "{absent} false positives");
        }
        check_gets(&reader, &entries, &[0, 500, SEQNO_MAX])?;
    }
    Ok(())
}

#[test]
fn blocks_come_from_the_cache() -> Result<()> {
    let fs = TestFs::default();
    let entries = normalize(
        (0..100u32).map(|i| (i.to_be_bytes().to_vec(), pack_trailer(1, Kind::Put), vec![1; 50])).collect(),
    );
    write_sst(&fs, Path::new("c.sst"), &entries, &options(256, Compression::Lz4, 10))?;
    let cache = Arc::new(BlockCache::new(1 << 20));
    let reader = SstReader::open(&fs, Path::new("c.sst"), 42, Arc::clone(&cache), false)?;
    let blocks = reader.block_count() as u64;
    assert!(blocks > 5);
    // Without a map, a cursor asking for blocks in place reads them
    // through the cache too.
    collect_forward(&reader, Blocks::InPlace)?;
    assert_eq!((cache.misses(), cache.hits()), (blocks, 0));
    collect_forward(&reader, Blocks::Cached)?;
    assert_eq!((cache.misses(), cache.hits()), (blocks, blocks));
    assert!(get(&reader, &5u32.to_be_bytes(), 1)?.is_some());
    assert_eq!(cache.hits(), blocks + 1);
    Ok(())
}

#[test]
fn mapped_lookups_read_plain_blocks_in_place() -> Result<()> {
    let fs = TestFs::default();
    let entries = normalize(
        (0..100u32).map(|i| (i.to_be_bytes().to_vec(), pack_trailer(1, Kind::Put), vec![1; 50])).collect(),
    );
    for (compression, through_cache) in [(Compression::None, false), (Compression::Lz4, true)] {
        let path = PathBuf::from(format!("{compression:?}.sst"));
        write_sst(&fs, &path, &entries, &options(256, compression, 10))?;
        let cache = Arc::new(BlockCache::new(1 << 20));
        let reader = SstReader::open(&fs, &path, 42, Arc::clone(&cache), true)?;
        for _ in 0..2 {
            for (k, t, v) in &entries {
                assert_eq!(get(&reader, k, 1)?.map(|(t, v)| (t, v.to_vec())), Some((*t, v.clone())));
            }
        }
        // Plain blocks are read where they lie in the map; compressed ones
        // are decompressed once into the cache.
        let blocks = reader.block_count() as u64;
        let expected = if through_cache { (2 * 100 - blocks, blocks) } else { (0, 0) };
        assert_eq!((cache.hits(), cache.misses()), expected, "{compression:?}");
        // A scan in place reads plain blocks where they lie, as lookups
        // do; compressed ones come from the cache (all hits now).
        let before = (cache.hits(), cache.misses());
        assert_eq!(collect_forward(&reader, Blocks::InPlace)?, entries);
        let hits = if through_cache { blocks } else { 0 };
        assert_eq!((cache.hits(), cache.misses()), (before.0 + hits, before.1), "{compression:?}");
        // A scan through the cache puts every block there.
        assert_eq!(collect_forward(&reader, Blocks::Cached)?, entries);
        assert!(cache.len() as u64 == blocks);
    }
    Ok(())
}

/// A mapped file's blocks that the cache cannot keep are decoded on every
/// read; after the first, from their directory alone: what they hold is
/// the same each time, with keys and values of one width or of many.
#[test]
fn blocks_the_cache_dropped_read_the_same_when_decoded_again() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed(0x5eed_0c4e));
    let fixed = normalize(
        (0..400u32).map(|i| (i.to_be_bytes().to_vec(), pack_trailer(1, Kind::Put), vec![7; 24])).collect(),
    );
    for (name, entries) in [("fixed", fixed), ("varied", random_entries(&mut rng, 400, 40))] {
        for compression in [Compression::None, Compression::Lz4] {
            let path = PathBuf::from(format!("{name}-{compression:?}.sst"));
            let fs = TestFs::default();
            write_sst(&fs, &path, &entries, &options(512, compression, 10))?;
            // A cache too small for any block: every read decodes.
            let cache = Arc::new(BlockCache::new(1));
            let reader = SstReader::open(&fs, &path, 42, Arc::clone(&cache), true)?;
            let blocks = reader.block_count();
            for pass in 0..3 {
                assert_eq!(
                    collect_forward(&reader, Blocks::Cached)?,
                    entries,
                    "{name} {compression:?} pass {pass}"
                );
                assert_eq!(
                    collect_forward(&reader, Blocks::Scanned)?,
                    entries,
                    "{name} {compression:?} pass {pass}"
                );
                for b in 0..blocks {
                    let block = reader.read_block(b)?;
                    assert!(block.len() > 0);
                }
            }
            assert_eq!(cache.len(), 0, "nothing fits the cache");
            // Compressed blocks are checked on every read; one that did
            // not compress well enough is stored plain and counts.
            let checked = reader.blocks_checked_in_full();
            if compression == Compression::None {
                assert_eq!(checked, blocks, "{name}");
            } else {
                assert!(checked < blocks, "{name}: {checked} of {blocks} blocks stored plain");
            }
            check_gets(&reader, &entries, &[0, 1, 300, SEQNO_MAX])?;
        }
    }
    Ok(())
}

/// A damaged block among blocks read again and again through a cache that
/// keeps none: it is corruption on every read, and the blocks around it,
/// checked once, read right (each block's check is its own).
#[test]
fn a_damaged_block_stays_corruption_among_blocks_checked_once() -> Result<()> {
    let entries = normalize(
        (0..400u32).map(|i| (i.to_be_bytes().to_vec(), pack_trailer(1, Kind::Put), vec![7; 24])).collect(),
    );
    let fs = TestFs::default();
    let path = Path::new("damaged.sst");
    write_sst(&fs, path, &entries, &options(512, Compression::None, 10))?;
    let blocks = open(&fs, path)?.block_count();
    assert!(blocks >= 8, "{blocks} blocks");
    for damaged in [0, blocks / 2, blocks - 1] {
        let fresh = TestFs::default();
        let mut bytes = fs.get(path);
        let offset = open(&fs, path)?.block_offset(damaged)?;
        bytes[usize::try_from(offset).expect("offset") + 9] ^= 0x40;
        fresh.put(path, bytes);
        let reader = SstReader::open(&fresh, path, 42, Arc::new(BlockCache::new(1)), true)?;
        for pass in 0..3 {
            for b in 0..blocks {
                match reader.read_block(b) {
                    Ok(_) => assert_ne!(b, damaged, "pass {pass}: the damaged block read"),
                    Err(e) => {
                        assert_eq!(b, damaged, "pass {pass}, block {b}: {e}");
                        assert!(e.is_corruption(), "{e}");
                    }
                }
            }
        }
        assert_eq!(reader.blocks_checked_in_full(), blocks - 1, "damaged block {damaged}");
    }
    Ok(())
}

#[test]
fn real_files_round_trip() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    let path = dir.path().join("000001.sst");
    let mut rng = StdRng::seed_from_u64(seed(5));
    let entries = random_entries(&mut rng, 200, 64);
    write_sst(&RealFs, &path, &entries, &options(1024, Compression::Lz4, 10))?;
    check_all(&open(&RealFs, &path)?, &entries)?;
    check_all(&open_with(&RealFs, &path, false)?, &entries)
}

/// A small SST (2–4 KB) of several LZ4 and plain blocks, and its entries.
fn small_sst(fs: &TestFs, path: &Path) -> Vec<Entry> {
    let mut rng = StdRng::seed_from_u64(seed(3));
    let entries = random_entries(&mut rng, 30, 8);
    write_sst(fs, path, &entries, &options(300, Compression::Lz4, 10)).expect("writes");
    let len = fs.get(path).len();
    assert!((2000..=4096).contains(&len), "small SST is {len} bytes");
    assert!(open(fs, path).expect("opens").block_count() >= 4);
    let plain = Path::new("plain.sst");
    write_sst(fs, plain, &entries, &options(300, Compression::None, 10)).expect("writes");
    assert!(fs.get(plain).len() > len, "some blocks are compressed");
    entries
}

/// Reads everything; each answer must be right or a Corruption. Returns
/// whether any Corruption was seen.
fn read_everything(fs: &TestFs, path: &Path, entries: &[Entry]) -> bool {
    let mapped = read_everything_with(fs, path, entries, true);
    let read = read_everything_with(fs, path, entries, false);
    assert_eq!(mapped, read, "a map and reads disagree on whether the file is damaged");
    mapped
}

fn read_everything_with(fs: &TestFs, path: &Path, entries: &[Entry], map: bool) -> bool {
    let ok_or_corrupt = |r: Result<bool>| match r {
        Ok(corrupt) => corrupt,
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            true
        }
    };
    let reader = match open_with(fs, path, map) {
        Ok(reader) => reader,
        Err(e) => return ok_or_corrupt(Err(e)),
    };
    // A scan in place before any lookup: it makes the first check of
    // every block it reads.
    let mut corrupt = ok_or_corrupt(collect_forward(&reader, Blocks::InPlace).map(|got| {
        assert_eq!(got, entries);
        false
    }));
    for key in probe_keys(entries) {
        for s in [0, 300, 700, SEQNO_MAX] {
            corrupt |= ok_or_corrupt(get(&reader, &key, s).map(|got| {
                assert_eq!(got.map(|(t, v)| (t, v.to_vec())), model_get(entries, &key, s));
                false
            }));
        }
    }
    corrupt |= ok_or_corrupt(collect_forward(&reader, Blocks::Cached).map(|got| {
        assert_eq!(got, entries);
        false
    }));
    corrupt |= ok_or_corrupt(collect_ahead(&reader).map(|got| {
        assert_eq!(got, entries);
        false
    }));
    corrupt
}

#[test]
fn every_byte_flip_is_caught_or_harmless() {
    let fs = TestFs::default();
    let path = Path::new("flip.sst");
    let entries = small_sst(&fs, path);
    let good = fs.get(path);
    assert!(!read_everything(&fs, path, &entries));
    for i in 0..good.len() {
        for mask in [0x01u8, 0x10, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= mask;
            fs.put(path, bad);
            // Every byte is under a checksum, so every flip must be seen.
            assert!(read_everything(&fs, path, &entries), "flip of byte {i} by {mask:#x} went unnoticed");
        }
    }
}

#[test]
fn truncated_and_foreign_files_are_corruption() {
    let fs = TestFs::default();
    let path = Path::new("t.sst");
    small_sst(&fs, path);
    let good = fs.get(path);
    for len in 0..good.len() {
        fs.put(path, good[..len].to_vec());
        let err = open(&fs, path).expect_err("truncated file opens");
        assert!(err.is_corruption(), "{len}: {err}");
    }
    fs.put(path, vec![0xab; 4096]);
    let err = open(&fs, path).expect_err("foreign file opens");
    assert!(err.to_string().contains("magic"), "{err}");
    let mut future = good.clone();
    let at = good.len() - FOOTER_BYTES;
    let footer = Footer::decode(&good[at..], path, at as u64).expect("footer");
    future[at..].copy_from_slice(&Footer { format_version: FORMAT_VERSION + 1, ..footer }.encode());
    fs.put(path, future);
    let err = open(&fs, path).expect_err("future version opens");
    assert!(matches!(&err, Error::Corruption { file, .. } if file == path), "{err}");
    assert!(err.to_string().contains(&format!("version {}", FORMAT_VERSION + 1)), "{err}");
}

/// The one-entry file drawn in `docs/format.md` as version 1 wrote it,
/// byte for byte. Version 1 files must stay readable.
const V1_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000080000003800000001000000400000000800000048000000080000005000000001000000",
    "00000000010000006b000000000000000101000000000000000000000100000076004f53f26401000000070000000000",
    "000000000020400000000000000000000080000000000000000000000000000000000000000000000000200000002000",
    "000000020000000000000000000100431fe4320100000005000000300000000800000038000000010000004000000008",
    "0000004800000008000000500000000c00000000000000010000006b000000000000000101000000000000000000000c",
    "00000000000000000000005100000000f820b2b301000000030000000100000000000000000000000000000001000000",
    "000000000100000000000000010000000000000001000000000000000100000000000000010100000000000001010000",
    "00000000010000006b010000006b00b1326fdb030000000156000000000000004800000002a3000000000000005c0000",
    "000304010000000000005a000000005191087263010000000000002b000000010000000000000000000000000000005b",
    "57005189424153414c540a",
);

/// The same file as version 2 wrote it (fixed-width columns without
/// offsets).
const V2_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b0000000000000001010000000000007600810128800100000007000000000000000000002040000000000000000000",
    "008000000000000000000000000000000000000000000000000020000000200000000002000000000000000000010043",
    "1fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000000c",
    "0000006b0000000000000001010000000000000000000000000000410000000071dd9987020000000300000001000000",
    "000000000000000000000000010000000000000001000000000000000100000000000000010000000000000001000000",
    "0000000001010000000000000101000000000000010000006b010000006b008e6848f803000000014600000000000000",
    "480000000293000000000000004c00000003e4000000000000005a00000000fdd3ad4043010000000000002b00000002",
    "000000000000000000000000000000d447b66d89424153414c540a",
);

/// The same file as version 3 wrote it (the file number in the
/// properties).
const V3_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b0000000000000001010000000000007600810128800100000007000000000000000000002040000000000000000000",
    "008000000000000000000000000000000000000000000000000020000000200000000002000000000000000000010043",
    "1fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000000c",
    "0000006b0000000000000001010000000000000000000000000000410000000071dd9987030000000300000001000000",
    "000000000000000000000000010000000000000001000000000000000100000000000000010000000000000001000000",
    "00000000010100000000000001010000000000000100000000000000010000006b010000006b0041e339aa0300000001",
    "4600000000000000480000000293000000000000004c00000003e4000000000000006200000000d63583c24b01000000",
    "0000002b00000003000000000000000000000000000000dfa767dc89424153414c540a",
);

/// Version 4: the data block padded to end at a multiple of 8.
const V4_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe04000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "000000000000010100000000000001010000000000000100000000000000010000006b010000006b0010abc067030000",
    "00014800000000000000480000000295000000000000004c00000003e600000000000000620000000020bd5da84d0100",
    "00000000002b00000004000000000000000000000000000000457d058589424153414c540a",
);

/// Version 5: the properties count the file's distinct keys.
const V5_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe05000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "0000000000000101000000000000010100000000000001000000000000000100000000000000010000006b010000006b",
    "009878e41803000000014800000000000000480000000295000000000000004c00000003e6000000000000006a000000",
    "005e437cb555010000000000002b000000050000000000000000000000000000002963846489424153414c540a",
);

/// Version 6: the same file (a key-value block packs nothing; table blocks
/// may pack integer columns).
const V6_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe06000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "0000000000000101000000000000010100000000000001000000000000000100000000000000010000006b010000006b",
    "00c86bfd3e03000000014800000000000000480000000295000000000000004c00000003e6000000000000006a000000",
    "005e437cb555010000000000002b00000006000000000000000000000000000000794a6aa689424153414c540a",
);

/// Version 7: the properties count the key prefixes the filter holds (0:
/// a key-value tree's file holds none).
const V7_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe07000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "000000000000010100000000000001010000000000000100000000000000010000000000000000000000000000000100",
    "00006b010000006b00c68c8b3a03000000014800000000000000480000000295000000000000004c00000003e6000000",
    "000000007200000000e4b600695d010000000000002b0000000700000000000000000000000000000032a9b393894241",
    "53414c540a",
);

/// Version 8: the same file (a key-value block takes no dictionary; table
/// blocks may hold dictionary columns, and blocks zstd).
const V8_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe08000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "000000000000010100000000000001010000000000000100000000000000010000000000000000000000000000000100",
    "00006b010000006b00468e686a03000000014800000000000000480000000295000000000000004c00000003e6000000",
    "000000007200000000e4b600695d010000000000002b0000000800000000000000000000000000000041f1d0d9894241",
    "53414c540a",
);

/// Version 9: the properties record the rows' schema version and layout
/// fingerprint (0 and 0 for a key-value tree). A change here is a format change: bump
/// `FORMAT_VERSION` and keep this file readable.
const V9_FIXTURE_HEX: &str = concat!(
    "010000000500000030000000000000003000000001000000380000000800000040000000000000004000000001000000",
    "6b00000000000000010100000000000076000000d22fd6ce010000000700000000000000000000204000000000000000",
    "000000800000000000000000000000000000000000000000000000002000000020000000000200000000000000000001",
    "00431fe43201000000050000003000000000000000300000000100000038000000080000004000000000000000400000",
    "000c0000006b00000000000000010100000000000000000000000000004300000000b4fd28fe09000000030000000100",
    "000000000000000000000000000001000000000000000100000000000000010000000000000001000000000000000100",
    "000000000000010100000000000001010000000000000100000000000000010000000000000000000000000000000000",
    "0000000000000000000000000000010000006b010000006b002398fcd703000000014800000000000000480000000295",
    "000000000000004c00000003e6000000000000008200000000d64113b36d010000000000002b00000009000000000000",
    "00000000000000000011e9d2fc89424153414c540a",
);

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut hex, b| {
        use std::fmt::Write;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn fixtures_of_every_version_read_and_this_one_is_stable() -> Result<()> {
    let fs = TestFs::default();
    let entries = vec![(b"k".to_vec(), pack_trailer(1, Kind::Put), b"v".to_vec())];
    // Written without a learned model, as every SST was before models: such
    // files must stay byte-identical and readable.
    let no_model = SstWriterOptions { learned_index_epsilon: None, ..options(4096, Compression::None, 10) };
    write_sst(&fs, Path::new("new.sst"), &entries, &no_model)?;
    assert_eq!(to_hex(&fs.get(Path::new("new.sst"))), V9_FIXTURE_HEX, "the SST format changed");
    for (name, fixture) in [
        ("v1.sst", V1_FIXTURE_HEX),
        ("v2.sst", V2_FIXTURE_HEX),
        ("v3.sst", V3_FIXTURE_HEX),
        ("v4.sst", V4_FIXTURE_HEX),
        ("v5.sst", V5_FIXTURE_HEX),
        ("v6.sst", V6_FIXTURE_HEX),
        ("v7.sst", V7_FIXTURE_HEX),
        ("v8.sst", V8_FIXTURE_HEX),
        ("v9.sst", V9_FIXTURE_HEX),
    ] {
        fs.put(Path::new(name), from_hex(fixture));
        check_all(&open(&fs, Path::new(name))?, &entries)?;
    }
    Ok(())
}

fn arb_entries() -> impl Strategy<Value = Vec<Entry>> {
    let entry = (
        prop::collection::vec(0u8..4, 0..4),
        0u64..40,
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..24),
    )
        .prop_map(|(k, s, put, v)| {
            if put {
                (k, pack_trailer(s, Kind::Put), v)
            } else {
                (k, pack_trailer(s, Kind::Delete), Vec::new())
            }
        });
    prop::collection::vec(entry, 1..150).prop_map(normalize)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_ssts_match_the_model(
        entries in arb_entries(),
        target in 1usize..600,
        lz4 in any::<bool>(),
        bits in 0u32..12,
    ) {
        let fs = TestFs::default();
        let path = Path::new("p.sst");
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        write_sst(&fs, path, &entries, &options(target, compression, bits)).expect("writes");
        let seqnos: Vec<u64> = (0..=41).collect();
        let reader = open(&fs, path).expect("opens");
        for r in [&reader, &open_with(&fs, path, false).expect("opens")] {
            check_gets(r, &entries, &seqnos).expect("gets");
            check_scans(r, &entries).expect("scans");
            check_seeks(r, &entries).expect("seeks");
        }
        let deletes = entries.iter().filter(|e| unpack_trailer(e.1).map(|(_, k)| k) == Some(Kind::Delete)).count();
        prop_assert_eq!(reader.properties().deletions, deletes as u64);
        let distinct = 1 + entries.windows(2).filter(|w| w[0].0 != w[1].0).count();
        prop_assert_eq!(reader.properties().distinct_keys, Some(distinct as u64));
    }
}

/// An index tree's keys: (a string, an integer) then the primary key.
fn index_keys(rng: &mut StdRng, n: usize) -> (Arc<crate::row::index::IndexLayout>, Vec<Entry>) {
    use arrow_schema::{DataType, Field, Schema};

    use crate::codec::key::{self, KeyValue};
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("score", DataType::Int64, true),
    ]));
    let table = Arc::new(crate::row::layout::TableLayout::new(schema, &[0]).expect("table"));
    let layout = Arc::new(crate::row::index::IndexLayout::new(table, &[1, 2], &[]).expect("index"));
    let mut entries = Vec::new();
    for id in 0..n as i64 {
        let region = format!("r\0{}", rng.random_range(0..n / 4));
        let score = rng.random_bool(0.9).then(|| KeyValue::I64(rng.random_range(-5..5)));
        let mut k = layout.encode_values(&[Some(KeyValue::Str(&region)), score]).expect("values");
        key::put_value(&mut k, &KeyValue::I64(id));
        entries.push((k, pack_trailer(1, Kind::Put), Vec::new()));
    }
    (layout, normalize(entries))
}

/// The filter of an index's file holds each leading run of indexed values
/// of every key (a lookup of one is never told the file lacks it) and
/// rules out most runs the file does not hold; a file written without
/// the index's layout answers "may hold" for every prefix.
#[test]
fn an_index_file_filter_holds_every_prefix_of_its_keys() {
    use crate::sst::filter::prefix_hash;
    let mut rng = StdRng::seed_from_u64(seed(58));
    let (layout, entries) = index_keys(&mut rng, 2000);
    // Keys of another file: their prefixes are mostly not this one's.
    let (_, others) = index_keys(&mut rng, 2000);
    let fs = TestFs::default();
    let prefixes_of = |k: &[u8]| {
        let mut ends = Vec::new();
        layout.prefix_ends(k, |e| ends.push(e)).expect("prefix ends");
        ends.into_iter().map(|e| k[..e].to_vec()).collect::<Vec<_>>()
    };
    let with =
        SstWriterOptions { key_prefixes: Some(layout.clone()), ..options(4096, Compression::None, 10) };
    write_sst(&fs, Path::new("with.sst"), &entries, &with).expect("write");
    write_sst(&fs, Path::new("without.sst"), &entries, &options(4096, Compression::None, 10)).expect("write");
    let with = open_with(&fs, Path::new("with.sst"), false).expect("open");
    let without = open_with(&fs, Path::new("without.sst"), false).expect("open");
    let held: std::collections::HashSet<Vec<u8>> = entries.iter().flat_map(|e| prefixes_of(&e.0)).collect();
    assert_eq!(with.properties().prefixes, Some(held.len() as u64), "each distinct prefix added once");
    assert_eq!(without.properties().prefixes, Some(0));
    for p in &held {
        assert!(with.may_hold_prefix(prefix_hash(p)), "prefix {p:?} of a key the file holds");
    }
    let absent: Vec<Vec<u8>> =
        others.iter().flat_map(|e| prefixes_of(&e.0)).filter(|p| !held.contains(p)).collect();
    let ruled_out = absent.iter().filter(|p| !with.may_hold_prefix(prefix_hash(p))).count();
    assert!(ruled_out * 10 >= absent.len() * 9, "{ruled_out} of {} absent prefixes ruled out", absent.len());
    assert!(absent.iter().all(|p| without.may_hold_prefix(prefix_hash(p))), "a file without prefixes");
}
