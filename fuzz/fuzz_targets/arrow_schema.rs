#![no_main]
//! Fuzz target `arrow_schema`: see `basalt_crashtest::fuzz::arrow_schema`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| basalt_crashtest::fuzz::arrow_schema(data));
