//! Integer columns of table blocks stored packed: each value as its
//! distance from the block's smallest value (frame of reference), in as
//! many bits as the largest distance needs (bit packing). A column of
//! months takes 4 bits a row instead of 64, a column of one value none.
//!
//! Hand-written because it is part of the block format (docs/format.md,
//! "Packed integer columns"): a point read unpacks one value in place, a
//! scan unpacks the column into an Arrow buffer once per cached block.
//!
//! A packed column keeps its three buffers: validity as before; the
//! offsets buffer, always empty for a fixed-width column in a plain block,
//! holds the 16-byte header below; the values buffer holds the bits.
//!
//! ```text
//! header := tag: u8 (1) | bits: u8 (0..=64) | width: u8 (1, 2, 4, 8) | 5 zero bytes | reference: u64 LE
//! values := row r's distance in bits [r * bits, (r + 1) * bits), least significant first;
//!           ceil(rows * bits / 8) bytes
//! ```
//!
//! Values are compared as `u64`s ordered as the integers are: unsigned
//! ones as they are, signed ones sign-extended with the sign bit flipped.
//! `reference` is the smallest non-null value so mapped; a null row's
//! distance is 0.

use arrow_buffer::Buffer;

use crate::row::zone::OrderKey;

/// Bytes of a packed column's header (its offsets buffer).
pub const HEADER_BYTES: usize = 16;
const TAG_PACKED: u8 = 1;

/// A fixed-width integer column's width and signedness, as packing needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntColumn {
    /// Bytes per value: 1, 2, 4 or 8.
    pub width: usize,
    pub signed: bool,
}

impl IntColumn {
    /// The packing of a column of `data_type`, if it is an integer type
    /// (dates and timestamps are their integers).
    pub fn of(data_type: &arrow_schema::DataType) -> Option<IntColumn> {
        match OrderKey::of(data_type)? {
            OrderKey::Signed(width) => Some(IntColumn { width, signed: true }),
            OrderKey::Unsigned(width) => Some(IntColumn { width, signed: false }),
            OrderKey::Bool | OrderKey::Float32 | OrderKey::Float64 => None,
        }
    }

    /// The `u64` a value's little-endian bytes map to, ordered as the
    /// values: the zone maps' order key.
    fn ordered(self, le: &[u8]) -> u64 {
        let key = if self.signed { OrderKey::Signed(self.width) } else { OrderKey::Unsigned(self.width) };
        key.key(le)
    }

    /// The little-endian bytes of the value an ordered `u64` stands for
    /// (its first `width` bytes).
    fn value_bytes(self, ordered: u64) -> [u8; 8] {
        let raw = if self.signed { ordered ^ (1 << 63) } else { ordered };
        raw.to_le_bytes()
    }
}

/// The header and bits of a column of `rows` values (`values`, `width`
/// bytes each; `is_null(r)` for the rows whose bytes mean nothing), when
/// packing takes at most three quarters of the plain bytes.
pub fn pack(
    column: IntColumn,
    values: &[u8],
    rows: usize,
    is_null: impl Fn(usize) -> bool,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let w = column.width;
    if rows == 0 || values.len() != rows * w {
        return None;
    }
    // Each value mapped once; a null row takes the smallest value's place.
    let mut ordered: Vec<u64> = values.chunks_exact(w).map(|v| column.ordered(v)).collect();
    let mut range: Option<(u64, u64)> = None;
    for (r, &v) in ordered.iter().enumerate() {
        if !is_null(r) {
            range = Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
        }
    }
    let (reference, top) = range.unwrap_or((0, 0));
    let bits = 64 - (top - reference).leading_zeros() as usize;
    let packed_bytes = (rows * bits).div_ceil(8);
    if HEADER_BYTES + packed_bytes > rows * w * 3 / 4 {
        return None;
    }
    let mut header = vec![TAG_PACKED, bits as u8, w as u8, 0, 0, 0, 0, 0];
    header.extend_from_slice(&reference.to_le_bytes());
    for (r, v) in ordered.iter_mut().enumerate() {
        *v = if is_null(r) { 0 } else { *v - reference };
    }
    // Every distance fits the bits chosen: a wider one would spill into
    // its neighbour's bits, a silently wrong value on reading.
    debug_assert!(bits <= 64, "{bits} bits for a 64-bit value");
    debug_assert!(
        ordered.iter().all(|&d| bits == 64 || d >> bits == 0),
        "a distance does not fit {bits} bits"
    );
    // Eight bytes of slack, so that every value is one unaligned 8-byte
    // read-modify-write (up to 57 bits fit one from the value's first
    // byte); cut off at the end.
    let mut packed = vec![0u8; packed_bytes + 8];
    if bits > 57 {
        for (r, &distance) in ordered.iter().enumerate() {
            put_bits(&mut packed, r * bits, bits, distance);
        }
    } else if bits > 0 {
        for (r, &distance) in ordered.iter().enumerate() {
            let at = r * bits;
            let start = at / 8;
            let mut word = [0u8; 8];
            word.copy_from_slice(&packed[start..start + 8]);
            let merged = u64::from_le_bytes(word) | distance << (at % 8);
            packed[start..start + 8].copy_from_slice(&merged.to_le_bytes());
        }
    }
    packed.truncate(packed_bytes);
    Some((header, packed))
}

/// A packed column's header, checked against the column and its values
/// buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packed {
    column: IntColumn,
    bits: usize,
    reference: u64,
}

impl Packed {
    /// Reads and checks a header: its tag, width, zero padding and that
    /// `packed_len` bytes hold `rows` values of its bits.
    pub fn read(header: &[u8], column: IntColumn, rows: usize, packed_len: usize) -> Result<Packed, String> {
        if header.len() != HEADER_BYTES {
            return Err(format!("packed column header of {} bytes, not {HEADER_BYTES}", header.len()));
        }
        if header[0] != TAG_PACKED || header[3..8] != [0; 5] {
            return Err(format!(
                "packed column header with tag {} and padding {:?}",
                header[0],
                &header[3..8]
            ));
        }
        let bits = usize::from(header[1]);
        if usize::from(header[2]) != column.width || bits > 8 * column.width {
            return Err(format!(
                "packed column of {bits} bits for {}-byte values in a {}-byte column",
                header[2], column.width
            ));
        }
        if packed_len != (rows * bits).div_ceil(8) {
            return Err(format!("packed column of {packed_len} bytes for {rows} values of {bits} bits"));
        }
        let mut reference = [0u8; 8];
        reference.copy_from_slice(&header[8..16]);
        Ok(Packed { column, bits, reference: u64::from_le_bytes(reference) })
    }

    /// The little-endian bytes of row `r` (the first `width` of them).
    /// `packed` must be the buffer `read` checked.
    pub fn value(&self, packed: &[u8], r: usize) -> [u8; 8] {
        let distance = if self.bits == 0 { 0 } else { get_bits(packed, r * self.bits, self.bits) };
        self.column.value_bytes(self.reference.wrapping_add(distance))
    }

    /// Every row's plain little-endian values, `width` bytes each: the
    /// values buffer of the plain column. A scan unpacks a column through
    /// this once per cached block: one unaligned 8-byte load per value,
    /// written as the column's native integer.
    pub fn unpack(&self, packed: &[u8], rows: usize) -> Buffer {
        // Truncating casts: a value of a `w`-byte column fits `w` bytes.
        match self.column.width {
            1 => Buffer::from_vec(self.unpack_as(packed, rows, |v| v as u8)),
            2 => Buffer::from_vec(self.unpack_as(packed, rows, |v| v as u16)),
            4 => Buffer::from_vec(self.unpack_as(packed, rows, |v| v as u32)),
            _ => Buffer::from_vec(self.unpack_as(packed, rows, |v| v)),
        }
    }

    fn unpack_as<T>(&self, packed: &[u8], rows: usize, native: impl Fn(u64) -> T) -> Vec<T> {
        // Copies in locals, and `move` closures: captured by reference,
        // the reference, mask and bit count were loaded again for every
        // value (the output's writes might alias them), ~25 instructions
        // a value and 40 % of a scan of blocks the cache had dropped.
        let (reference, bits) = (self.reference, self.bits);
        let flip = if self.column.signed { 1u64 << 63 } else { 0 };
        if bits == 0 {
            return (0..rows).map(|_| native(reference ^ flip)).collect();
        }
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        if bits <= 32 {
            return unpack_streaming(packed, rows, bits, mask, move |d| {
                native(reference.wrapping_add(d) ^ flip)
            });
        }
        // Up to 57 bits lie within the 8 bytes from a value's first byte:
        // rows up to `fast` take one 8-byte load each; wider values, and
        // those too near the buffer's end for the load, take `get_bits`.
        let fast = if bits <= 57 && packed.len() >= 8 { ((packed.len() - 8) * 8 + 7) / bits + 1 } else { 0 };
        let fast = fast.min(rows);
        let native = &native;
        // Room for every row up front: a `collect` of the fast rows sized
        // the vector to them, and the rest moved it (5 % of such a scan).
        let mut out = Vec::with_capacity(rows);
        out.extend((0..fast).map(move |r| {
            let at = r * bits;
            let distance = match packed.get(at / 8..).and_then(<[u8]>::first_chunk::<8>) {
                Some(word) => (u64::from_le_bytes(*word) >> (at % 8)) & mask,
                None => get_bits(packed, at, bits),
            };
            native(reference.wrapping_add(distance) ^ flip)
        }));
        out.extend(
            (fast..rows)
                .map(move |r| native(reference.wrapping_add(get_bits(packed, r * bits, bits)) ^ flip)),
        );
        out
    }
}

/// Values of 1 to 32 `bits` (`mask` their low bits) read in order through
/// a 64-bit window refilled 4 bytes at a time, each handed to `value`:
/// no per-value address or bounds check, where a load per value at its
/// own byte took twice the instructions. Rows whose bits run into the
/// last, partial word take `get_bits`.
fn unpack_streaming<T>(
    packed: &[u8],
    rows: usize,
    bits: usize,
    mask: u64,
    value: impl Fn(u64) -> T,
) -> Vec<T> {
    let mut words = packed.chunks_exact(4);
    let whole_rows = (32 * (packed.len() / 4) / bits).min(rows);
    let value = &value;
    let mut out = Vec::with_capacity(rows);
    // `window` holds the next `held` unread bits at its bottom; a refill
    // comes only when fewer than `bits` are held (< 32), so the new word
    // fits above them. The words last to the end of `whole_rows`.
    let (mut window, mut held) = (0u64, 0usize);
    out.extend((0..whole_rows).map(move |_| {
        if held < bits {
            let word = words.next().map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            window |= u64::from(word) << held;
            held += 32;
        }
        let distance = window & mask;
        window >>= bits;
        held -= bits;
        value(distance)
    }));
    out.extend((whole_rows..rows).map(move |r| value(get_bits(packed, r * bits, bits))));
    out
}

/// Writes the low `bits` of `v` at bit `at` of `buf` (least significant
/// bit first), into bits that are zero.
pub(super) fn put_bits(buf: &mut [u8], at: usize, bits: usize, v: u64) {
    let mut v = u128::from(v) << (at % 8);
    let mut byte = at / 8;
    let end = (at + bits).div_ceil(8);
    while byte < end {
        buf[byte] |= v as u8;
        v >>= 8;
        byte += 1;
    }
}

/// The `bits` (1..=64) at bit `at` of `buf`; bytes past its end read as 0.
pub(super) fn get_bits(buf: &[u8], at: usize, bits: usize) -> u64 {
    let start = at / 8;
    let mut a = [0u8; 16];
    let n = buf.len().saturating_sub(start).min(16);
    a[..n].copy_from_slice(&buf[start..start + n]);
    let word = u128::from_le_bytes(a) >> (at % 8);
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    word as u64 & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width and signedness, values at the edges and random, with
    /// nulls: packed, then read back one by one and whole, they are the
    /// values given; a column whose values span its whole range is not
    /// packed (no saving). Prints the seed of a failing column.
    #[test]
    fn packed_columns_read_back_exactly() {
        use rand::{Rng, SeedableRng};
        let mut seeds = rand::rngs::StdRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        for case in 0..3000 {
            let seed: u64 = seeds.random();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut rand = move || rng.random::<u64>();
            let width = [1, 2, 4, 8][(seed % 4) as usize];
            let signed = seed & 4 != 0;
            let column = IntColumn { width, signed };
            let rows = 1 + (seed >> 8) as usize % 300;
            // A narrow spread (what packs) from a random base, or edges.
            let base = rand();
            let spread = match (seed >> 20) % 5 {
                0 => 0,
                1 => 1 + rand() % 16,
                2 => 1 + rand() % 100_000,
                // Every bit count up to 40: values read through the
                // streaming window (up to 32) and one load each above.
                3 => 1 + rand() % (1u64 << (1 + rand() % 40)),
                _ => u64::MAX,
            };
            let nulls: Vec<bool> = (0..rows).map(|_| rand() % 5 == 0).collect();
            let mut values = Vec::new();
            for &null in &nulls {
                let v = if null { 0 } else { base.wrapping_add(rand() % spread.max(1)) };
                values.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            let Some((header, packed)) = pack(column, &values, rows, |r| nulls[r]) else {
                continue;
            };
            let read = Packed::read(&header, column, rows, packed.len())
                .unwrap_or_else(|e| panic!("case {case}, seed {seed:#x}: {e}"));
            let whole = read.unpack(&packed, rows);
            for r in (0..rows).filter(|&r| !nulls[r]) {
                let want = &values[r * width..(r + 1) * width];
                assert_eq!(&read.value(&packed, r)[..width], want, "case {case}, seed {seed:#x}, row {r}");
                assert_eq!(&whole[r * width..(r + 1) * width], want, "case {case}, seed {seed:#x}, row {r}");
            }
        }
    }

    #[test]
    fn headers_that_do_not_fit_their_column_are_refused() {
        let column = IntColumn { width: 8, signed: true };
        let values: Vec<u8> = (0..64i64).flat_map(|v| (1000 + v).to_le_bytes()).collect();
        let (header, packed) = pack(column, &values, 64, |_| false).expect("packs");
        assert!(Packed::read(&header, column, 64, packed.len()).is_ok());
        assert!(Packed::read(&header, IntColumn { width: 4, signed: true }, 64, packed.len()).is_err());
        assert!(Packed::read(&header, column, 65, packed.len()).is_err());
        assert!(Packed::read(&header[..15], column, 64, packed.len()).is_err());
        let mut bad = header.clone();
        bad[1] = 65;
        assert!(Packed::read(&bad, column, 64, packed.len()).is_err());
        let mut bad = header;
        bad[0] = 2;
        assert!(Packed::read(&bad, column, 64, packed.len()).is_err());
        // More bits than the value's width: refused, whatever the length.
        let bytes = IntColumn { width: 1, signed: false };
        let (mut header, packed) = pack(bytes, &[3; 64], 64, |_| false).expect("packs");
        header[1] = 9;
        assert!(Packed::read(&header, bytes, 64, (64 * 9) / 8).is_err());
        assert!(packed.is_empty(), "64 equal values take no bits");
    }
}
