#![no_main]
//! Fuzz target `key_codec`: see `basalt_crashtest::fuzz::key_codec`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::key_codec(data));
