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

use super::filter::{CmpOp, Filter, Predicate};
use super::layout::{TableLayout, Width, key_bytes_of};
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

/// Tracks the zone of one column while a block is built.
#[derive(Debug, Clone, Default)]
pub struct ZoneBuilder {
    zone: Zone,
    unbounded: bool,
    scratch: Vec<u8>,
}

impl ZoneBuilder {
    /// Records a null.
    pub fn null(&mut self) {
        self.zone.null_count += 1;
    }

    /// Records a value given as row bytes of `data_type`.
    pub fn value(&mut self, data_type: &DataType, bytes: &[u8]) {
        if self.unbounded {
            return;
        }
        if bytes.len() > RANGE_VALUE_BYTES_MAX {
            self.unbounded = true;
            self.zone.range = None;
            return;
        }
        self.scratch.clear();
        key_bytes_of(data_type, bytes, &mut self.scratch);
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
    pub fn finish(&mut self) -> Zone {
        let z = std::mem::take(&mut self.zone);
        self.unbounded = false;
        z
    }
}

/// The zone of a column builder's current contents.
pub fn zone_of(builder: &super::layout::ColumnBuilder) -> Zone {
    let mut z = ZoneBuilder::default();
    let data_type = builder.field().data_type().clone();
    // Decimal128's row bytes have no key encoding: record nulls only.
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
    if count != blocks || columns > 1000 {
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

/// Whether some row of a block with these zones (one per stored column, in
/// layout order) may satisfy `filter`; false means the block can be skipped.
pub fn may_match(layout: &TableLayout, zones: &[Zone], rows: usize, filter: &Filter) -> bool {
    filter.predicates.iter().all(|p| predicate_may_match(layout, zones, rows, p))
}

fn predicate_may_match(layout: &TableLayout, zones: &[Zone], rows: usize, p: &Predicate) -> bool {
    let Ok(col) = layout.schema().index_of(&p.column) else { return true };
    let Some(pos) = layout.stored().iter().position(|&c| c == col) else { return true };
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
    let Some(lit) = literal_key(&p.literal, layout.columns()[col].width) else { return true };
    let (min, max) = (min.as_slice(), max.as_slice());
    let lit = lit.as_slice();
    match p.op {
        CmpOp::Eq => min <= lit && lit <= max,
        CmpOp::NotEq => !(min == lit && max == lit),
        CmpOp::Lt => min < lit,
        CmpOp::LtEq => min <= lit,
        CmpOp::Gt => max > lit,
        CmpOp::GtEq => max >= lit,
        CmpOp::IsNull | CmpOp::IsNotNull => true,
    }
}

/// The key encoding of a one-element literal, or `None` where zone pruning
/// must not be trusted (float zero and NaN, whose order differs between the
/// key codec and Arrow's comparison kernels).
fn literal_key(literal: &ArrayRef, width: Width) -> Option<Vec<u8>> {
    if literal.len() != 1 || literal.is_null(0) {
        return None;
    }
    let mut row = Vec::new();
    super::layout::value_bytes(literal, width, 0, &mut row).ok()?;
    match literal.data_type() {
        DataType::Float32 | DataType::Float64 => {
            let v = if row.len() == 4 {
                f64::from(f32::from_le_bytes([row[0], row[1], row[2], row[3]]))
            } else {
                let mut a = [0u8; 8];
                a.copy_from_slice(&row[..8]);
                f64::from_le_bytes(a)
            };
            if v == 0.0 || v.is_nan() {
                return None;
            }
        }
        _ => {}
    }
    let mut out = Vec::new();
    key_bytes_of(literal.data_type(), &row, &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
