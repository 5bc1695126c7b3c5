//! Tests of `sst/block.rs`.

use super::*;
use crate::codec::internal::{Kind, compare, pack_trailer};
use crate::row::cell::RawCell;
use crate::sst::format::BLOCK_BYTES_MAX;

fn build(rows: &[(&[u8], u64, &[u8])]) -> Vec<u8> {
    let mut b = BlockBuilder::new();
    for (k, t, v) in rows {
        b.add(k, *t, v);
    }
    assert_eq!(b.len(), rows.len());
    b.finish()
}

fn sample() -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let mut rows = Vec::new();
    for i in 0..50u64 {
        let key = format!("key{i:03}").into_bytes();
        rows.push((key.clone(), pack_trailer(100 + i, Kind::Put), vec![i as u8; i as usize]));
        rows.push((key, pack_trailer(10 + i, Kind::Delete), Vec::new()));
    }
    rows
}

fn build_sample() -> Vec<u8> {
    let rows = sample();
    let refs: Vec<(&[u8], u64, &[u8])> =
        rows.iter().map(|(k, t, v)| (k.as_slice(), *t, v.as_slice())).collect();
    build(&refs)
}

#[test]
fn rows_round_trip_and_buffers_are_aligned() {
    let rows = sample();
    let block = Block::decode(build_sample(), Path::new("b"), 0).expect("decodes");
    assert_eq!(block.len(), rows.len());
    for (i, (k, t, v)) in rows.iter().enumerate() {
        assert_eq!((block.key(i), block.trailer(i), block.value(i)), (&k[..], *t, &v[..]));
    }
    for i in 0..DATA_BLOCK_BUFFERS {
        assert_eq!(block.buffer_range(i).start % BUFFER_ALIGN_BYTES, 0);
    }
    // The sample's keys all have 6 bytes: written without offsets.
    assert!(block.buffer(BUF_KEY_OFFSETS).is_empty());
    assert_eq!(block.buffer(BUF_VALUE_OFFSETS).len(), 4 * (rows.len() + 1));
    assert!(block.approximate_bytes() > block.bytes().len());
}

#[test]
fn fixed_and_variable_width_columns_round_trip() {
    let key = |i: usize, fixed: bool| if fixed { format!("k{i:04}") } else { format!("k{i}") }.into_bytes();
    let value = |i: usize, fixed: bool| if fixed { vec![i as u8; 16] } else { vec![i as u8; i % 7] };
    for (fixed_keys, fixed_values) in [(true, true), (true, false), (false, true), (false, false)] {
        let rows: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..300)
            .map(|i| (key(i, fixed_keys), pack_trailer(i as u64 + 1, Kind::Put), value(i, fixed_values)))
            .collect();
        let mut sorted = rows.clone();
        sorted.sort_by(|a, b| compare(&a.0, a.1, &b.0, b.1));
        let refs: Vec<(&[u8], u64, &[u8])> = sorted.iter().map(|(k, t, v)| (&k[..], *t, &v[..])).collect();
        let block = Block::decode(build(&refs), Path::new("b"), 0).expect("decodes");
        assert_eq!(block.buffer(BUF_KEY_OFFSETS).is_empty(), fixed_keys);
        assert_eq!(block.buffer(BUF_VALUE_OFFSETS).is_empty(), fixed_values);
        for (i, (k, t, v)) in sorted.iter().enumerate() {
            assert_eq!((block.key(i), block.trailer(i), block.value(i)), (&k[..], *t, &v[..]));
            assert_eq!(block.seek(k, *t), i);
            block.rows().warm_rows(i.saturating_sub(9)..i + 9);
        }
    }
}

#[test]
fn a_fixed_width_column_that_does_not_divide_is_corruption() {
    let rows: Vec<(Vec<u8>, u64, Vec<u8>)> =
        (0..3u64).map(|i| (vec![b'a' + i as u8; 4], pack_trailer(i + 1, Kind::Put), vec![1; 8])).collect();
    let refs: Vec<(&[u8], u64, &[u8])> = rows.iter().map(|(k, t, v)| (&k[..], *t, &v[..])).collect();
    let mut bytes = build(&refs);
    // Shorten the key data buffer's recorded length (directory entry 1)
    // by one byte: 11 bytes do not split into 3 keys.
    let len_at = BLOCK_HEADER_FIXED_BYTES + BUFFER_ENTRY_BYTES + 4;
    let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().expect("4 bytes"));
    bytes[len_at..len_at + 4].copy_from_slice(&(len - 1).to_le_bytes());
    let err = Block::decode(bytes, Path::new("b"), 0).expect_err("corrupt");
    assert!(err.to_string().contains("fixed-width key column"), "{err}");
}

#[test]
fn seek_finds_first_entry_at_or_after_target() {
    let rows = sample();
    let block = Block::decode(build_sample(), Path::new("b"), 0).expect("decodes");
    let targets = [
        (&b"key000"[..], u64::MAX),
        (b"key000", 0),
        (b"key010", pack_trailer(110, Kind::Put)),
        (b"key010", pack_trailer(50, Kind::Put)),
        (b"key0105", 0),
        (b"a", 0),
        (b"z", 0),
    ];
    for (k, t) in targets {
        let want = rows.iter().position(|(rk, rt, _)| compare(rk, *rt, k, t).is_ge());
        assert_eq!(block.seek(k, t), want.unwrap_or(rows.len()), "{k:?} {t}");
    }
}

#[test]
fn single_empty_row_block_decodes() {
    let bytes = build(&[(b"", pack_trailer(0, Kind::Delete), b"")]);
    let block = Block::decode(bytes, Path::new("b"), 0).expect("decodes");
    assert_eq!((block.key(0), block.value(0)), (&b""[..], &b""[..]));
}

#[test]
fn damaged_structure_is_corruption_never_a_panic() {
    let good = build_sample();
    for i in 0..good.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            // Flips in key or value bytes leave a well-formed block; any
            // other outcome must be a Corruption naming the block offset.
            match Block::decode(bad, Path::new("b"), 4096) {
                Ok(block) => {
                    for r in 0..block.len() {
                        let _ = (block.key(r), block.trailer(r), block.value(r));
                    }
                }
                Err(err) => assert!(matches!(err, Error::Corruption { offset: 4096, .. })),
            }
        }
    }
    for len in 0..good.len() {
        assert!(Block::decode(good[..len].to_vec(), Path::new("b"), 0).is_err(), "len {len}");
    }
    assert!(Block::decode(Vec::new(), Path::new("b"), 0).is_err());
}

#[test]
fn fits_guards_the_i32_limit() {
    let b = BlockBuilder::new();
    assert!(b.fits(10, 10));
    assert!(!b.fits(BLOCK_BYTES_MAX, 0));
    assert!(!b.fits(usize::MAX, usize::MAX));
}

#[test]
fn plain_rows_are_distinct_puts_and_give_the_newest_seqno() {
    let put = |s| pack_trailer(s, Kind::Put);
    let decode =
        |rows: &[(&[u8], u64, &[u8])]| Block::decode(build(rows), Path::new("b"), 0).expect("decodes");
    let plain = decode(&[(b"a", put(7), b"1"), (b"b", put(9), b"2"), (b"c", put(3), b"3")]);
    assert_eq!(plain.plain_rows(), Some(9));
    // A second version of a key, a delete, each make the block not plain,
    // wherever they sit.
    let versions = decode(&[(b"a", put(7), b"1"), (b"b", put(9), b"2"), (b"b", put(4), b"0")]);
    assert_eq!(versions.plain_rows(), None);
    let deleted = decode(&[(b"a", pack_trailer(7, Kind::Delete), b""), (b"b", put(9), b"2")]);
    assert_eq!(deleted.plain_rows(), None);
    let one = decode(&[(b"only", put(1), b"")]);
    assert_eq!(one.plain_rows(), Some(1));
}

/// `plain_rows` against a row-by-row oracle over random blocks: fixed- and
/// variable-width keys, keys longer than eight bytes whose last eight are
/// equal, empty keys, second versions and deletes anywhere.
#[test]
fn plain_rows_match_a_row_by_row_oracle() {
    use rand::{Rng, SeedableRng};
    for seed in 0..400u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let fixed = rng.random_bool(0.5);
        let tail = [b't'; 9];
        let mut rows: Vec<(Vec<u8>, u64, Vec<u8>)> = (0..rng.random_range(1..40))
            .map(|i: u64| {
                let mut key = if fixed {
                    vec![rng.random_range(0..4u8); 10]
                } else {
                    let len = rng.random_range(0..4);
                    (0..len).map(|_| rng.random_range(b'a'..b'd')).collect()
                };
                if rng.random_bool(0.5) {
                    key.extend_from_slice(&tail[..if fixed { 9 } else { rng.random_range(0..9) }]);
                }
                let kind = if rng.random_bool(0.05) { Kind::Delete } else { Kind::Put };
                (key, pack_trailer(i + 1, kind), vec![1; 3])
            })
            .collect();
        rows.sort_by(|a, b| compare(&a.0, a.1, &b.0, b.1));
        let refs: Vec<(&[u8], u64, &[u8])> = rows.iter().map(|(k, t, v)| (&k[..], *t, &v[..])).collect();
        let block = Block::decode(build(&refs), Path::new("b"), 0).expect("decodes");
        let distinct = rows.windows(2).all(|w| w[0].0 != w[1].0);
        let puts = rows.iter().all(|r| unpack_trailer(r.1).is_some_and(|(_, k)| k == Kind::Put));
        let newest = rows.iter().map(|r| r.1 >> 8).max();
        let expected = (distinct && puts).then_some(newest).flatten();
        assert_eq!(block.plain_rows(), expected, "seed {seed}: {rows:?}");
    }
}

#[test]
fn shared_keys_and_values_are_the_rows_bytes() {
    let rows = sample();
    let block = Block::decode(build_sample(), Path::new("b"), 0).expect("decodes");
    for (i, (k, _, v)) in rows.iter().enumerate() {
        assert_eq!((&block.key_bytes(i)[..], &block.value_bytes(i)[..]), (&k[..], &v[..]));
    }
}

/// A table block whose string column of three values takes a dictionary:
/// the column scans and reads row by row as written; a code past the
/// dictionary (the mutation check) fails both the point read and the
/// scan; no flipped byte of the block panics.
#[test]
fn dictionary_columns_in_table_blocks_read_in_place_and_refuse_damage() {
    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
    ]));
    let layout = Arc::new(TableLayout::new(schema, &[0]).expect("layout"));
    let cities = ["JFK", "LGA", "EWR"];
    let rows = 200;
    let ids: ArrayRef = Arc::new(Int64Array::from((0..rows as i64).collect::<Vec<_>>()));
    let city =
        StringArray::from((0..rows).map(|i| (i % 7 != 0).then_some(cities[i % 3])).collect::<Vec<_>>());
    let arrays: Vec<ArrayRef> = vec![ids, Arc::new(city.clone())];
    let mut builder = BlockBuilder::for_table(layout.clone(), true, true);
    for i in 0..rows {
        let key = (i as u64).to_be_bytes();
        builder.add_from_arrays(&key, pack_trailer(1 + i as u64, Kind::Put), &arrays, i).expect("row");
    }
    let bytes = builder.finish();
    let block = Block::decode(bytes.clone(), Path::new("b"), 0).expect("decodes");
    let at = 3 + 3 * layout.stored_position(1).expect("stored");
    assert!(Dictionary::is_dictionary(block.buffer(at + 1)), "three values take a dictionary");
    assert!(block.buffer(BUF_KEY_OFFSETS).is_empty(), "8-byte keys go without offsets");
    assert_eq!(block.column(&layout, 1).expect("decodes").to_data(), city.to_data());
    let read = |block: &Block, i: usize| {
        block.table_cell(&layout, 1, i).map(|c| match c {
            RawCell::Null => None,
            RawCell::Bytes(b) => Some(b.to_vec()),
            RawCell::Word(w) => Some(w.to_vec()),
        })
    };
    for i in 0..rows {
        assert_eq!(
            read(&block, i).expect("cell"),
            city.is_valid(i).then(|| cities[i % 3].as_bytes().to_vec())
        );
    }
    // Two-bit codes; the last byte holds rows 196 (null) to 199: code 3.
    let codes_end = block.buffer_range(at + 2).end;
    let mut bad = bytes.clone();
    bad[codes_end - 1] = 0xff;
    let damaged = Block::decode(bad, Path::new("b"), 0).expect("the directory is intact");
    assert!(read(&damaged, 199).expect_err("code 3 of 3 entries").contains("code 3"));
    assert_eq!(read(&damaged, 195).expect("row 195 is intact"), Some(cities[0].as_bytes().to_vec()));
    assert!(damaged.column(&layout, 1).is_err());
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x5a;
        if let Ok(block) = Block::decode(bad, Path::new("b"), 0) {
            let _ = block.column(&layout, 1);
            for r in 0..rows {
                let _ = read(&block, r);
            }
        }
    }
}
