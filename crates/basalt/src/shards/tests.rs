use std::path::Path;

use arrow_schema::{DataType, Field};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::io::MemFs;

fn field(name: &str, t: DataType) -> Field {
    Field::new(name, t, false)
}

/// A map over `(a INT64, b UTF8)` cut at whole keys and prefixes.
fn composite() -> ShardMap {
    let points = vec![
        vec![OwnedKeyValue::I64(-5)],
        vec![OwnedKeyValue::I64(0), OwnedKeyValue::Str("m".into())],
        vec![OwnedKeyValue::I64(7)],
    ];
    ShardMap::new("data", &[field("a", DataType::Int64), field("b", DataType::Utf8)], points).expect("map")
}

#[test]
fn maps_round_trip_through_the_file_and_replace_it() -> Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/s"))?;
    let map = composite();
    map.write(&fs, Path::new("/s"))?;
    assert_eq!(ShardMap::read(&fs, Path::new("/s"))?, map);
    let next = map.with_paths(2, (0..4).map(|i| format!("shard-{i:05}.v2")).collect())?;
    next.write(&fs, Path::new("/s"))?;
    let read = ShardMap::read(&fs, Path::new("/s"))?;
    assert_eq!((read.version(), read.shards()[3].path.as_str()), (2, "shard-00003.v2"));
    assert_eq!(fs.list(Path::new("/s"))?, vec![SHARD_MAP_FILE.to_string()], "no temporary file left");
    Ok(())
}

#[test]
fn keys_route_by_the_engines_order_including_prefix_bounds() {
    let map = composite();
    let route = |a: i64, b: &str| map.shard_of(&[KeyValue::I64(a), KeyValue::Str(b)]).expect("route");
    assert_eq!(route(i64::MIN, ""), 0);
    assert_eq!(route(-6, "zzz"), 0);
    assert_eq!(route(-5, ""), 1, "a prefix bound holds every key starting with it");
    assert_eq!(route(0, "l"), 1);
    assert_eq!(route(0, "m"), 2);
    assert_eq!(route(6, "\u{10ffff}"), 2);
    assert_eq!(route(7, ""), 3);
    assert_eq!(route(i64::MAX, "x"), 3);
}

/// Random split points and keys of integer, unsigned, string and binary
/// keys, routed against an oracle that compares the values themselves
/// (the engine's order for these types is the values' order).
#[test]
fn random_keys_route_as_their_values_order() {
    let seed = std::env::var("BASALT_SHARD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    let mut rng = StdRng::seed_from_u64(seed);
    for case in 0..200 {
        let ctx = format!("BASALT_SHARD_SEED={seed}, case {case}");
        let kind = rng.random_range(0..4);
        let value = |rng: &mut StdRng| -> OwnedKeyValue {
            match kind {
                0 => OwnedKeyValue::I64(rng.random_range(-50..50) * (1 << rng.random_range(0..50))),
                1 => OwnedKeyValue::U32(rng.random::<u32>() >> rng.random_range(0..32)),
                2 => OwnedKeyValue::Str(
                    (0..rng.random_range(0..4)).map(|_| rng.random_range('\0'..='\u{3ff}')).collect(),
                ),
                _ => OwnedKeyValue::Bytes(
                    (0..rng.random_range(0..4)).map(|_| rng.random_range(0..3)).collect(),
                ),
            }
        };
        let data_type = [DataType::Int64, DataType::UInt32, DataType::Utf8, DataType::Binary][kind].clone();
        let mut points: Vec<OwnedKeyValue> = (0..rng.random_range(0..8)).map(|_| value(&mut rng)).collect();
        points.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
        points.dedup();
        let map =
            ShardMap::new("t", &[field("k", data_type)], points.iter().map(|p| vec![p.clone()]).collect())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        for _ in 0..50 {
            let key = value(&mut rng);
            let want = points.iter().filter(|p| *p <= &key).count();
            assert_eq!(map.shard_of(&[key.as_value()]).expect("route"), want, "{ctx}: {key:?} in {points:?}");
        }
    }
}

#[test]
fn bad_maps_and_keys_are_refused() {
    let key = [field("k", DataType::Int64)];
    let unsorted = vec![vec![OwnedKeyValue::I64(5)], vec![OwnedKeyValue::I64(5)]];
    assert!(matches!(ShardMap::new("t", &key, unsorted), Err(Error::InvalidArgument(_))));
    let wrong_type = vec![vec![OwnedKeyValue::Str("5".into())]];
    assert!(matches!(ShardMap::new("t", &key, wrong_type), Err(Error::InvalidArgument(_))));
    let too_long = vec![vec![OwnedKeyValue::I64(1), OwnedKeyValue::I64(2)]];
    assert!(matches!(ShardMap::new("t", &key, too_long), Err(Error::InvalidArgument(_))));
    let float_list = [field("k", DataType::new_list(DataType::Int64, true))];
    assert!(matches!(ShardMap::new("t", &float_list, Vec::new()), Err(Error::InvalidArgument(_))));
    let map = ShardMap::new("t", &key, vec![vec![OwnedKeyValue::I64(0)]]).expect("map");
    assert!(matches!(map.shard_of(&[KeyValue::I32(1)]), Err(Error::InvalidArgument(_))));
    assert!(matches!(map.shard_of(&[]), Err(Error::InvalidArgument(_))));
    assert!(matches!(map.with_paths(2, vec!["a".into(), "a".into()]), Err(Error::InvalidArgument(_))));
    assert!(matches!(map.with_paths(2, vec!["a".into(), "../b".into()]), Err(Error::InvalidArgument(_))));
    assert!(matches!(map.with_paths(2, vec!["a".into()]), Err(Error::InvalidArgument(_))));
    assert!(matches!(map.with_paths(0, vec!["a".into(), "b".into()]), Err(Error::InvalidArgument(_))));
    let fs = MemFs::new();
    assert!(matches!(ShardMap::read(&fs, Path::new("/")), Err(Error::InvalidArgument(_))));
}

/// Every flipped byte and every truncation of a map's file is
/// `Error::Corruption` naming the file, never a panic or another map.
#[test]
fn damaged_maps_are_corruption() -> Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/s"))?;
    composite().write(&fs, Path::new("/s"))?;
    let path = Path::new("/s").join(SHARD_MAP_FILE);
    let good = fs.read_all(&path)?;
    let check = |bytes: Vec<u8>, what: &str| match format::decode(&bytes, &path) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    for i in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = good.clone();
            bad[i] ^= bit;
            check(bad, &format!("byte {i} ^ {bit:#x}"));
        }
    }
    for len in 0..good.len() {
        check(good[..len].to_vec(), &format!("truncated to {len}"));
    }
    Ok(())
}

#[test]
fn nodes_round_trip_and_format_1_files_read_without_them() -> Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/s"))?;
    let map = composite().with_nodes(vec![
        Some("node-a".into()),
        None,
        Some("node-b".into()),
        Some("node-a".into()),
    ])?;
    map.write(&fs, Path::new("/s"))?;
    let read = ShardMap::read(&fs, Path::new("/s"))?;
    assert_eq!(read, map);
    assert_eq!(read.shards()[2].node.as_deref(), Some("node-b"));
    assert_ne!(read, composite(), "nodes take part in equality");
    // The next version keeps the placement.
    let next = read.with_paths(2, (0..4).map(|i| format!("shard-{i:05}.v2")).collect())?;
    assert_eq!(next.shards()[0].node.as_deref(), Some("node-a"));
    assert!(composite().with_nodes(vec![None]).is_err(), "a node per shard");
    assert!(composite().with_nodes(vec![Some(String::new()), None, None, None]).is_err(), "empty name");
    // A format 1 file (no node field): the same map, placed nowhere.
    let map1 = composite();
    let mut body = Vec::new();
    crate::codec::varint::put_u64(&mut body, map1.version());
    crate::codec::varint::put_bytes(&mut body, map1.table().as_bytes());
    crate::codec::varint::put_bytes(&mut body, &crate::row::schema_to_ipc(map1.key_schema())?);
    crate::codec::varint::put_u64(&mut body, map1.shards().len() as u64);
    for shard in map1.shards() {
        crate::codec::varint::put_bytes(&mut body, shard.path.as_bytes());
        let lower = shard.lower.as_deref().unwrap_or_default();
        crate::codec::varint::put_u64(&mut body, lower.len() as u64);
        let values: Vec<_> = lower.iter().map(OwnedKeyValue::as_value).collect();
        crate::codec::varint::put_bytes(&mut body, &crate::codec::key::encode(&values));
    }
    let mut old = b"BSHARDS\n".to_vec();
    old.extend_from_slice(&1u32.to_le_bytes());
    old.extend_from_slice(&(body.len() as u32).to_le_bytes());
    old.extend_from_slice(&body);
    old.extend_from_slice(&crate::log::format::mask_crc(crc32c::crc32c(&body)).to_le_bytes());
    fs.write_file_synced(Path::new("/s/SHARDS"), &old)?;
    let read1 = ShardMap::read(&fs, Path::new("/s"))?;
    assert_eq!(read1, map1);
    assert!(read1.shards().iter().all(|s| s.node.is_none()));
    Ok(())
}
