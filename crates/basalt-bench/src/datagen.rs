//! Workload generators: key encodings, value layouts and the request
//! distributions (sequential, uniform, lognormal, zipfian, latest). Every
//! generator is a pure function of its seed, so two engines see the same
//! keys in the same order and a run can be replayed.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The request distributions the workloads understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Item 0, 1, 2, … in order.
    Sequential,
    /// Uniform over the items ("random").
    Random,
    /// Lognormal with σ = 1, scaled so that e^(3σ) (the 99.87th percentile)
    /// maps to the last item; hot items are the low ones.
    Lognormal,
    /// Zipfian with θ = 0.99 (YCSB's constant), ranks scrambled over the
    /// key space by FNV-1a so hot items are spread out.
    Zipfian,
    /// Zipfian over recency: the most recently inserted item is the
    /// hottest (YCSB workload D).
    Latest,
}

impl Distribution {
    /// The name used on the command line and in result files.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Sequential => "sequential",
            Distribution::Random => "random",
            Distribution::Lognormal => "lognormal",
            Distribution::Zipfian => "zipfian",
            Distribution::Latest => "latest",
        }
    }

    /// Parses a name from the command line (`uniform` is an alias of
    /// `random`).
    pub fn parse(s: &str) -> Option<Distribution> {
        Some(match s {
            "sequential" => Distribution::Sequential,
            "random" | "uniform" => Distribution::Random,
            "lognormal" => Distribution::Lognormal,
            "zipfian" => Distribution::Zipfian,
            "latest" => Distribution::Latest,
            _ => return None,
        })
    }
}

/// A deterministic random number generator for `seed` and `stream` (a
/// thread or a phase), so parallel generators do not repeat each other.
pub fn rng(seed: u64, stream: u64) -> SmallRng {
    SmallRng::seed_from_u64(mix64(seed ^ mix64(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))))
}

/// `SplitMix64`'s finaliser: a bijection on `u64` that scatters neighbours.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// FNV-1a over the 8 bytes of `x`, as YCSB hashes its item numbers.
pub fn fnv64(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The distributions `omendb` accepts as key orders.
pub const KEY_ORDERS: [Distribution; 3] =
    [Distribution::Sequential, Distribution::Random, Distribution::Lognormal];

/// How item numbers become 8-byte keys (big-endian, so byte order is the
/// order of the encoded number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOrder {
    /// Item `i` is the number `2i`: keys arrive in ascending order, and the
    /// odd numbers between them are missing keys inside the key range (so a
    /// bloom filter, not a range check, must reject them).
    Sequential,
    /// Item `i` is `mix64(i)`: keys arrive in random order. Item `n + i` is a
    /// missing key for a store of `n` items.
    Random,
    /// Item `i` is `keys[i]`, a key set drawn by [`lognormal_keys`] and
    /// inserted in random order: keys crowd in a few regions of the key
    /// space instead of spreading evenly. Every key is even, so `keys[j] + 1`
    /// is a missing key between two present ones, in the same crowded
    /// regions.
    Lognormal(Vec<u64>),
}

impl KeyOrder {
    /// The key order of `dist` for a store of `n` items drawn with `seed`;
    /// `None` for distributions outside [`KEY_ORDERS`].
    pub fn new(dist: Distribution, n: u64, seed: u64) -> Option<KeyOrder> {
        Some(match dist {
            Distribution::Sequential => KeyOrder::Sequential,
            Distribution::Random => KeyOrder::Random,
            Distribution::Lognormal => KeyOrder::Lognormal(lognormal_keys(n, seed)),
            Distribution::Zipfian | Distribution::Latest => return None,
        })
    }

    /// The key number of item `i`.
    pub fn key_number(&self, i: u64) -> u64 {
        match self {
            KeyOrder::Sequential => i * 2,
            KeyOrder::Random => mix64(i),
            KeyOrder::Lognormal(keys) => keys[i as usize],
        }
    }

    /// The key number of the `i`-th missing key of a store with `n` items.
    pub fn missing_number(&self, i: u64, n: u64) -> u64 {
        match self {
            KeyOrder::Sequential => (i % n.max(1)) * 2 + 1,
            KeyOrder::Random => mix64(n + i),
            KeyOrder::Lognormal(keys) => keys[(i % n.max(1)) as usize] + 1,
        }
    }
}

/// `n` distinct even numbers drawn from a lognormal distribution (μ = 0,
/// σ = 1) scaled so that e^5 (5σ: about 3 draws in 10 million lie beyond,
/// clamped to it) maps to 2^62, in a random order. The draws are sorted and
/// any that equals its predecessor moves up to the predecessor + 2, so the
/// set is distinct without redrawing; then they are shuffled. A pure
/// function of `n` and `seed`, in O(n) memory (8 bytes a key).
pub fn lognormal_keys(n: u64, seed: u64) -> Vec<u64> {
    const TOP: f64 = (1u64 << 62) as f64;
    let scale = TOP / 5f64.exp();
    let mut r = rng(seed, LOGNORMAL_STREAM);
    let mut keys: Vec<u64> =
        (0..n).map(|_| ((standard_normal(&mut r).exp() * scale).min(TOP) as u64) & !1).collect();
    keys.sort_unstable();
    spread_repeats(&mut keys);
    keys.shuffle(&mut r);
    keys
}

/// Moves every number of sorted even `numbers` that is not above its
/// predecessor up to the predecessor + 2: distinct, even, still sorted.
fn spread_repeats(numbers: &mut [u64]) {
    for i in 1..numbers.len() {
        if numbers[i] <= numbers[i - 1] {
            numbers[i] = numbers[i - 1] + 2;
        }
    }
}

/// The generator stream of [`lognormal_keys`].
const LOGNORMAL_STREAM: u64 = 0x6c6f_676e_6f72_6d6c;

/// An 8-byte big-endian key.
pub fn u64_key(number: u64) -> [u8; 8] {
    number.to_be_bytes()
}

/// YCSB's key for item `i`: `user` followed by the FNV hash of `i` in
/// decimal (hashed insert order, YCSB's default).
pub fn ycsb_key(i: u64) -> Vec<u8> {
    format!("user{:019}", fnv64(i) >> 1).into_bytes()
}

/// A pool of random bytes that values are cut from: generating values
/// costs a copy, not random-number generation, and they do not compress.
#[derive(Debug, Clone)]
pub struct ValuePool {
    bytes: Vec<u8>,
}

impl ValuePool {
    const POOL_BYTES: usize = 1 << 20;

    /// A pool drawn from `seed`.
    pub fn new(seed: u64) -> ValuePool {
        let mut bytes = vec![0u8; Self::POOL_BYTES];
        rng(seed, u64::MAX).fill(&mut bytes[..]);
        ValuePool { bytes }
    }

    /// Writes the value of item `id` (version `version`) into `out`:
    /// `value_bytes` bytes (at least 16) whose first 8 are `id` and next 8
    /// `version` (little-endian), the rest cut from the pool at a place
    /// that depends on both, so every version of every row has its own
    /// bytes and a reader can check the whole value (see [`ValuePool::check`]).
    pub fn fill(&self, id: u64, version: u64, value_bytes: usize, out: &mut Vec<u8>) {
        let len = value_bytes.max(VALUE_BYTES_MIN);
        out.clear();
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(self.tail(id, version, len));
    }

    /// The pool bytes after the 16-byte header of the value of `id` at
    /// `version`, `len` bytes long in all.
    fn tail(&self, id: u64, version: u64, len: usize) -> &[u8] {
        let tail = len - VALUE_BYTES_MIN;
        let start = (mix64(id ^ version.rotate_left(32)) as usize) % (self.bytes.len() - tail);
        &self.bytes[start..start + tail]
    }

    /// Checks that `value` is, byte for byte, the value [`ValuePool::fill`]
    /// writes for item `id` at a version in `versions` (from the latest
    /// acknowledged one to the latest issued) and length `value_bytes`;
    /// returns that version, or what is wrong. A stale version after an
    /// update, another row's value, a torn or truncated value: each fails.
    pub fn check(
        &self,
        value: &[u8],
        id: u64,
        versions: std::ops::RangeInclusive<u64>,
        value_bytes: usize,
    ) -> Result<u64, String> {
        let len = value_bytes.max(VALUE_BYTES_MIN);
        if value.len() != len {
            return Err(format!("item {id}: a value of {} bytes, expected {len}", value.len()));
        }
        let (got_id, version) = value_header(value).ok_or_else(|| format!("item {id}: no header"))?;
        if got_id != id {
            return Err(format!("item {id}: the value of item {got_id}"));
        }
        if version < *versions.start() {
            return Err(format!(
                "item {id}: stale version {version}, version {} was acknowledged",
                versions.start()
            ));
        }
        if version > *versions.end() {
            return Err(format!(
                "item {id}: version {version}, never written (the latest is {})",
                versions.end()
            ));
        }
        if value[VALUE_BYTES_MIN..] != *self.tail(id, version, len) {
            return Err(format!("item {id}: version {version}'s bytes differ"));
        }
        Ok(version)
    }
}

/// The shortest value: the item number and the version.
pub const VALUE_BYTES_MIN: usize = 16;

/// The id stamped in the first 8 bytes of a value.
pub fn value_id(value: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(value.get(..8)?.try_into().ok()?))
}

/// The id and the version stamped in the first 16 bytes of a value.
pub fn value_header(value: &[u8]) -> Option<(u64, u64)> {
    Some((value_id(value)?, u64::from_le_bytes(value.get(8..16)?.try_into().ok()?)))
}

/// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record
/// synthetic databases"): ranks 0..n, rank 0 hottest, θ = `theta`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipfian {
    /// YCSB's default skew.
    pub const THETA: f64 = 0.99;

    /// A generator over `items` ranks (at least 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        let zetan = zeta(items, theta);
        let zeta_two = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_two / zetan);
        Zipfian { items, theta, alpha, zetan, eta, half_pow_theta: 1.0 + 0.5f64.powf(theta) }
    }

    /// The next rank in `0..items`.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.half_pow_theta {
            return 1.min(self.items - 1);
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.items - 1)
    }

    /// The number of ranks.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// Picks item numbers in `0..items` for one distribution.
#[derive(Debug, Clone)]
pub struct Chooser {
    dist: Distribution,
    items: u64,
    zipf: Option<Zipfian>,
    next_sequential: u64,
}

impl Chooser {
    /// A chooser over `items` items (at least 1).
    pub fn new(dist: Distribution, items: u64) -> Chooser {
        let zipf = matches!(dist, Distribution::Zipfian | Distribution::Latest)
            .then(|| Zipfian::new(items, Zipfian::THETA));
        Chooser { dist, items: items.max(1), zipf, next_sequential: 0 }
    }

    /// The next item. `inserted` is the number of items present now (for
    /// `Latest`, whose hottest item is the newest; others ignore it beyond
    /// the chooser's own item count).
    pub fn next(&mut self, rng: &mut impl Rng, inserted: u64) -> u64 {
        let n = self.items;
        match self.dist {
            Distribution::Sequential => {
                let i = self.next_sequential % n;
                self.next_sequential += 1;
                i
            }
            Distribution::Random => rng.random_range(0..n),
            Distribution::Lognormal => {
                let z = standard_normal(rng);
                let x = z.exp() / 3f64.exp();
                ((x * n as f64) as u64).min(n - 1)
            }
            Distribution::Zipfian => {
                let rank = self.zipf.as_ref().map_or(0, |z| z.next(rng));
                fnv64(rank) % n
            }
            Distribution::Latest => {
                let present = inserted.max(1);
                let back = self.zipf.as_ref().map_or(0, |z| z.next(rng));
                present - 1 - back.min(present - 1)
            }
        }
    }
}

/// One standard normal sample (Box–Muller).
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_by_seed() {
        for dist in [
            Distribution::Sequential,
            Distribution::Random,
            Distribution::Lognormal,
            Distribution::Zipfian,
            Distribution::Latest,
        ] {
            let draw = |seed| {
                let mut r = rng(seed, 1);
                let mut c = Chooser::new(dist, 1000);
                (0..100).map(|_| c.next(&mut r, 1000)).collect::<Vec<_>>()
            };
            assert_eq!(draw(7), draw(7), "{dist:?}");
            if dist != Distribution::Sequential {
                assert_ne!(draw(7), draw(8), "{dist:?}");
            }
        }
        assert_ne!(rng(1, 0).random::<u64>(), rng(1, 1).random::<u64>());
    }

    #[test]
    fn choices_stay_in_range() {
        for dist in
            [Distribution::Random, Distribution::Lognormal, Distribution::Zipfian, Distribution::Latest]
        {
            let mut r = rng(3, 0);
            let mut c = Chooser::new(dist, 50);
            for _ in 0..10_000 {
                assert!(c.next(&mut r, 50) < 50, "{dist:?}");
            }
        }
    }

    #[test]
    fn zipfian_is_skewed_like_ycsb() {
        let n = 10_000u64;
        let z = Zipfian::new(n, Zipfian::THETA);
        let mut r = rng(5, 0);
        let mut counts = vec![0u32; n as usize];
        let draws = 200_000;
        for _ in 0..draws {
            counts[z.next(&mut r) as usize] += 1;
        }
        // With θ = 0.99 over 10K items the hottest rank takes ~10% of draws
        // and the top 1% of ranks take about half.
        let top: u32 = counts[..100].iter().sum();
        assert!(counts[0] > draws / 20, "rank 0 got {}", counts[0]);
        assert!(f64::from(top) / f64::from(draws) > 0.4, "top 1% got {top}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10]);
    }

    #[test]
    fn latest_prefers_recent_items() {
        let mut c = Chooser::new(Distribution::Latest, 10_000);
        let mut r = rng(9, 0);
        let recent = (0..10_000).filter(|_| c.next(&mut r, 10_000) >= 9_900).count();
        assert!(recent > 4_000, "{recent}");
    }

    #[test]
    fn lognormal_is_skewed_to_low_items() {
        let mut c = Chooser::new(Distribution::Lognormal, 1_000);
        let mut r = rng(11, 0);
        let low = (0..10_000).filter(|_| c.next(&mut r, 1_000) < 100).count();
        assert!(low > 5_000, "{low}");
    }

    #[test]
    fn missing_keys_never_collide_with_present_ones() {
        let n = 5_000;
        for dist in KEY_ORDERS {
            let order = KeyOrder::new(dist, n, 1).expect("a key order");
            let present: std::collections::HashSet<u64> = (0..n).map(|i| order.key_number(i)).collect();
            assert_eq!(present.len() as u64, n);
            assert!((0..n).all(|i| !present.contains(&order.missing_number(i, n))), "{dist:?}");
        }
        assert_eq!(KeyOrder::new(Distribution::Zipfian, n, 1), None);
    }

    #[test]
    fn lognormal_keys_are_distinct_deterministic_and_skewed() {
        let n = 200_000;
        let keys = lognormal_keys(n, 7);
        assert_eq!(keys.len() as u64, n);
        assert_eq!(keys, lognormal_keys(n, 7), "deterministic by seed");
        assert_ne!(keys, lognormal_keys(n, 8));
        assert!(keys.iter().all(|k| k % 2 == 0 && *k <= (1 << 62) + 2 * n));
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]), "distinct");
        assert_ne!(keys, sorted, "inserted in random order");
        // Half the keys lie below the median e^0 · 2^62 / e^5, which holds
        // under 1% of the range: the set is crowded, not uniform.
        let median = (1u64 << 62) as f64 / 5f64.exp();
        let below = keys.iter().filter(|&&k| (k as f64) < median).count() as f64 / n as f64;
        assert!((0.48..0.52).contains(&below), "{below}");
        // Draws that collide are spread apart, not redrawn.
        let mut repeats = [4, 4, 4, 6, 20];
        spread_repeats(&mut repeats);
        assert_eq!(repeats, [4, 6, 8, 10, 20]);
        assert!(lognormal_keys(0, 1).is_empty());
    }

    #[test]
    fn values_carry_their_id_and_size() {
        let pool = ValuePool::new(1);
        let mut v = Vec::new();
        for (id, size) in [(0u64, 16usize), (17, 17), (123_456, 512), (9, 1000)] {
            pool.fill(id, 0, size, &mut v);
            assert_eq!(v.len(), size);
            assert_eq!(value_header(&v), Some((id, 0)));
            assert_eq!(pool.check(&v, id, 0..=0, size), Ok(0));
        }
        pool.fill(3, 0, 8, &mut v);
        assert_eq!(v.len(), VALUE_BYTES_MIN, "never shorter than the header");
        let mut w = Vec::new();
        pool.fill(9, 1, 1000, &mut w);
        assert_ne!(v, w, "a new version has new bytes");
    }

    #[test]
    fn the_check_fails_every_wrong_value() {
        let pool = ValuePool::new(1);
        let (mut v1, mut v2) = (Vec::new(), Vec::new());
        pool.fill(5, 1, 100, &mut v1);
        pool.fill(5, 2, 100, &mut v2);
        assert_eq!(pool.check(&v2, 5, 2..=2, 100), Ok(2));
        assert_eq!(pool.check(&v2, 5, 1..=3, 100), Ok(2), "a newer version than the floor passes");
        let stale = pool.check(&v1, 5, 2..=3, 100).expect_err("stale");
        assert!(stale.contains("stale version 1"), "{stale}");
        assert!(pool.check(&v2, 5, 0..=1, 100).expect_err("unwritten").contains("never written"));
        assert!(pool.check(&v1, 6, 0..=9, 100).expect_err("other row").contains("the value of item 5"));
        assert!(pool.check(&v1[..99], 5, 0..=9, 100).is_err(), "truncated");
        let mut torn = v2.clone();
        torn[16..50].copy_from_slice(&v1[16..50]);
        assert!(pool.check(&torn, 5, 0..=9, 100).expect_err("torn").contains("bytes differ"));
        let mut relabelled = v1.clone();
        relabelled[8..16].copy_from_slice(&2u64.to_le_bytes());
        assert!(pool.check(&relabelled, 5, 2..=9, 100).is_err(), "an old value with a new version number");
        let (mut short, mut flipped) = (Vec::new(), Vec::new());
        pool.fill(8, 0, 16, &mut short);
        pool.fill(8, 0, 16, &mut flipped);
        flipped[15] ^= 1;
        assert_eq!(pool.check(&short, 8, 0..=0, 16), Ok(0));
        assert!(pool.check(&flipped, 8, 0..=0, 16).is_err(), "a 16-byte value has only its header to check");
    }

    #[test]
    fn ycsb_keys_are_distinct_and_fixed_width() {
        let keys: std::collections::HashSet<Vec<u8>> = (0..10_000).map(ycsb_key).collect();
        assert_eq!(keys.len(), 10_000);
        assert!(keys.iter().all(|k| k.len() == 23));
    }
}
