//! Zone maps: per data block and stored column, the null count and the
//! smallest and largest value (in the key codec's byte order, so one
//! comparison serves every type). A filter predicate that no value in
//! `[min, max]` can satisfy lets a scan skip the block. Byte layout in
//! `docs/format.md`:
//!
//! ```text
//! zones  := block_count: u32 | column_count: u32 | zone{block_count * column_count}
//! zone   := null_count: u32 | has_range: u8 | [min: varint len + bytes | max: varint len + bytes]
//! ```

use std::path::Path;

use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use super::encode::key_bytes_of;
use super::filter::{CmpOp, Filter, Predicate};
use super::layout::{COLUMNS_MAX, TableLayout, Width, key_type_of};
use crate::codec::key::{self, OwnedKeyValue};
use crate::codec::varint::{self, Reader};
use crate::error::Result;

/// Values longer than this are not recorded as a min or max (the column's
/// zone then has no range), so zone maps stay small.
const RANGE_VALUE_BYTES_MAX: usize = 64;

/// The zone of one column in one block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// Null values (deleted rows count as null).
    pub null_count: u32,
    /// Smallest and largest non-null value, key-encoded; `None` when the
    /// column holds no non-null value or a value too long to record.
    pub range: Option<(Vec<u8>, Vec<u8>)>,
}

/// The zone of a column builder's current contents. Values are compared
/// in the zone's order without encoding them: a fixed-width value as an
/// integer whose order is its encoding's (`zone_bytes_of`), a
/// variable-width one as its bytes (the key codec's escaping keeps their
/// order); only the smallest and largest are encoded, at the end. Encoding
/// every value and comparing the encodings was a quarter of a bulk load.
pub fn zone_of(builder: &super::decode::ColumnBuilder) -> Zone {
    let data_type = builder.field().data_type();
    let mut nulls = 0u32;
    let mut scratch = [0u8; 1];
    // Decimal128's row bytes have no key encoding: record nulls only.
    let mut ranged = !matches!(data_type, DataType::Decimal128(_, _));
    let order = OrderKey::of(data_type);
    // The rows holding the smallest and largest value, with their keys.
    let mut bounds: Option<((u64, usize), (u64, usize))> = None;
    let mut byte_bounds: Option<(&[u8], &[u8])> = None;
    for i in 0..builder.len() {
        let Some(v) = builder.value_at(i, &mut scratch) else {
            nulls += 1;
            continue;
        };
        if !ranged {
            continue;
        }
        if v.len() > RANGE_VALUE_BYTES_MAX {
            ranged = false;
            continue;
        }
        if let Some(order) = order {
            let k = order.key(v);
            match &mut bounds {
                None => bounds = Some(((k, i), (k, i))),
                Some((lo, hi)) => {
                    if k < lo.0 {
                        *lo = (k, i);
                    }
                    if k > hi.0 {
                        *hi = (k, i);
                    }
                }
            }
        } else {
            // Variable-width values borrow the builder's bytes, not
            // `scratch` (only booleans use it, and they have a key).
            let v = builder.bytes_at(i).unwrap_or_default();
            match &mut byte_bounds {
                None => byte_bounds = Some((v, v)),
                Some((lo, hi)) => {
                    if v < *lo {
                        *lo = v;
                    }
                    if v > *hi {
                        *hi = v;
                    }
                }
            }
        }
    }
    let encoded = |v: &[u8]| {
        let mut out = Vec::new();
        zone_bytes_of(data_type, v, &mut out);
        out
    };
    let range = if !ranged {
        None
    } else if let Some(((_, lo), (_, hi))) = bounds {
        let mut at = |i: usize| builder.value_at(i, &mut scratch).map(&encoded).unwrap_or_default();
        Some((at(lo), at(hi)))
    } else {
        byte_bounds.map(|(lo, hi)| (encoded(lo), encoded(hi)))
    };
    Zone { null_count: nulls, range }
}

/// How a fixed-width type's value maps to a `u64` ordered as its zone
/// bytes (`zone_bytes_of`) are: the key codec's sign-flipped big-endian
/// integers, and the floats' total order. Types with none are compared as
/// their bytes. Packed integer columns (`sst/block/packed.rs`) store the
/// same keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrderKey {
    Bool,
    Signed(usize),
    Unsigned(usize),
    Float32,
    Float64,
}

impl OrderKey {
    pub(crate) fn of(data_type: &DataType) -> Option<OrderKey> {
        Some(match data_type {
            DataType::Boolean => OrderKey::Bool,
            DataType::Int8 => OrderKey::Signed(1),
            DataType::Int16 => OrderKey::Signed(2),
            DataType::Int32 | DataType::Date32 => OrderKey::Signed(4),
            DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => OrderKey::Signed(8),
            DataType::UInt8 => OrderKey::Unsigned(1),
            DataType::UInt16 => OrderKey::Unsigned(2),
            DataType::UInt32 => OrderKey::Unsigned(4),
            DataType::UInt64 => OrderKey::Unsigned(8),
            DataType::Float32 => OrderKey::Float32,
            DataType::Float64 => OrderKey::Float64,
            _ => return None,
        })
    }

    /// The key of a value's row bytes (little-endian, of the type's width).
    pub(crate) fn key(self, v: &[u8]) -> u64 {
        let le = |w: usize| {
            let mut a = [0u8; 8];
            let n = w.min(v.len());
            a[..n].copy_from_slice(&v[..n]);
            u64::from_le_bytes(a)
        };
        match self {
            OrderKey::Bool => u64::from(v.first().is_some_and(|&b| b != 0)),
            OrderKey::Unsigned(w) => le(w),
            // Sign-extended, then the sign bit flipped: the order of the
            // key codec's sign-flipped big-endian bytes.
            OrderKey::Signed(w) => {
                let shift = 64 - 8 * w as u32;
                (((le(w) << shift) as i64 >> shift) as u64) ^ (1 << 63)
            }
            OrderKey::Float32 => {
                let bits = le(4) as u32;
                u64::from(if bits >> 31 == 1 { !bits } else { bits | 1 << 31 })
            }
            OrderKey::Float64 => {
                let bits = le(8);
                if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
            }
        }
    }
}

/// Encodes the zones of every block (`zones[block][column]`).
pub fn encode(zones: &[Vec<Zone>], columns: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(zones.len() as u32).to_le_bytes());
    out.extend_from_slice(&(columns as u32).to_le_bytes());
    for block in zones {
        for z in block {
            out.extend_from_slice(&z.null_count.to_le_bytes());
            match &z.range {
                None => out.push(0),
                Some((min, max)) => {
                    out.push(1);
                    varint::put_bytes(&mut out, min);
                    varint::put_bytes(&mut out, max);
                }
            }
        }
    }
    out
}

/// Decodes a zone block of `blocks` data blocks.
pub fn decode(data: &[u8], file: &Path, offset: u64, blocks: usize) -> Result<Vec<Vec<Zone>>> {
    let mut r = Reader::new(data, file, offset);
    let count = r.u32_le()? as usize;
    let columns = r.u32_le()? as usize;
    if count != blocks || columns > COLUMNS_MAX {
        return Err(r.corrupt(format!("zone map of {count} blocks x {columns} columns for {blocks} blocks")));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let mut block = Vec::with_capacity(columns);
        for _ in 0..columns {
            let null_count = r.u32_le()?;
            let range = match r.u8()? {
                0 => None,
                1 => Some((r.len_bytes()?.to_vec(), r.len_bytes()?.to_vec())),
                b => return Err(r.corrupt(format!("zone flag {b}"))),
            };
            block.push(Zone { null_count, range });
        }
        out.push(block);
    }
    if !r.is_empty() {
        return Err(r.corrupt("bytes after the zone map"));
    }
    Ok(out)
}

/// Appends the bytes a zone records for a value given as row bytes of
/// `data_type`: bytes that compare as Arrow's comparison kernels compare
/// the values. That is the key codec's order for every type but floats,
/// which the key codec canonicalises (`-0.0` as `0.0`, every NaN as one
/// NaN after `+inf`) while Arrow orders them by IEEE 754 totalOrder (a NaN
/// with the sign bit set, as x86 makes of `0.0 / 0.0`, below `-inf`): a
/// zone in the key codec's order would rule out a block holding such a
/// NaN for `x < 0.5`, a row the filter selects.
fn zone_bytes_of(data_type: &DataType, bytes: &[u8], out: &mut Vec<u8>) {
    match (data_type, bytes.len()) {
        (DataType::Float32, 4) => {
            let bits = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let ordered = if bits >> 31 == 1 { !bits } else { bits | 1 << 31 };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        (DataType::Float64, 8) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(bytes);
            let bits = u64::from_le_bytes(a);
            let ordered = if bits >> 63 == 1 { !bits } else { bits | 1 << 63 };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        _ => key_bytes_of(data_type, bytes, out),
    }
}

/// One column's zones folded over many blocks, then files: the null count
/// and the smallest and largest value over all of them. The range is
/// unknown once any zone folded in has none (values too long to record,
/// decimals, or only nulls: a zone does not say which).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnZone {
    /// Nulls over every zone folded in.
    pub null_count: u64,
    range: Option<(Vec<u8>, Vec<u8>)>,
    unknown: bool,
}

impl ColumnZone {
    /// Folds in the zone of `null_count` nulls and value range `range`.
    pub fn add(&mut self, null_count: u64, range: Option<(&[u8], &[u8])>) {
        self.null_count += null_count;
        if self.unknown {
            return;
        }
        let Some((lo, hi)) = range else {
            self.unknown = true;
            self.range = None;
            return;
        };
        match &mut self.range {
            None => self.range = Some((lo.to_vec(), hi.to_vec())),
            Some((min, max)) => {
                if lo < min.as_slice() {
                    *min = lo.to_vec();
                }
                if hi > max.as_slice() {
                    *max = hi.to_vec();
                }
            }
        }
    }

    /// The smallest and largest value, zone-encoded; `None` when unknown or
    /// when nothing was folded in.
    pub fn range(&self) -> Option<(&[u8], &[u8])> {
        self.range.as_ref().map(|(min, max)| (min.as_slice(), max.as_slice()))
    }
}

/// Folds each column's zones over every block (`zones[block][column]`).
pub fn fold(zones: &[Vec<Zone>]) -> Vec<ColumnZone> {
    let columns = zones.first().map_or(0, Vec::len);
    let mut out = vec![ColumnZone::default(); columns];
    for block in zones {
        for (column, zone) in out.iter_mut().zip(block) {
            column.add(
                u64::from(zone.null_count),
                zone.range.as_ref().map(|(lo, hi)| (lo.as_slice(), hi.as_slice())),
            );
        }
    }
    out
}

/// The value a zone's bytes record for a column of `data_type`; `None` for
/// a NaN (no use as a bound) or bytes that are not such a value.
pub fn zone_value(data_type: &DataType, bytes: &[u8]) -> Option<OwnedKeyValue> {
    // Floats are in totalOrder (`zone_bytes_of`): undo its bit flips.
    match data_type {
        DataType::Float32 => {
            let ordered = u32::from_be_bytes(bytes.try_into().ok()?);
            let bits = if ordered >> 31 == 1 { ordered & !(1 << 31) } else { !ordered };
            let v = f32::from_bits(bits);
            (!v.is_nan()).then_some(OwnedKeyValue::F32(v))
        }
        DataType::Float64 => {
            let ordered = u64::from_be_bytes(bytes.try_into().ok()?);
            let bits = if ordered >> 63 == 1 { ordered & !(1 << 63) } else { !ordered };
            let v = f64::from_bits(bits);
            (!v.is_nan()).then_some(OwnedKeyValue::F64(v))
        }
        _ => key::decode(bytes, &[key_type_of(data_type)?]).ok()?.pop(),
    }
}

/// Whether some row of a block with these zones (one per stored column, in
/// layout order) may satisfy `filter`; false means the block can be skipped.
/// `floats_in_total_order` is false for files of format versions 1 and 2,
/// whose float zones are in the key codec's order: those are not used.
///
/// `layout` is the table's current layout, whose names the filter uses; a
/// block of a file written under an `older` schema version has that
/// version's zones, found by column id (a column the file lacks is not
/// ruled on).
pub fn may_match(
    layout: &TableLayout,
    older: Option<&super::evolve::OlderVersion>,
    zones: &[Zone],
    rows: usize,
    filter: &Filter,
    floats_in_total_order: bool,
) -> bool {
    filter.predicates.iter().all(|p| {
        let Ok(col) = layout.schema().index_of(&p.column) else { return true };
        match older {
            None => predicate_may_match(layout, col, zones, rows, p, floats_in_total_order),
            Some(older) => match older.map().origin(col) {
                super::evolve::Origin::Column(c) => {
                    predicate_may_match(&older.layout, *c, zones, rows, p, floats_in_total_order)
                }
                super::evolve::Origin::Fill(_) => true,
            },
        }
    })
}

fn predicate_may_match(
    layout: &TableLayout,
    col: usize,
    zones: &[Zone],
    rows: usize,
    p: &Predicate,
    floats_in_total_order: bool,
) -> bool {
    let Some(pos) = layout.stored().iter().position(|&c| c == col) else { return true };
    let data_type = layout.schema().field(col).data_type();
    if p.literal.data_type() != data_type {
        return true;
    }
    let float = matches!(data_type, DataType::Float32 | DataType::Float64);
    if float && !floats_in_total_order && !matches!(p.op, CmpOp::IsNull | CmpOp::IsNotNull) {
        return true;
    }
    let Some(zone) = zones.get(pos) else { return true };
    match p.op {
        CmpOp::IsNull => return zone.null_count > 0,
        CmpOp::IsNotNull => return (zone.null_count as usize) < rows,
        _ => {}
    }
    let Some((min, max)) = &zone.range else {
        // No recorded value: either all null (nothing matches a comparison)
        // or values too long to record (anything may match).
        return (zone.null_count as usize) < rows;
    };
    let Some((lo, hi)) = literal_keys(&p.literal, layout.columns()[col].width) else { return true };
    let (min, max) = (min.as_slice(), max.as_slice());
    let (lo, hi) = (lo.as_slice(), hi.as_slice());
    // The values equal to the literal, as SQL compares, are the zone keys
    // from `lo` to `hi`: one key, or -0.0 and 0.0 for a float zero.
    match p.op {
        CmpOp::Eq => min <= hi && lo <= max,
        CmpOp::NotEq => !(lo <= min && max <= hi),
        CmpOp::Lt => min < lo,
        CmpOp::LtEq => min <= hi,
        CmpOp::Gt => max > hi,
        CmpOp::GtEq => max >= lo,
        CmpOp::IsNull | CmpOp::IsNotNull => true,
    }
}

/// The smallest and largest zone keys of the values SQL holds equal to
/// `literal`: its own key twice, but -0.0 and 0.0 for a float zero (the
/// zones order floats totally, where -0.0 sorts just below 0.0).
fn literal_keys(literal: &ArrayRef, width: Width) -> Option<(Vec<u8>, Vec<u8>)> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    if literal.len() != 1 || literal.is_null(0) {
        return None;
    }
    let zero: Option<(ArrayRef, ArrayRef)> = match literal.data_type() {
        DataType::Float32 if literal.as_primitive::<Float32Type>().values().first() == Some(&0.0) => Some((
            std::sync::Arc::new(arrow_array::Float32Array::from(vec![-0.0_f32])),
            std::sync::Arc::new(arrow_array::Float32Array::from(vec![0.0_f32])),
        )),
        DataType::Float64 if literal.as_primitive::<Float64Type>().values().first() == Some(&0.0) => Some((
            std::sync::Arc::new(arrow_array::Float64Array::from(vec![-0.0_f64])),
            std::sync::Arc::new(arrow_array::Float64Array::from(vec![0.0_f64])),
        )),
        _ => None,
    };
    match zero {
        Some((negative, positive)) => Some((literal_key(&negative, width)?, literal_key(&positive, width)?)),
        None => literal_key(literal, width).map(|k| (k.clone(), k)),
    }
}

/// The zone encoding of a one-element literal ([`zone_bytes_of`]), or
/// `None` when it is null or not of the column's type.
fn literal_key(literal: &ArrayRef, width: Width) -> Option<Vec<u8>> {
    if literal.len() != 1 || literal.is_null(0) {
        return None;
    }
    let mut row = Vec::new();
    super::encode::value_bytes(literal, width, 0, &mut row).ok()?;
    let mut out = Vec::new();
    zone_bytes_of(literal.data_type(), &row, &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tracks the zone of one column while a block is built.
    #[derive(Debug, Clone, Default)]
    struct ZoneBuilder {
        zone: Zone,
        unbounded: bool,
        scratch: Vec<u8>,
    }

    impl ZoneBuilder {
        /// Records a null.
        fn null(&mut self) {
            self.zone.null_count += 1;
        }

        /// Records a value given as row bytes of `data_type`.
        fn value(&mut self, data_type: &DataType, bytes: &[u8]) {
            if self.unbounded {
                return;
            }
            if bytes.len() > RANGE_VALUE_BYTES_MAX {
                self.unbounded = true;
                self.zone.range = None;
                return;
            }
            self.scratch.clear();
            zone_bytes_of(data_type, bytes, &mut self.scratch);
            match &mut self.zone.range {
                None => self.zone.range = Some((self.scratch.clone(), self.scratch.clone())),
                Some((min, max)) => {
                    if self.scratch < *min {
                        min.clone_from(&self.scratch);
                    }
                    if self.scratch > *max {
                        max.clone_from(&self.scratch);
                    }
                }
            }
        }

        /// The zone so far; the builder starts over.
        fn finish(&mut self) -> Zone {
            let z = std::mem::take(&mut self.zone);
            self.unbounded = false;
            z
        }
    }

    /// The zone as it was computed before `zone_of` compared values
    /// without encoding them: every value encoded, the encodings compared.
    fn reference_zone_of(builder: &super::super::decode::ColumnBuilder) -> Zone {
        let mut z = ZoneBuilder::default();
        let data_type = builder.field().data_type().clone();
        let ranged = !matches!(data_type, DataType::Decimal128(_, _));
        let mut scratch = [0u8; 1];
        for i in 0..builder.len() {
            match builder.value_at(i, &mut scratch) {
                None => z.null(),
                Some(v) if ranged => z.value(&data_type, v),
                Some(_) => z.unbounded = true,
            }
        }
        let mut zone = z.finish();
        if !ranged {
            zone.range = None;
        }
        zone
    }

    /// `zone_of` compares values without encoding them; over every
    /// supported type, random blocks of edge and random values, nulls and
    /// values too long to record, it gives exactly the zone that encoding
    /// every value gave. Prints the seed of a failing block.
    #[test]
    fn zones_equal_the_encoded_reference() {
        use super::super::decode::ColumnBuilder;
        use super::super::layout::width_of;
        use arrow_schema::{Field, TimeUnit};
        use rand::{Rng, SeedableRng};
        use std::sync::Arc;

        let types = [
            DataType::Boolean,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::UInt8,
            DataType::UInt16,
            DataType::UInt32,
            DataType::UInt64,
            DataType::Float32,
            DataType::Float64,
            DataType::Date32,
            DataType::Date64,
            DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Decimal128(20, 3),
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Binary,
            DataType::LargeBinary,
        ];
        let mut seeds = rand::rngs::StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        for case in 0..4000u64 {
            let seed: u64 = seeds.random();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut rand = move || rng.random::<u64>();
            let data_type = &types[(seed % types.len() as u64) as usize];
            let width = width_of(data_type).expect("supported");
            let mut builder = ColumnBuilder::new(Arc::new(Field::new("c", data_type.clone(), true)), width);
            let rows = 1 + rand() % 40;
            for _ in 0..rows {
                let r = rand();
                if r % 7 == 0 {
                    builder.push_null();
                    continue;
                }
                let value: Vec<u8> = match width {
                    Width::Bool => vec![u8::from(r % 2 == 0)],
                    Width::Fixed(w) => {
                        // Edges (0, all ones, sign bits, NaNs, infinities)
                        // half the time.
                        let bits: u128 = match (r >> 8) % 8 {
                            0 => 0,
                            1 => u128::MAX,
                            2 => 1u128 << (8 * w - 1),
                            3 => (1u128 << (8 * w - 1)) - 1,
                            _ => u128::from(rand()) | u128::from(rand()) << 64,
                        };
                        bits.to_le_bytes()[..w].to_vec()
                    }
                    Width::Var32 | Width::Var64 => {
                        let len = match (r >> 8) % 6 {
                            0 => 0,
                            1 => 64 + (r >> 16) as usize % 3,
                            _ => (r >> 16) as usize % 12,
                        };
                        // Small alphabets with zero bytes, so values share
                        // prefixes and hold what the codec escapes; strings
                        // stay UTF-8, as Arrow's string arrays are.
                        let text = matches!(data_type, DataType::Utf8 | DataType::LargeUtf8);
                        let alphabet: &[u8; 8] = if text { b"\0\x01ab\x7fc\0z" } else { b"\0\x01ab\xffc\0z" };
                        (0..len).map(|_| alphabet[(rand() % 8) as usize]).collect()
                    }
                };
                builder.push(&value);
            }
            assert_eq!(
                zone_of(&builder),
                reference_zone_of(&builder),
                "case {case}, seed {seed:#x}: {data_type} block of {rows} rows"
            );
        }
    }

    #[test]
    fn zones_round_trip() {
        let zones = vec![
            vec![Zone { null_count: 2, range: Some((vec![1, 2], vec![9])) }, Zone::default()],
            vec![
                Zone { null_count: 0, range: None },
                Zone { null_count: 7, range: Some((vec![], vec![0xff])) },
            ],
        ];
        let bytes = encode(&zones, 2);
        assert_eq!(decode(&bytes, Path::new("z"), 0, 2).expect("valid"), zones);
        assert!(decode(&bytes, Path::new("z"), 0, 3).is_err());
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], Path::new("z"), 0, 2).is_err());
        }
    }

    /// The outside review's bug 3, over every float class: a zone built
    /// from a block's values never rules out a block in which Arrow's own
    /// kernels select a row (the version 2 zones ruled out `[-NaN, 1.0]`
    /// for `x < 0.5`). Both float widths, both NaN signs, a NaN payload,
    /// ±0.0, ±inf, a subnormal, the extremes.
    #[test]
    fn float_zones_agree_with_arrow_kernels() {
        use arrow_array::{Float32Array, Float64Array, RecordBatch};
        use arrow_schema::{Field, Schema};
        use std::sync::Arc;

        let specials = [
            f64::from_bits(0xfff8_0000_0000_0000),
            f64::from_bits(0x7ff8_0000_0000_0000),
            f64::from_bits(0xfff0_0000_0000_0001),
            f64::NEG_INFINITY,
            f64::INFINITY,
            -0.0,
            0.0,
            f64::MIN_POSITIVE / 4.0,
            -1.5,
            0.5,
            1.0,
            f64::MAX,
            f64::MIN,
        ];
        let ops = [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq];
        for wide in [true, false] {
            let data_type = if wide { DataType::Float64 } else { DataType::Float32 };
            let array = |v: &[f64]| -> ArrayRef {
                if wide {
                    Arc::new(Float64Array::from(v.to_vec()))
                } else {
                    Arc::new(Float32Array::from(v.iter().map(|&x| x as f32).collect::<Vec<_>>()))
                }
            };
            let schema = Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("x", data_type.clone(), false),
            ]));
            let layout = TableLayout::new(schema.clone(), &[0]).expect("layout");
            // Every block of one or two special values.
            for (i, &a) in specials.iter().enumerate() {
                for &b in &specials[i..] {
                    let values = array(&[a, b]);
                    let mut builder = super::super::decode::ColumnBuilder::new(
                        Arc::new(Field::new("x", data_type.clone(), false)),
                        Width::Fixed(if wide { 8 } else { 4 }),
                    );
                    for row in 0..2 {
                        let mut bytes = Vec::new();
                        super::super::encode::value_bytes(
                            &values,
                            Width::Fixed(if wide { 8 } else { 4 }),
                            row,
                            &mut bytes,
                        )
                        .expect("bytes");
                        builder.push(&bytes);
                    }
                    let zones = vec![Zone::default(), zone_of(&builder)];
                    let ids: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
                    let batch = RecordBatch::try_new(schema.clone(), vec![ids, values]).expect("batch");
                    for &lit in &specials {
                        for op in ops {
                            let filter = Filter::all(vec![Predicate::new("x", op, array(&[lit]))]);
                            let selected = filter.evaluate(&batch).expect("evaluate").true_count();
                            let may = may_match(&layout, None, &zones, 2, &filter, true);
                            assert!(
                                may || selected == 0,
                                "{data_type} block [{a:e}, {b:e}] ruled out for x {op:?} {lit:e}, \
                                 which Arrow selects in {selected} rows"
                            );
                        }
                    }
                }
            }
        }
    }
}
