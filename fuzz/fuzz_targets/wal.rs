#![no_main]
//! Fuzz target `wal`: see `basalt_crashtest::fuzz::wal`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::wal(data));
