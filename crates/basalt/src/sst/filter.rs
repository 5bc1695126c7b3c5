//! The filter block: a cache-line-blocked bloom filter over the user keys of
//! one SST. A key's xxh3 hash picks one 512-bit line and all of its probes
//! fall inside that line, so a lookup costs one cache miss, not k.

use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use super::format::{
    FILTER_BITS_PER_KEY_MAX, FILTER_HEADER_BYTES, FILTER_LINE_BITS, FILTER_LINE_BYTES, FILTER_PROBES_MAX,
};
use crate::error::{Error, Result};

/// Multiplier that derives each next probe from the previous one (the golden
/// ratio in 32 bits, as in `RocksDB`'s local bloom). Odd, so it never reaches 0
/// from a non-zero start.
const PROBE_MULTIPLIER: u32 = 0x9e37_79b9;

/// Words of one 512-bit line.
const LINE_WORDS: usize = FILTER_LINE_BYTES / 8;

/// One filter line, aligned so that it is exactly one cache line in memory.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
struct Line([u64; LINE_WORDS]);

/// Hashes a user key for the filter.
pub fn key_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// Seed of the hash of a key prefix: a prefix and a whole key with the same
/// bytes hash apart, so neither answers for the other.
const PREFIX_SEED: u64 = 0x7072_6566_6978;

/// Hashes a key prefix (an index entry's leading indexed values) for the
/// filter.
pub fn prefix_hash(prefix: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(prefix, PREFIX_SEED)
}

/// Probes per key for a bits-per-key budget: `bits_per_key * ln 2`, rounded,
/// in `1..=FILTER_PROBES_MAX`.
pub fn probes_for(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, FILTER_PROBES_MAX)
}

/// The line a hash falls into: the high 32 bits scaled to `0..lines`
/// (multiply-shift, no division).
fn line_of(hash: u64, lines: usize) -> usize {
    (((hash >> 32) * lines as u64) >> 32) as usize
}

/// Calls `f(word, bit)` for each of the `k` probes of `hash` inside a line:
/// the top 9 bits of the low half, multiplied onward for each probe.
fn for_each_probe(hash: u64, k: u32, mut f: impl FnMut(usize, u32) -> bool) -> bool {
    let mut h = hash as u32;
    for _ in 0..k {
        let bit = h >> (32 - FILTER_LINE_BITS.trailing_zeros());
        if !f((bit / 64) as usize, bit % 64) {
            return false;
        }
        h = h.wrapping_mul(PROBE_MULTIPLIER);
    }
    true
}

/// Collects key hashes and builds the filter block at the end.
#[derive(Debug)]
pub struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder spending `bits_per_key` bits per distinct key (clamped to
    /// `1..=FILTER_BITS_PER_KEY_MAX`).
    pub fn new(bits_per_key: u32) -> Self {
        BloomBuilder { bits_per_key: bits_per_key.clamp(1, FILTER_BITS_PER_KEY_MAX), hashes: Vec::new() }
    }

    /// Adds a user key. The caller adds each distinct key once; repeats only
    /// waste bits.
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(key_hash(user_key));
    }

    /// Adds a key prefix ([`prefix_hash`]); the caller adds each distinct
    /// prefix once.
    pub fn add_prefix(&mut self, prefix: &[u8]) {
        self.hashes.push(prefix_hash(prefix));
    }

    /// Encodes the filter block: header, then each line as eight u64 LE.
    pub fn finish(&self) -> Vec<u8> {
        let bits = self.hashes.len() as u64 * u64::from(self.bits_per_key);
        let lines = bits.div_ceil(u64::from(FILTER_LINE_BITS)).clamp(1, u64::from(u32::MAX)) as usize;
        let k = probes_for(self.bits_per_key);
        let mut table = vec![Line::default(); lines];
        for &hash in &self.hashes {
            let line = &mut table[line_of(hash, lines)];
            for_each_probe(hash, k, |word, bit| {
                line.0[word] |= 1 << bit;
                true
            });
        }
        let mut out = Vec::with_capacity(FILTER_HEADER_BYTES + lines * FILTER_LINE_BYTES);
        out.extend_from_slice(&(lines as u32).to_le_bytes());
        out.push(k as u8);
        out.extend_from_slice(&[0u8; 3]);
        for line in &table {
            for word in line.0 {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        out
    }
}

/// A decoded filter, held in memory by its reader.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    lines: Vec<Line>,
    k: u32,
}

impl BloomFilter {
    /// Checks and decodes a filter block read at `offset` of `file`.
    pub fn decode(data: &[u8], file: &Path, offset: u64) -> Result<BloomFilter> {
        let corrupt = |what: &str| Error::corruption(file, offset, format!("filter block: {what}"));
        let Some((header, body)) = data.split_first_chunk::<FILTER_HEADER_BYTES>() else {
            return Err(corrupt("shorter than its header"));
        };
        let lines = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let k = u32::from(header[4]);
        if header[5..] != [0, 0, 0] {
            return Err(corrupt("reserved bytes are not zero"));
        }
        if lines == 0 || body.len() != lines.saturating_mul(FILTER_LINE_BYTES) {
            return Err(corrupt("line count does not match its size"));
        }
        if !(1..=FILTER_PROBES_MAX).contains(&k) {
            return Err(corrupt("impossible probe count"));
        }
        let table = body
            .chunks_exact(FILTER_LINE_BYTES)
            .map(|chunk| {
                let mut line = Line::default();
                for (word, bytes) in line.0.iter_mut().zip(chunk.chunks_exact(8)) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(bytes);
                    *word = u64::from_le_bytes(a);
                }
                line
            })
            .collect();
        Ok(BloomFilter { lines: table, k })
    }

    #[cfg(test)]
    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(user_key))
    }

    /// [`BloomFilter::may_contain`] for a hash from [`key_hash`].
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        let line = &self.lines[line_of(hash, self.lines.len())];
        for_each_probe(hash, self.k, |word, bit| line.0[word] & (1 << bit) != 0)
    }

    /// Loads the line `hash` falls into and returns one of its words: a
    /// lookup that will probe several filters loads all their lines first,
    /// so their cache misses overlap instead of following one another.
    pub fn touch(&self, hash: u64) -> u64 {
        self.lines[line_of(hash, self.lines.len())].0[0]
    }

    /// Memory held by the filter.
    pub fn approximate_bytes(&self) -> usize {
        self.lines.len() * FILTER_LINE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: u32) -> BloomFilter {
        let mut b = BloomBuilder::new(bits_per_key);
        keys.for_each(|k| b.add_key(&k));
        BloomFilter::decode(&b.finish(), Path::new("f"), 0).expect("decodes")
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let n = 100_000u32;
        let filter = build((0..n).map(|i| format!("user-key-{i}").into_bytes()), 10);
        for i in 0..n {
            assert!(filter.may_contain(format!("user-key-{i}").as_bytes()), "key {i} lost");
        }
        let probes = 100_000u32;
        let hits = (0..probes).filter(|i| filter.may_contain(format!("absent-{i}").as_bytes())).count();
        let rate = hits as f64 / f64::from(probes);
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(filter.approximate_bytes() <= (n as usize * 10).div_ceil(8) + FILTER_LINE_BYTES);
    }

    #[test]
    fn probe_count_follows_bits_per_key() {
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(100), FILTER_PROBES_MAX);
    }

    #[test]
    fn empty_filter_is_valid() {
        let filter = build(std::iter::empty(), 10);
        assert!(!filter.may_contain(b"x"));
    }

    #[test]
    fn malformed_blocks_are_corruption() {
        let mut b = BloomBuilder::new(10);
        b.add_key(b"a");
        let good = b.finish();
        let mut bad_k = good.clone();
        bad_k[4] = 0;
        let mut bad_lines = good.clone();
        bad_lines[0] = 2;
        let mut bad_reserved = good.clone();
        bad_reserved[7] = 1;
        for bad in [&good[..3], &good[..good.len() - 1], &bad_k[..], &bad_lines[..], &bad_reserved[..]] {
            assert!(BloomFilter::decode(bad, Path::new("f"), 9).expect_err("bad").is_corruption());
        }
    }
}
