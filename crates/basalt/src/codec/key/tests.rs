//! Tests of `codec/key.rs`.

use super::*;
use proptest::prelude::*;

const ALL_TYPES: [KeyType; 13] = [
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

fn enc(parts: &[OwnedKeyValue]) -> Vec<u8> {
    let parts: Vec<KeyValue<'_>> = parts.iter().map(OwnedKeyValue::as_value).collect();
    encode(&parts)
}

fn enc_nullable(parts: &[Option<OwnedKeyValue>]) -> Vec<u8> {
    let parts: Vec<Option<KeyValue<'_>>> =
        parts.iter().map(|p| p.as_ref().map(OwnedKeyValue::as_value)).collect();
    encode_nullable(&parts)
}

fn types_of(parts: &[OwnedKeyValue]) -> Vec<KeyType> {
    parts.iter().map(OwnedKeyValue::key_type).collect()
}

/// True when every float in `parts` has canonical bits.
fn all_canonical(parts: &[OwnedKeyValue]) -> bool {
    parts.iter().all(|p| match p {
        OwnedKeyValue::F32(v) => canonical_f32(*v).to_bits() == v.to_bits(),
        OwnedKeyValue::F64(v) => canonical_f64(*v).to_bits() == v.to_bits(),
        _ => true,
    })
}

/// The key order of floats, written independently of the codec: IEEE
/// order (so `-0.0 == 0.0`) with every NaN equal and after `+inf`.
fn reference_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

fn f32s() -> BoxedStrategy<f32> {
    prop_oneof![
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::NAN),
        Just(-f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        -2.0f32..2.0,
        any::<u32>().prop_map(f32::from_bits),
    ]
    .boxed()
}

fn f64s() -> BoxedStrategy<f64> {
    prop_oneof![
        Just(0.0f64),
        Just(-0.0f64),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -2.0f64..2.0,
        any::<u64>().prop_map(f64::from_bits),
    ]
    .boxed()
}

/// Bytes from a small alphabet rich in the escape and terminator bytes, so
/// prefixes and embedded zeros are common.
fn tricky_bytes() -> BoxedStrategy<Vec<u8>> {
    let byte = prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), Just(b'a'), any::<u8>()];
    prop::collection::vec(byte, 0..6).boxed()
}

fn value_of(ty: KeyType) -> BoxedStrategy<OwnedKeyValue> {
    match ty {
        KeyType::Bool => any::<bool>().prop_map(OwnedKeyValue::Bool).boxed(),
        KeyType::I8 => any::<i8>().prop_map(OwnedKeyValue::I8).boxed(),
        KeyType::I16 => prop_oneof![-2i16..2, any::<i16>()].prop_map(OwnedKeyValue::I16).boxed(),
        KeyType::I32 => prop_oneof![-2i32..2, any::<i32>()].prop_map(OwnedKeyValue::I32).boxed(),
        KeyType::I64 => prop_oneof![-2i64..2, any::<i64>()].prop_map(OwnedKeyValue::I64).boxed(),
        KeyType::U8 => any::<u8>().prop_map(OwnedKeyValue::U8).boxed(),
        KeyType::U16 => prop_oneof![0u16..3, any::<u16>()].prop_map(OwnedKeyValue::U16).boxed(),
        KeyType::U32 => prop_oneof![0u32..3, any::<u32>()].prop_map(OwnedKeyValue::U32).boxed(),
        KeyType::U64 => prop_oneof![0u64..3, any::<u64>()].prop_map(OwnedKeyValue::U64).boxed(),
        KeyType::F32 => f32s().prop_map(OwnedKeyValue::F32).boxed(),
        KeyType::F64 => f64s().prop_map(OwnedKeyValue::F64).boxed(),
        KeyType::Bytes => tricky_bytes().prop_map(OwnedKeyValue::Bytes).boxed(),
        KeyType::Str => "[\\x00\\x01a\u{ff}\u{10000}]{0,4}".prop_map(OwnedKeyValue::Str).boxed(),
    }
}

fn signature() -> impl Strategy<Value = Vec<KeyType>> {
    prop::collection::vec(prop::sample::select(ALL_TYPES.to_vec()), 1..5)
}

fn tuple_of(types: &[KeyType]) -> Vec<BoxedStrategy<OwnedKeyValue>> {
    types.iter().map(|&ty| value_of(ty)).collect()
}

fn nullable_tuple_of(types: &[KeyType]) -> Vec<BoxedStrategy<Option<OwnedKeyValue>>> {
    types.iter().map(|&ty| prop::option::of(value_of(ty)).boxed()).collect()
}

/// Two tuples of one signature sharing a random-length leading run, so
/// comparisons often reach the later parts.
fn same_signature_pair() -> impl Strategy<Value = (Vec<OwnedKeyValue>, Vec<OwnedKeyValue>)> {
    signature().prop_flat_map(|types| {
        let n = types.len();
        (tuple_of(&types), tuple_of(&types), 0..=n).prop_map(|(a, mut b, shared)| {
            b[..shared].clone_from_slice(&a[..shared]);
            (a, b)
        })
    })
}

fn nullable_pair()
-> impl Strategy<Value = (Vec<KeyType>, Vec<Option<OwnedKeyValue>>, Vec<Option<OwnedKeyValue>>)> {
    signature().prop_flat_map(|types| {
        let n = types.len();
        let (a, b) = (nullable_tuple_of(&types), nullable_tuple_of(&types));
        (Just(types), a, b, 0..=n).prop_map(|(types, a, mut b, shared)| {
            b[..shared].clone_from_slice(&a[..shared]);
            (types, a, b)
        })
    })
}

proptest! {
    #[test]
    fn byte_order_is_tuple_order((a, b) in same_signature_pair()) {
        prop_assert_eq!(a.cmp(&b), enc(&a).cmp(&enc(&b)));
    }

    #[test]
    fn float_order_is_canonical_total_order(a in f64s(), b in f64s(), c in f32s(), d in f32s()) {
        let ea = encode(&[KeyValue::F64(a)]);
        prop_assert_eq!(reference_cmp(a, b), ea.cmp(&encode(&[KeyValue::F64(b)])));
        let ec = encode(&[KeyValue::F32(c)]);
        let reference = reference_cmp(f64::from(c), f64::from(d));
        prop_assert_eq!(reference, ec.cmp(&encode(&[KeyValue::F32(d)])));
    }

    #[test]
    fn nullable_byte_order_is_tuple_order((_types, a, b) in nullable_pair()) {
        // Option orders None first, like the 00 marker.
        prop_assert_eq!(a.cmp(&b), enc_nullable(&a).cmp(&enc_nullable(&b)));
    }

    #[test]
    fn decode_inverts_encode((a, _b) in same_signature_pair()) {
        let bytes = enc(&a);
        let back = decode(&bytes, &types_of(&a)).expect("valid encoding decodes");
        prop_assert!(all_canonical(&back));
        prop_assert_eq!(&back, &a);
        prop_assert_eq!(enc(&back), bytes);
    }

    #[test]
    fn decode_nullable_inverts_encode((types, a, _b) in nullable_pair()) {
        let bytes = enc_nullable(&a);
        let back = decode_nullable(&bytes, &types).expect("valid encoding decodes");
        prop_assert_eq!(back, a);
    }

    #[test]
    fn random_bytes_never_panic(types in signature(), bytes in tricky_bytes()) {
        // Whatever decodes must be the one canonical encoding of its value.
        if let Ok(parts) = decode(&bytes, &types) {
            prop_assert_eq!(enc(&parts), bytes.clone());
        }
        if let Ok(parts) = decode_nullable(&bytes, &types) {
            prop_assert_eq!(enc_nullable(&parts), bytes);
        }
    }

    #[test]
    fn damaged_encodings_never_panic(
        (a, _b) in same_signature_pair(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let types = types_of(&a);
        let good = enc(&a);
        let truncated = &good[..cut.index(good.len() + 1)];
        if truncated.len() < good.len() {
            prop_assert!(decode(truncated, &types).is_err_and(|e| e.is_corruption()));
        }
        let mut flipped = good.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= mask;
        if let Ok(parts) = decode(&flipped, &types) {
            prop_assert_eq!(enc(&parts), flipped);
        }
    }

    #[test]
    fn escaped_prefix_tuples_order_correctly(
        s in "[\\x00\\x01a]{0,4}",
        ext in "[\\x00\\x01a]{1,3}",
        i in any::<i64>(),
        j in any::<i64>(),
    ) {
        // The shorter string wins whatever the next part is.
        let long = format!("{s}{ext}");
        let a = enc(&[OwnedKeyValue::Str(s), OwnedKeyValue::I64(i)]);
        let b = enc(&[OwnedKeyValue::Str(long), OwnedKeyValue::I64(j)]);
        prop_assert!(a < b);
    }

    #[test]
    fn prefix_successor_bounds_every_extension(
        prefix in tricky_bytes(),
        suffix in tricky_bytes(),
    ) {
        let extended = [prefix.as_slice(), suffix.as_slice()].concat();
        match prefix_successor(&prefix) {
            Some(upper) => {
                prop_assert!(extended < upper);
                prop_assert!(!upper.starts_with(&prefix));
            }
            None => prop_assert!(prefix.iter().all(|&b| b == 0xFF)),
        }
    }
}

#[test]
fn golden_bytes_are_stable() {
    assert_eq!(encode(&[KeyValue::Bool(true)]), [0x01]);
    assert_eq!(encode(&[KeyValue::I8(-1)]), [0x7f]);
    assert_eq!(encode(&[KeyValue::I32(1)]), [0x80, 0, 0, 1]);
    assert_eq!(encode(&[KeyValue::I64(-1)]), [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(encode(&[KeyValue::U16(0x1234)]), [0x12, 0x34]);
    assert_eq!(encode(&[KeyValue::F64(1.0)]), 0xbff0_0000_0000_0000u64.to_be_bytes());
    assert_eq!(encode(&[KeyValue::F64(-1.0)]), 0x400f_ffff_ffff_ffffu64.to_be_bytes());
    assert_eq!(encode(&[KeyValue::F64(-0.0)]), 0x8000_0000_0000_0000u64.to_be_bytes());
    assert_eq!(encode(&[KeyValue::F64(-f64::NAN)]), 0xfff8_0000_0000_0000u64.to_be_bytes());
    assert_eq!(encode(&[KeyValue::F32(-2.5)]), 0x3fdf_ffffu32.to_be_bytes());
    assert_eq!(encode(&[KeyValue::Str("a\0b")]), [0x61, 0x00, 0xff, 0x62, 0x00, 0x01]);
    assert_eq!(encode(&[KeyValue::Bytes(b"")]), [0x00, 0x01]);
    assert_eq!(encode(&[KeyValue::I32(i32::MIN)]), [0, 0, 0, 0]);
    assert_eq!(encode(&[KeyValue::F64(f64::NEG_INFINITY)]), 0x000f_ffff_ffff_ffffu64.to_be_bytes());
    let tuple = encode(&[KeyValue::I32(1), KeyValue::Str("ab"), KeyValue::Bool(true)]);
    assert_eq!(tuple, [0x80, 0, 0, 1, 0x61, 0x62, 0x00, 0x01, 0x01]);
    let nullable = encode_nullable(&[None, Some(KeyValue::U8(7))]);
    assert_eq!(nullable, [0x00, 0x01, 0x07]);
}

#[test]
fn special_floats_sort_in_place() {
    let order = [f64::NEG_INFINITY, -1.0, -f64::MIN_POSITIVE, 0.0, 1e-310, 1.0, f64::INFINITY];
    let encoded: Vec<Vec<u8>> = order.iter().map(|&v| encode(&[KeyValue::F64(v)])).collect();
    assert!(encoded.windows(2).all(|w| w[0] < w[1]));
    let nan = encode(&[KeyValue::F64(f64::NAN)]);
    assert!(nan > encode(&[KeyValue::F64(f64::INFINITY)]));
    assert_eq!(nan, encode(&[KeyValue::F64(f64::from_bits(0xfff0_0000_0000_0001))]));
    assert_eq!(encode(&[KeyValue::F64(-0.0)]), encode(&[KeyValue::F64(0.0)]));
}

#[test]
fn string_prefix_sorts_before_extension_with_zero() {
    let a = encode(&[KeyValue::Str("a"), KeyValue::I32(5)]);
    let b = encode(&[KeyValue::Str("a\0"), KeyValue::I32(1)]);
    assert!(a < b);
    let c = encode(&[KeyValue::Str("a\u{1}"), KeyValue::I32(0)]);
    assert!(b < c);
}

fn corruption_offset(bytes: &[u8], types: &[KeyType]) -> u64 {
    match decode(bytes, types) {
        Err(Error::Corruption { offset, .. }) => offset,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn malformed_keys_are_corruption() {
    // Bad escape, missing terminator, lone escape at the end.
    assert_eq!(corruption_offset(&[0x61, 0x00, 0x02], &[KeyType::Bytes]), 2);
    assert_eq!(corruption_offset(&[0x61, 0x62], &[KeyType::Bytes]), 2);
    assert_eq!(corruption_offset(&[0x61, 0x00], &[KeyType::Bytes]), 2);
    // Trailing bytes, short integer, bad bool, invalid UTF-8.
    assert_eq!(corruption_offset(&[0x80, 0x01], &[KeyType::I8]), 1);
    assert_eq!(corruption_offset(&[0x80, 0x00, 0x00], &[KeyType::I32]), 0);
    assert_eq!(corruption_offset(&[0x02], &[KeyType::Bool]), 0);
    assert_eq!(corruption_offset(&[0xff, 0xfe, 0x00, 0x01], &[KeyType::Str]), 0);
    // Negative zero and a NaN with a payload are never written.
    let neg_zero = 0x7fff_ffff_ffff_ffffu64.to_be_bytes();
    assert_eq!(corruption_offset(&neg_zero, &[KeyType::F64]), 0);
    let odd_nan = 0xfff8_0000_0000_0001u64.to_be_bytes();
    assert_eq!(corruption_offset(&odd_nan, &[KeyType::F64]), 0);
    // Bad null marker.
    assert!(decode_nullable(&[0x02], &[KeyType::U8]).is_err_and(|e| e.is_corruption()));
    assert!(decode_nullable(&[], &[KeyType::U8]).is_err_and(|e| e.is_corruption()));
}

#[test]
fn reader_decodes_mixed_index_keys() {
    // enc_nullable(index col) | enc(pk), as secondary indexes store them.
    let mut key = encode_nullable(&[None]);
    encode_into(&[KeyValue::I64(42)], &mut key);
    let mut r = KeyReader::new(&key);
    assert_eq!(r.read_nullable(KeyType::Str).expect("null part"), None);
    assert_eq!(r.read(KeyType::I64).expect("pk"), OwnedKeyValue::I64(42));
    r.finish().expect("no trailing bytes");
}

#[test]
fn prefix_successor_examples() {
    assert_eq!(prefix_successor(b""), None);
    assert_eq!(prefix_successor(&[0xff, 0xff]), None);
    assert_eq!(prefix_successor(&[0x01, 0x02]), Some(vec![0x01, 0x03]));
    assert_eq!(prefix_successor(&[0x01, 0xff, 0xff]), Some(vec![0x02]));
    assert_eq!(prefix_successor(&[0x00]), Some(vec![0x01]));
    assert_eq!(prefix_successor(&[0x61, 0xfe, 0xff]), Some(vec![0x61, 0xff]));
}
