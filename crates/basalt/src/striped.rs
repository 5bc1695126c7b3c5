//! Counters that every read bumps, spread over cache-line-padded stripes
//! by thread. One shared `AtomicU64` per counter made each lookup of two
//! parallel readers bounce the same cache lines between cores; with
//! stripes, each thread adds to its own line and only `Stats` (rare) sums.
//! A stripe belongs to one live thread at a time, so adding needs no
//! locked instruction.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Stripes per counter set, each owned by one live thread; threads beyond
/// this many at once share one more stripe.
const STRIPES: usize = 16;

/// Aligned to 128 bytes: two cache lines, as adjacent-line prefetching
/// pairs them on x86-64.
#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

/// `N` counters, striped.
#[derive(Debug)]
pub(crate) struct StripedCounters<const N: usize> {
    /// `STRIPES` owned stripes, then the shared one.
    stripes: Box<[Padded<[AtomicU64; N]>]>,
}

impl<const N: usize> Default for StripedCounters<N> {
    fn default() -> Self {
        StripedCounters {
            stripes: (0..=STRIPES).map(|_| Padded(std::array::from_fn(|_| AtomicU64::new(0)))).collect(),
        }
    }
}

/// Which stripes live threads own, one bit each.
static OWNED: AtomicU32 = AtomicU32::new(0);

/// A thread's claim on a stripe, given back when the thread ends.
struct Claim(Option<usize>);

impl Claim {
    fn take() -> Claim {
        let mut owned = OWNED.load(Ordering::Relaxed);
        loop {
            let free = (!owned).trailing_zeros() as usize;
            if free >= STRIPES {
                return Claim(None);
            }
            // Acquire: this thread sees every count the stripe's previous
            // owner added, and goes on from there.
            match OWNED.compare_exchange_weak(owned, owned | 1 << free, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Claim(Some(free)),
                Err(now) => owned = now,
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            OWNED.fetch_and(!(1 << i), Ordering::Release);
        }
    }
}

thread_local! {
    static CLAIM: Claim = Claim::take();
}

/// This thread's own stripe, if it has one.
fn owned_stripe() -> Option<usize> {
    // After the thread's locals are gone (a destructor that reads), the
    // shared stripe serves.
    CLAIM.try_with(|c| c.0).ok().flatten()
}

impl<const N: usize> StripedCounters<N> {
    /// Adds `value` to counter `counter` (an index below `N`). A thread's
    /// own stripe has no other writer, so the add is a plain load and
    /// store: a locked add would be a full fence in the middle of a
    /// lookup, stalling the cache misses the read path overlaps.
    pub(crate) fn add(&self, counter: usize, value: u64) {
        match owned_stripe() {
            Some(i) => {
                let c = &self.stripes[i].0[counter];
                c.store(c.load(Ordering::Relaxed).wrapping_add(value), Ordering::Relaxed);
            }
            None => {
                self.stripes[STRIPES].0[counter].fetch_add(value, Ordering::Relaxed);
            }
        }
    }

    /// The total of counter `counter` over every stripe.
    pub(crate) fn sum(&self, counter: usize) -> u64 {
        self.stripes.iter().map(|s| s.0[counter].load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
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

    /// More threads at once than stripes (the shared stripe is used), then
    /// as many again one after another (stripes change owners): no count
    /// is lost.
    #[test]
    fn sums_over_threads() {
        let c = std::sync::Arc::new(StripedCounters::<2>::default());
        let all_started = std::sync::Arc::new(std::sync::Barrier::new(40));
        let add = |c: &StripedCounters<2>| {
            for _ in 0..10_000 {
                c.add(0, 1);
                c.add(1, 3);
            }
        };
        let threads: Vec<_> = (0..40)
            .map(|_| {
                let (c, all_started) = (c.clone(), all_started.clone());
                std::thread::spawn(move || {
                    all_started.wait();
                    add(&c);
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        for _ in 0..40 {
            let c = c.clone();
            std::thread::spawn(move || add(&c)).join().expect("thread");
        }
        assert_eq!((c.sum(0), c.sum(1)), (800_000, 2_400_000));
    }
}
