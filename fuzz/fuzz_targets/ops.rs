#![no_main]
//! Fuzz target `ops`: see `basalt_crashtest::fuzz::ops`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::ops(data));
