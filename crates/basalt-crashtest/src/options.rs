//! Database options per cycle: small memtables, SSTs and levels, so that
//! flushes and compactions run every few hundred milliseconds and kills land
//! in the middle of them; chosen anew each cycle, as `RocksDB`'s crash test
//! does, since options never change the on-disk format.

use basalt::{Compression, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Options for cycle `cycle` of a run seeded with `seed`.
pub fn for_cycle(seed: u64, cycle: u64) -> Options {
    let mut rng = StdRng::seed_from_u64(crate::mix(&[seed, cycle, 0x0b7]));
    Options::default()
        .memtable_bytes_max(rng.random_range(16 << 10..256 << 10))
        .immutable_memtables_max(rng.random_range(1..4))
        .block_bytes_target(rng.random_range(256..8 << 10))
        .table_block_bytes_target(rng.random_range(256..64 << 10))
        .settled_block_bytes_target(rng.random_range(256..512 << 10))
        .bloom_bits_per_key([0, 4, 10][rng.random_range(0..3)])
        .compression(if rng.random_bool(0.5) { Compression::Lz4 } else { Compression::None })
        .block_cache_bytes(rng.random_range(0..4 << 20))
        .l0_compaction_trigger(rng.random_range(2..5))
        .level1_bytes_target(rng.random_range(64 << 10..1 << 20))
        .level_size_ratio(rng.random_range(2..6))
        .sst_bytes_target(rng.random_range(16 << 10..256 << 10))
        // Half the cycles keep keyspace values from a random length on in
        // blob files; a database written with them is read without.
        .blob_value_bytes_min(if rng.random_bool(0.5) { rng.random_range(1..512) } else { 0 })
        .blob_gc_garbage_percent(rng.random_range(1..=100))
}
