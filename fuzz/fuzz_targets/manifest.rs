#![no_main]
//! Fuzz target `manifest`: see `basalt_crashtest::fuzz::manifest`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::manifest(data));
