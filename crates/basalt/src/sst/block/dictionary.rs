//! String and binary columns of table blocks stored as a dictionary: the
//! block's distinct values once, and each row as a code into them, in as
//! few bits as the dictionary's size needs. A column of airport codes or
//! carriers (a few distinct values in a block of hundreds of rows) takes a
//! few bits a row instead of its bytes and a 4-byte offset.
//!
//! Hand-written because it is part of the block format (docs/format.md,
//! "Dictionary columns"): a point read finds one value in place (its code,
//! then two dictionary offsets), a scan decodes the column into a plain
//! Arrow array once per cached block.
//!
//! A dictionary column keeps its three buffers: validity as before; the
//! offsets buffer, which holds Arrow offsets (starting with a zero byte)
//! in a plain column, holds the header and the dictionary's offsets; the
//! values buffer holds the dictionary's bytes, zero padding to a multiple
//! of 8, then the codes.
//!
//! ```text
//! offsets := tag: u8 (2) | bits: u8 (0..=16) | 2 zero bytes | entries: u32 LE (1..=65,536)
//!          | decoded: u64 LE (bytes of the rows' values, nulls 0)
//!          | (entries + 1) dictionary offsets: u32 LE, from 0, never falling
//! values  := dictionary bytes | zero padding to a multiple of 8
//!          | codes: row r's code in bits [r * bits, (r + 1) * bits), least significant first;
//!            ceil(rows * bits / 8) bytes
//! ```
//!
//! A null row's code is 0. Every code must be below `entries`: a larger
//! one is corruption, found by the point read or the scan that meets it.

use std::collections::HashMap;

use arrow_buffer::Buffer;

use super::packed::{get_bits, put_bits};

/// Bytes of the fixed part of the header.
pub const HEADER_BYTES: usize = 16;
/// The header's first byte. A plain offsets buffer starts with offset 0,
/// whose first byte is 0; a packed integer column's with 1.
pub const TAG_DICTIONARY: u8 = 2;
/// Most entries a dictionary holds: codes of up to 16 bits. Larger
/// dictionaries save too little over the plain column to pay for the
/// extra lookup.
const ENTRIES_MAX: usize = 1 << 16;

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn bits_for(entries: usize) -> usize {
    (usize::BITS - entries.saturating_sub(1).leading_zeros()) as usize
}

/// The offsets and values buffers of a variable-width column of `rows`
/// values (Arrow `offsets`, i32 LE, and `values`) stored as a dictionary,
/// when that takes at most three quarters of the plain bytes.
pub fn encode(
    offsets: &[u8],
    values: &[u8],
    rows: usize,
    is_null: impl Fn(usize) -> bool,
) -> Option<(Vec<u8>, Vec<u8>)> {
    if rows == 0 || offsets.len() != 4 * (rows + 1) {
        return None;
    }
    let plain_bytes = offsets.len() + values.len();
    let offset =
        |r: usize| u32::from_le_bytes(offsets[4 * r..4 * r + 4].try_into().unwrap_or_default()) as usize;
    let mut codes: Vec<u32> = Vec::with_capacity(rows);
    let mut index: HashMap<&[u8], u32> = HashMap::new();
    let mut entries: Vec<&[u8]> = Vec::new();
    let mut entry_bytes = 0;
    for r in 0..rows {
        if is_null(r) {
            codes.push(0);
            continue;
        }
        let value = values.get(offset(r)..offset(r + 1))?;
        let code = *index.entry(value).or_insert_with(|| {
            entries.push(value);
            entry_bytes += value.len();
            (entries.len() - 1) as u32
        });
        codes.push(code);
        // Give up as soon as the dictionary alone outgrows the budget.
        if entries.len() > ENTRIES_MAX || 4 * entries.len() + entry_bytes > plain_bytes * 3 / 4 {
            return None;
        }
    }
    if entries.is_empty() {
        // Every row null: one empty entry keeps the shape uniform.
        entries.push(&[]);
    }
    let bits = bits_for(entries.len());
    let code_bytes = (rows * bits).div_ceil(8);
    let header_bytes = HEADER_BYTES + 4 * (entries.len() + 1);
    if header_bytes + align8(entry_bytes) + code_bytes > plain_bytes * 3 / 4 {
        return None;
    }
    let decoded = offset(rows) - offset(0);
    let mut header = Vec::with_capacity(header_bytes);
    header.extend_from_slice(&[TAG_DICTIONARY, bits as u8, 0, 0]);
    header.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    header.extend_from_slice(&(decoded as u64).to_le_bytes());
    let mut at = 0u32;
    header.extend_from_slice(&at.to_le_bytes());
    let mut out = Vec::with_capacity(align8(entry_bytes) + code_bytes);
    for e in &entries {
        out.extend_from_slice(e);
        at += e.len() as u32;
        header.extend_from_slice(&at.to_le_bytes());
    }
    out.resize(align8(out.len()), 0);
    let codes_at = out.len();
    out.resize(codes_at + code_bytes, 0);
    if bits > 0 {
        for (r, &code) in codes.iter().enumerate() {
            put_bits(&mut out[codes_at..], r * bits, bits, u64::from(code));
        }
    }
    Some((header, out))
}

/// A dictionary column's header, checked against its buffers' sizes. The
/// dictionary offsets and the codes are checked where they are read.
#[derive(Debug, Clone, Copy)]
pub struct Dictionary<'a> {
    bits: usize,
    entries: usize,
    decoded: u64,
    /// The dictionary offsets (`entries + 1` u32 LE).
    offsets: &'a [u8],
    /// The dictionary's bytes.
    bytes: &'a [u8],
    /// The codes.
    codes: &'a [u8],
}

impl<'a> Dictionary<'a> {
    /// Whether an offsets buffer holds a dictionary header rather than
    /// Arrow offsets.
    pub fn is_dictionary(offsets: &[u8]) -> bool {
        offsets.first() == Some(&TAG_DICTIONARY)
    }

    /// Reads and checks the header in `offsets` against `values`, for a
    /// block of `rows` rows.
    pub fn read(offsets: &'a [u8], values: &'a [u8], rows: usize) -> Result<Dictionary<'a>, String> {
        let Some((fixed, dict_offsets)) = offsets.split_first_chunk::<HEADER_BYTES>() else {
            return Err(format!("dictionary header of {} bytes", offsets.len()));
        };
        let bits = usize::from(fixed[1]);
        let entries = u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]) as usize;
        let decoded = u64::from_le_bytes(fixed[8..16].try_into().unwrap_or_default());
        if fixed[0] != TAG_DICTIONARY || fixed[2..4] != [0, 0] {
            return Err(format!("dictionary header with tag {} and padding {:?}", fixed[0], &fixed[2..4]));
        }
        if entries == 0 || entries > ENTRIES_MAX || bits != bits_for(entries) {
            return Err(format!("dictionary of {entries} entries with {bits}-bit codes"));
        }
        if dict_offsets.len() != 4 * (entries + 1) {
            return Err(format!(
                "dictionary of {entries} entries with {} bytes of offsets",
                dict_offsets.len()
            ));
        }
        let end = u32::from_le_bytes(dict_offsets[4 * entries..].try_into().unwrap_or_default()) as usize;
        let code_bytes = (rows * bits).div_ceil(8);
        if align8(end).checked_add(code_bytes) != Some(values.len()) {
            return Err(format!(
                "dictionary of {end} bytes and {rows} codes of {bits} bits in a buffer of {}",
                values.len()
            ));
        }
        Ok(Dictionary {
            bits,
            entries,
            decoded,
            offsets: dict_offsets,
            bytes: &values[..end],
            codes: &values[align8(end)..],
        })
    }

    /// Bytes the rows' values take decoded (as the header states it: only
    /// a charge for the cache until the column is decoded and checked).
    pub fn decoded_bytes(&self) -> u64 {
        self.decoded
    }

    fn code(&self, r: usize) -> usize {
        if self.bits == 0 { 0 } else { get_bits(self.codes, r * self.bits, self.bits) as usize }
    }

    fn entry(&self, code: usize) -> Result<&'a [u8], String> {
        let at = |i: usize| {
            self.offsets
                .get(4 * i..4 * i + 4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
        };
        if code >= self.entries {
            return Err(format!("dictionary code {code} of {} entries", self.entries));
        }
        match (at(code), at(code + 1)) {
            (Some(start), Some(end)) if start <= end => self
                .bytes
                .get(start..end)
                .ok_or_else(|| format!("dictionary entry {code} past the dictionary")),
            _ => Err(format!("dictionary entry {code} has offsets out of order")),
        }
    }

    /// Row `r`'s value (not for a null row, whose code means nothing).
    pub fn value(&self, r: usize) -> Result<&'a [u8], String> {
        self.entry(self.code(r))
    }

    /// The column decoded: Arrow offsets (i32 LE) and values of `rows`
    /// rows, null rows empty. Every code is checked, and the decoded size
    /// must be the header's.
    pub fn decode(&self, rows: usize, is_null: impl Fn(usize) -> bool) -> Result<(Buffer, Buffer), String> {
        let capacity = usize::try_from(self.decoded)
            .ok()
            .filter(|&n| n <= self.bytes.len().saturating_mul(rows.max(1)))
            .ok_or_else(|| format!("dictionary column claims {} decoded bytes", self.decoded))?;
        if capacity > i32::MAX as usize {
            return Err(format!("dictionary column of {capacity} decoded bytes"));
        }
        let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
        // A damaged (or crafted) header may claim up to 2 GiB that a few
        // hundred bytes of codes really decode to: reserved fallibly, so
        // that it fails the read instead of aborting the process.
        let mut values: Vec<u8> = Vec::new();
        values
            .try_reserve_exact(capacity)
            .map_err(|_| format!("dictionary column of {capacity} decoded bytes cannot be allocated"))?;
        offsets.push(0);
        for r in 0..rows {
            if !is_null(r) {
                let value = self.value(r)?;
                if values.len() + value.len() > capacity {
                    return Err(format!("dictionary column decodes past its {capacity} bytes"));
                }
                values.extend_from_slice(value);
            }
            offsets.push(values.len() as i32);
        }
        if values.len() != capacity {
            return Err(format!("dictionary column decodes to {} bytes, not {capacity}", values.len()));
        }
        Ok((Buffer::from_vec(offsets), Buffer::from_vec(values)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(values: &[Option<&[u8]>]) -> (Vec<u8>, Vec<u8>) {
        let mut offsets = 0i32.to_le_bytes().to_vec();
        let mut data = Vec::new();
        for v in values {
            data.extend_from_slice(v.unwrap_or_default());
            offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
        }
        (offsets, data)
    }

    /// Random columns over every shape a block meets (one value, a few, all
    /// distinct, empty strings, NUL bytes, long values, all null), encoded
    /// then read back one by one and whole: the values given. Prints the
    /// seed of a failing column.
    #[test]
    fn dictionary_columns_read_back_exactly() {
        use rand::{Rng, SeedableRng};
        let mut seeds = rand::rngs::StdRng::seed_from_u64(0x5eed_d1c7);
        let mut encoded_cases = 0;
        for case in 0..3000 {
            let seed: u64 = seeds.random();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let rows = 1 + rng.random_range(0..400usize);
            let distinct = [1, 2, 3, 17, 300, 5000][rng.random_range(0..6usize)];
            let long = rng.random_bool(0.1);
            let pool: Vec<Vec<u8>> = (0..distinct)
                .map(|i| match i % 5 {
                    0 => Vec::new(),
                    1 => vec![0u8; 1 + i % 3],
                    _ if long => vec![b'x'; 500 + i],
                    _ => format!("v{i}\0{}", i * 7).into_bytes(),
                })
                .collect();
            let null_share = [0.0, 0.2, 1.0][rng.random_range(0..3usize)];
            let column: Vec<Option<&[u8]>> = (0..rows)
                .map(|_| (!rng.random_bool(null_share)).then(|| &pool[rng.random_range(0..distinct)][..]))
                .collect();
            let (offsets, data) = plain(&column);
            let Some((header, values)) = encode(&offsets, &data, rows, |r| column[r].is_none()) else {
                continue;
            };
            encoded_cases += 1;
            assert!(header.len() + values.len() <= (offsets.len() + data.len()) * 3 / 4);
            let dict =
                Dictionary::read(&header, &values, rows).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
            let (dec_offsets, dec_values) =
                dict.decode(rows, |r| column[r].is_none()).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
            assert_eq!(&dec_offsets[..], &offsets[..], "case {case}, seed {seed:#x}");
            assert_eq!(&dec_values[..], &data[..], "case {case}, seed {seed:#x}");
            for (r, v) in column.iter().enumerate() {
                if let Some(v) = v {
                    assert_eq!(dict.value(r).expect("value"), *v, "case {case}, seed {seed:#x}, row {r}");
                }
            }
        }
        assert!(encoded_cases > 1000, "only {encoded_cases} columns took a dictionary");
    }

    /// A column of rows, `None` for a null.
    type Column = Vec<Option<&'static [u8]>>;

    fn sample() -> (Vec<u8>, Vec<u8>, Column) {
        let column: Vec<Option<&[u8]>> = (0..64)
            .map(|i| if i % 9 == 0 { None } else { Some(&b"JFKLGAEWR"[3 * (i % 3)..3 * (i % 3) + 3]) })
            .collect();
        let (offsets, data) = plain(&column);
        let (header, values) = encode(&offsets, &data, 64, |r| column[r].is_none()).expect("encodes");
        (header, values, column)
    }

    /// The mutation check: a code past the dictionary, offsets out of
    /// order or past its bytes, a wrong decoded size, a wrong tag, bit
    /// width or length: each refused, never a wrong value.
    #[test]
    fn damaged_dictionaries_are_refused() {
        let (header, values, column) = sample();
        let nulls = |r: usize| column[r].is_none();
        assert!(Dictionary::read(&header, &values, 64).is_ok());
        // Three entries, two-bit codes: code 3 is past the dictionary
        // (row 1's; row 0 is null).
        let codes_at = values.len() - (64 * 2usize).div_ceil(8);
        let mut bad = values.clone();
        bad[codes_at] |= 0b1100;
        let dict = Dictionary::read(&header, &bad, 64).expect("the header is intact");
        assert!(dict.value(1).expect_err("code 3").contains("code 3"));
        assert!(dict.decode(64, nulls).is_err());
        for (at, byte) in [(0, 1), (1, 7), (2, 1), (4, 0), (4, 9), (8, 1), (16, 1), (20, 200)] {
            let mut bad = header.clone();
            bad[at] = byte;
            let refused = Dictionary::read(&bad, &values, 64).map_or(true, |d| d.decode(64, nulls).is_err());
            assert!(refused, "header byte {at} = {byte}");
        }
        assert!(Dictionary::read(&header[..HEADER_BYTES + 4], &values, 64).is_err());
        assert!(Dictionary::read(&header, &values[..values.len() - 1], 64).is_err());
        assert!(Dictionary::read(&header, &values, 65).is_err());
        // Entry offsets that fall: reading entry 1 fails.
        let mut bad = header.clone();
        bad[HEADER_BYTES + 4..HEADER_BYTES + 8].copy_from_slice(&9u32.to_le_bytes());
        let dict = Dictionary::read(&bad, &values, 64).expect("only the end is checked up front");
        assert!(dict.decode(64, nulls).is_err());
    }
}
