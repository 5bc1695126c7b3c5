//! The learned index of an SST: an ε-bounded piecewise-linear model (as in
//! PGM-index and Bourbon) from a key to the position of its first entry.
//!
//! A key is modelled by the 8 bytes that follow the prefix every key of the
//! SST shares (a shared prefix carries no information), read big-endian as
//! `x` (zero-padded). Keys that agree on those bytes form a *run* with one
//! `x`; the model maps `x` to the position of the run's first entry, and a
//! lookup searches `[pos - err, pos + err + run_max]`. Segments are built in
//! one streaming pass with the shrinking-cone algorithm; the error bound
//! stored is the one measured against the exact prediction formula, so
//! floating-point rounding can never break it.
//!
//! Byte layout (meta kind 5, drawn in `docs/format.md`):
//!
//! ```text
//! model   := version u8 (=1) | prefix varint len + bytes | entries u64 | err u32
//!            | run_max u32 | segments u32 | segment{segments}
//!            | blocks u32 | block_first_row u64{blocks}
//! segment := x0 u64 | y0 u64 | slope f64        (all little-endian)
//! ```

use std::path::Path;

use crate::codec::varint::{self, Reader};
use crate::error::Result;

/// Model format version.
const MODEL_VERSION: u8 = 1;

/// Runs of keys sharing their 8 modelled bytes longer than this make the
/// model useless for the SST (the window would cover them); it is not
/// written and lookups use the fence keys.
pub const RUN_MAX_USEFUL: u64 = 256;

/// Longest shared prefix the builder tracks; beyond it the model is off.
const PREFIX_BYTES_MAX: usize = 4096;

/// One linear piece: `pos ≈ y0 + slope * (x - x0)` for `x >= x0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// First `x` of the piece.
    pub x0: u64,
    /// Position of `x0`'s first entry.
    pub y0: u64,
    /// Positions per unit of `x`.
    pub slope: f64,
}

impl Segment {
    fn predict(&self, x: u64) -> f64 {
        self.y0 as f64 + self.slope * (x - self.x0) as f64
    }
}

/// A decoded model.
#[derive(Debug, Clone)]
pub struct Model {
    prefix: Vec<u8>,
    entries: u64,
    err: u64,
    run_max: u64,
    segments: Vec<Segment>,
    block_first_row: Vec<u64>,
    /// Radix tables over `segments[..].x0` and `block_first_row`, built when
    /// the model is decoded (never stored).
    segment_radix: RadixTable,
    block_radix: RadixTable,
}

/// The first layer of a `RadixSpline`, over a strictly increasing column of
/// `u64`: slot `r` holds how many values have their top bits (of `value -
/// base`, above `shift`) below `r`, so the values at most `x` number
/// between `first[r]` and `first[r + 1]` for `x` in slot `r`. A search
/// then reads one slot pair and the one to three values between them,
/// instead of the `log2(n)` dependent cache misses of a binary search over
/// the whole column (the model's two searches had made it slower than the
/// fence keys it replaces; docs/BENCHMARKS-history.md, "Read path and learned index").
#[derive(Debug, Clone)]
struct RadixTable {
    base: u64,
    shift: u32,
    /// About two slots per value, at most 2^16 + 2.
    first: Vec<u32>,
}

/// Most bits a radix table indexes by.
const RADIX_BITS_MAX: u32 = 16;

impl RadixTable {
    /// The table over `values` (strictly increasing, at least one).
    fn new(values: impl Iterator<Item = u64> + Clone) -> RadixTable {
        let n = values.clone().count();
        let base = values.clone().next().unwrap_or(0);
        let span = values.clone().last().unwrap_or(base) - base;
        let bits = (usize::BITS - n.leading_zeros()).clamp(1, RADIX_BITS_MAX);
        let shift = (u64::BITS - span.leading_zeros()).saturating_sub(bits);
        let slots = (span >> shift) as usize + 2;
        let mut first = Vec::with_capacity(slots);
        let mut values = values.map(|v| (v - base) >> shift).peekable();
        let mut below = 0u32;
        for slot in 0..slots as u64 {
            while values.next_if(|&v| v < slot).is_some() {
                below += 1;
            }
            first.push(below);
        }
        RadixTable { base, shift, first }
    }

    /// How many values are at most `x`, given the column: `count_le(i)`
    /// tells whether value `i` is at most `x`.
    fn count_le(&self, x: u64, n: usize, le: impl Fn(usize) -> bool) -> usize {
        let Some(offset) = x.checked_sub(self.base) else {
            return 0;
        };
        let slot = (offset >> self.shift) as usize;
        // `slot + 1` overflows for the largest key when the table needs no
        // shift (a span of a few values starting at 0): past the table.
        let bounds =
            slot.checked_add(1).and_then(|next| Some((*self.first.get(slot)?, *self.first.get(next)?)));
        let Some((lo, hi)) = bounds else {
            return n;
        };
        // A binary search between the two, as a skewed column can crowd
        // many values into one slot.
        let (mut lo, mut hi) = (lo as usize, hi as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if le(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn bytes(&self) -> usize {
        self.first.len() * 4
    }
}

/// The 8 bytes of `key` after `prefix_len`, big-endian and zero-padded.
fn window(key: &[u8], prefix_len: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(rest) = key.get(prefix_len..) {
        let n = rest.len().min(8);
        b[..n].copy_from_slice(&rest[..n]);
    }
    u64::from_be_bytes(b)
}

impl Model {
    /// The range of entry positions `[lo, hi)` where the first entry of
    /// `key` must be if it is in the SST, or `None` when the key cannot be
    /// in it (it lacks the shared prefix).
    pub fn window(&self, key: &[u8]) -> Option<(u64, u64)> {
        // (An empty prefix, the common case, skips the `memcmp` call.)
        if !self.prefix.is_empty() && !key.starts_with(&self.prefix) {
            return None;
        }
        let x = window(key, self.prefix.len());
        let i = self.segment_radix.count_le(x, self.segments.len(), |i| self.segments[i].x0 <= x);
        let seg = self.segments.get(i.checked_sub(1)?)?;
        let pos = seg.predict(x).round().max(0.0) as u64;
        let lo = pos.saturating_sub(self.err);
        let hi = pos.saturating_add(self.err + self.run_max + 1).min(self.entries);
        Some((lo.min(self.entries), hi))
    }

    /// The data block holding entry position `pos`, and that block's first
    /// position.
    pub fn block_of(&self, pos: u64) -> (usize, u64) {
        let rows = &self.block_first_row;
        let b = self.block_radix.count_le(pos, rows.len(), |i| rows[i] <= pos).saturating_sub(1);
        (b, self.block_first_row.get(b).copied().unwrap_or(0))
    }

    /// The first position of data block `b`, if the SST has that block.
    pub fn block_start(&self, b: usize) -> Option<u64> {
        self.block_first_row.get(b).copied()
    }

    /// Data blocks the model knows.
    pub fn blocks(&self) -> usize {
        self.block_first_row.len()
    }

    /// Entries of the SST.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    #[cfg(test)]
    /// The measured error bound (≤ ε + 1).
    pub fn err(&self) -> u64 {
        self.err
    }

    /// Bytes the model takes in memory.
    pub fn bytes(&self) -> usize {
        self.prefix.len()
            + self.segments.len() * 24
            + self.block_first_row.len() * 8
            + self.segment_radix.bytes()
            + self.block_radix.bytes()
            + 64
    }

    /// Decodes a model block that starts at `offset` of `file`.
    pub fn decode(data: &[u8], file: &Path, offset: u64) -> Result<Model> {
        let mut r = Reader::new(data, file, offset);
        let version = r.u8()?;
        if version != MODEL_VERSION {
            return Err(r.corrupt(format!("learned model version {version}")));
        }
        let prefix = r.len_bytes()?.to_vec();
        let entries = r.u64_le()?;
        let err = u64::from(r.u32_le()?);
        let run_max = u64::from(r.u32_le()?);
        let n = r.u32_le()? as usize;
        if n == 0 || n > r.remaining() / 24 {
            return Err(r.corrupt(format!("{n} model segments")));
        }
        let mut segments = Vec::with_capacity(n);
        let mut prev: Option<u64> = None;
        for _ in 0..n {
            let x0 = r.u64_le()?;
            let y0 = r.u64_le()?;
            let slope = f64::from_bits(r.u64_le()?);
            if prev.is_some_and(|p| p >= x0) || y0 > entries || !slope.is_finite() || slope < 0.0 {
                return Err(r.corrupt("model segments out of order or out of range"));
            }
            prev = Some(x0);
            segments.push(Segment { x0, y0, slope });
        }
        let blocks = r.u32_le()? as usize;
        if blocks == 0 || blocks > r.remaining() / 8 {
            return Err(r.corrupt(format!("{blocks} model blocks")));
        }
        let mut block_first_row = Vec::with_capacity(blocks);
        for _ in 0..blocks {
            let first = r.u64_le()?;
            if block_first_row.last().is_some_and(|&p| p >= first) || first >= entries.max(1) {
                return Err(r.corrupt("block positions out of order"));
            }
            block_first_row.push(first);
        }
        if block_first_row[0] != 0 || !r.is_empty() {
            return Err(r.corrupt("bad model block table"));
        }
        let segment_radix = RadixTable::new(segments.iter().map(|s| s.x0));
        let block_radix = RadixTable::new(block_first_row.iter().copied());
        Ok(Model { prefix, entries, err, run_max, segments, block_first_row, segment_radix, block_radix })
    }
}

/// Builds a model while an SST is written, keeping 10 bytes per distinct
/// key: the shared-prefix length known then and the 8 bytes after it (the
/// bytes before are those of the first key, which every later key shares
/// up to that length).
#[derive(Debug)]
pub struct ModelBuilder {
    epsilon: u64,
    first_key: Vec<u8>,
    /// Shared prefix length of all keys so far.
    prefix_len: usize,
    /// Per distinct key: (prefix length when seen, window after it, position).
    keys: Vec<(u16, u64, u64)>,
    last_key: Vec<u8>,
    entries: u64,
    block_first_row: Vec<u64>,
    disabled: bool,
}

impl ModelBuilder {
    /// A builder with error bound `epsilon`.
    pub fn new(epsilon: u32) -> ModelBuilder {
        ModelBuilder {
            epsilon: u64::from(epsilon.max(1)),
            first_key: Vec::new(),
            prefix_len: 0,
            keys: Vec::new(),
            last_key: Vec::new(),
            entries: 0,
            block_first_row: Vec::new(),
            disabled: false,
        }
    }

    /// Records that the next entry starts a new data block.
    pub fn start_block(&mut self) {
        self.block_first_row.push(self.entries);
    }

    /// Records the next entry (in SST order).
    pub fn add(&mut self, user_key: &[u8]) {
        let pos = self.entries;
        self.entries += 1;
        if self.disabled || (pos > 0 && self.last_key == user_key) {
            return;
        }
        if pos == 0 {
            self.first_key = user_key.to_vec();
            self.prefix_len = user_key.len().min(PREFIX_BYTES_MAX);
        } else {
            let common = self.first_key.iter().zip(user_key).take_while(|(a, b)| a == b).count();
            self.prefix_len = self.prefix_len.min(common);
        }
        let Ok(p) = u16::try_from(self.prefix_len) else {
            self.disabled = true;
            return;
        };
        self.keys.push((p, window(user_key, self.prefix_len), pos));
        self.last_key.clear();
        self.last_key.extend_from_slice(user_key);
    }

    /// The `x` of a recorded key under the final prefix length `p`.
    fn x_of(&self, (seen_prefix, after, _): (u16, u64, u64), p: usize) -> u64 {
        let seen = usize::from(seen_prefix);
        debug_assert!(p <= seen);
        // Bytes [p, seen) are the first key's; bytes from `seen` are stored.
        let mut b = [0u8; 8];
        let head = (seen - p).min(8);
        b[..head].copy_from_slice(&padded(&self.first_key, p, head));
        let tail = after.to_be_bytes();
        b[head..].copy_from_slice(&tail[..8 - head]);
        u64::from_be_bytes(b)
    }

    /// The encoded model, or `None` when a model would not help (no
    /// entries, or runs of equal windows longer than [`RUN_MAX_USEFUL`]).
    pub fn finish(&self) -> Option<Vec<u8>> {
        if self.disabled || self.keys.is_empty() || self.block_first_row.is_empty() {
            return None;
        }
        let p = self.prefix_len;
        let mut points: Vec<(u64, u64)> = Vec::with_capacity(self.keys.len());
        let mut run_max = 0u64;
        let mut run_start = 0u64;
        for &k in &self.keys {
            let x = self.x_of(k, p);
            match points.last() {
                Some(&(lx, _)) if lx == x => {}
                Some(_) | None => {
                    if let Some(&(_, ly)) = points.last() {
                        run_max = run_max.max(k.2 - ly);
                    }
                    run_start = k.2;
                    points.push((x, k.2));
                }
            }
        }
        run_max = run_max.max(self.entries - run_start);
        if run_max > RUN_MAX_USEFUL {
            return None;
        }
        let segments = fit(&points, self.epsilon);
        let err = points
            .iter()
            .map(|&(x, y)| {
                let i = segments.partition_point(|s| s.x0 <= x) - 1;
                (segments[i].predict(x).round().max(0.0) as u64).abs_diff(y)
            })
            .max()
            .unwrap_or(0);
        let mut out = vec![MODEL_VERSION];
        varint::put_bytes(&mut out, &self.first_key[..p]);
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&(u32::try_from(err).ok()?).to_le_bytes());
        out.extend_from_slice(&(u32::try_from(run_max).ok()?).to_le_bytes());
        out.extend_from_slice(&(segments.len() as u32).to_le_bytes());
        for s in &segments {
            out.extend_from_slice(&s.x0.to_le_bytes());
            out.extend_from_slice(&s.y0.to_le_bytes());
            out.extend_from_slice(&s.slope.to_bits().to_le_bytes());
        }
        out.extend_from_slice(&(self.block_first_row.len() as u32).to_le_bytes());
        for &b in &self.block_first_row {
            out.extend_from_slice(&b.to_le_bytes());
        }
        Some(out)
    }
}

/// `n` bytes of `key` from `at`, zero-padded.
fn padded(key: &[u8], at: usize, n: usize) -> Vec<u8> {
    let mut v = key.get(at..).unwrap_or(&[]).iter().copied().take(n).collect::<Vec<_>>();
    v.resize(n, 0);
    v
}

/// Fits points with strictly increasing `x` by the shrinking cone: each
/// segment starts at a point and keeps the range of slopes that keep every
/// later point within `epsilon`; when the range empties, a new one starts.
fn fit(points: &[(u64, u64)], epsilon: u64) -> Vec<Segment> {
    let eps = epsilon as f64;
    let mut segments = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let (x0, y0) = points[start];
        let (mut slope_min, mut slope_max) = (0.0f64, f64::INFINITY);
        let mut next = start + 1;
        while next < points.len() {
            let (x, y) = points[next];
            let run = (x - x0) as f64;
            let rise = y as f64 - y0 as f64;
            let (low, high) = ((rise - eps) / run, (rise + eps) / run);
            if low > slope_max || high < slope_min {
                break;
            }
            slope_min = slope_min.max(low);
            slope_max = slope_max.min(high);
            next += 1;
        }
        let slope = if slope_max.is_finite() { f64::midpoint(slope_min, slope_max) } else { 0.0 };
        segments.push(Segment { x0, y0, slope: slope.max(0.0) });
        start = next;
    }
    segments
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn build(keys: &[Vec<u8>], versions: usize, block_rows: u64, eps: u32) -> (Option<Model>, Vec<Vec<u8>>) {
        let mut b = ModelBuilder::new(eps);
        let mut sorted = keys.to_vec();
        sorted.sort();
        sorted.dedup();
        let mut pos = 0u64;
        for k in &sorted {
            for _ in 0..versions {
                if pos.is_multiple_of(block_rows) {
                    b.start_block();
                }
                b.add(k);
                pos += 1;
            }
        }
        let model = b.finish().map(|bytes| Model::decode(&bytes, Path::new("m"), 0).expect("decodes"));
        (model, sorted)
    }

    fn check(keys: &[Vec<u8>], versions: usize, eps: u32) {
        let (model, sorted) = build(keys, versions, 7, eps);
        let Some(model) = model else { return };
        assert!(model.err() <= u64::from(eps.max(1)) + 1, "error {} over ε {eps}", model.err());
        for (i, k) in sorted.iter().enumerate() {
            let pos = (i * versions) as u64;
            let (lo, hi) = model.window(k).expect("a present key has a window");
            assert!(lo <= pos && pos < hi, "key {i} at {pos} outside [{lo}, {hi})");
            let (b, first) = model.block_of(pos);
            assert_eq!(first, pos / 7 * 7);
            assert_eq!(b as u64, pos / 7);
        }
    }

    fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop_oneof![
            // Uniform random keys.
            prop::collection::vec(prop::collection::vec(any::<u8>(), 1..24), 1..400),
            // Sequential numbers behind a long shared prefix.
            (0u64..1_000_000, 1usize..600).prop_map(|(start, n)| {
                (0..n as u64)
                    .map(|i| [b"tenant/0042/".as_slice(), &(start + i).to_be_bytes()].concat())
                    .collect()
            }),
            // Lognormal-ish gaps.
            prop::collection::vec(0u64..64, 1..400).prop_map(|gaps| {
                let mut x = 0u64;
                gaps.iter()
                    .map(|g| {
                        x += 1 << (g % 40);
                        x.to_be_bytes().to_vec()
                    })
                    .collect()
            }),
            // Many keys sharing their 8 modelled bytes (runs).
            prop::collection::vec((0u8..4, any::<u16>()), 1..300)
                .prop_map(|v| { v.iter().map(|(a, b)| [&[*a; 9][..], &b.to_be_bytes()].concat()).collect() }),
        ]
    }

    proptest! {
        #[test]
        fn radix_table_counts_as_a_binary_search(
            mut values in prop::collection::vec(any::<u64>().prop_map(|v| v >> (v % 64)), 1..3000),
            probes in prop::collection::vec(any::<u64>(), 1..200),
        ) {
            // Shifted by a random amount, the values crowd near zero as a
            // skewed key set does, as well as spreading over the range.
            values.sort_unstable();
            values.dedup();
            let table = RadixTable::new(values.iter().copied());
            let extremes = [0, 1, values[0], values[values.len() - 1], u64::MAX];
            for x in probes.iter().copied().chain(values.iter().map(|v| v.wrapping_add(1))).chain(extremes) {
                let want = values.partition_point(|&v| v <= x);
                prop_assert_eq!(table.count_le(x, values.len(), |i| values[i] <= x), want, "x = {}", x);
            }
        }

        #[test]
        fn every_key_lies_in_its_window(keys in keys_strategy(), versions in 1usize..4, eps in 1u32..32) {
            check(&keys, versions, eps);
        }
    }

    #[test]
    fn tiny_and_huge_and_clustered_sets() {
        check(&[b"only".to_vec()], 1, 8);
        let huge: Vec<Vec<u8>> = (0..200_000u64).map(|i| (i * i).to_be_bytes().to_vec()).collect();
        check(&huge, 1, 8);
        let clustered: Vec<Vec<u8>> =
            (0..5000u64).map(|i| ((i / 100) << 40 | (i % 100)).to_be_bytes().to_vec()).collect();
        check(&clustered, 2, 4);
    }

    #[test]
    fn keys_without_the_prefix_have_no_window() {
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| format!("user:{i:05}").into_bytes()).collect();
        let (model, _) = build(&keys, 1, 10, 8);
        let model = model.expect("a model");
        assert!(model.window(b"other").is_none());
        assert!(model.window(b"user:00050").is_some());
    }

    #[test]
    fn long_runs_turn_the_model_off() {
        // Two values of the first byte, then 8 equal bytes, then what varies:
        // two runs of 500 keys share their modelled window.
        let keys: Vec<Vec<u8>> =
            (0..1000u32).map(|i| [&[(i % 2) as u8][..], &[0u8; 8], &i.to_be_bytes()].concat()).collect();
        assert!(build(&keys, 1, 10, 8).0.is_none());
        // The shared prefix itself is skipped: [7; 12] before the counter is no run.
        let keys: Vec<Vec<u8>> = (0..1000u32).map(|i| [&[7u8; 12][..], &i.to_be_bytes()].concat()).collect();
        assert!(build(&keys, 1, 10, 8).0.is_some());
    }

    #[test]
    fn damaged_models_are_errors_not_panics() {
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut b = ModelBuilder::new(8);
        b.start_block();
        for k in &keys {
            b.add(k);
        }
        let bytes = b.finish().expect("model");
        for cut in 0..bytes.len() {
            assert!(Model::decode(&bytes[..cut], Path::new("m"), 0).is_err());
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x41;
            let _ = Model::decode(&bad, Path::new("m"), 0);
        }
    }
}
