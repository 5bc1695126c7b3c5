//! Counters that every read bumps, spread over cache-line-padded stripes
//! by thread. One shared `AtomicU64` per counter made each lookup of two
//! parallel readers bounce the same cache lines between cores; with
//! stripes, each thread adds to its own line and only `Stats` (rare) sums.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per counter set; threads beyond this share stripes round-robin.
const STRIPES: usize = 16;

/// Aligned to 128 bytes: two cache lines, as adjacent-line prefetching
/// pairs them on x86-64.
#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

/// `N` counters, striped.
#[derive(Debug)]
pub(crate) struct StripedCounters<const N: usize> {
    stripes: Box<[Padded<[AtomicU64; N]>]>,
}

impl<const N: usize> Default for StripedCounters<N> {
    fn default() -> Self {
        StripedCounters {
            stripes: (0..STRIPES).map(|_| Padded(std::array::from_fn(|_| AtomicU64::new(0)))).collect(),
        }
    }
}

/// This thread's stripe, given out round-robin on a thread's first use.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl<const N: usize> StripedCounters<N> {
    /// Adds `value` to counter `counter` (an index below `N`).
    pub(crate) fn add(&self, counter: usize, value: u64) {
        self.stripes[stripe()].0[counter].fetch_add(value, Ordering::Relaxed);
    }

    /// The total of counter `counter` over every stripe.
    pub(crate) fn sum(&self, counter: usize) -> u64 {
        self.stripes.iter().map(|s| s.0[counter].load(Ordering::Relaxed)).sum()
    }
}

/// Hits and misses of a cache, striped.
#[derive(Debug, Default)]
pub(crate) struct HitCounter(StripedCounters<2>);

impl HitCounter {
    /// Counts one lookup: a hit or a miss.
    pub(crate) fn record(&self, hit: bool) {
        self.0.add(usize::from(!hit), 1);
    }

    /// Lookups that hit.
    pub(crate) fn hits(&self) -> u64 {
        self.0.sum(0)
    }

    /// Lookups that missed.
    pub(crate) fn misses(&self) -> u64 {
        self.0.sum(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_over_threads() {
        let c = std::sync::Arc::new(StripedCounters::<2>::default());
        let threads: Vec<_> = (0..40)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(0, 1);
                        c.add(1, 3);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!((c.sum(0), c.sum(1)), (40_000, 120_000));
    }
}
