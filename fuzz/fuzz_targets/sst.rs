#![no_main]
//! Fuzz target `sst`: see `basalt_crashtest::fuzz::sst`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::sst(data));
