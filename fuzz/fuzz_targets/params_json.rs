//! `cargo +nightly fuzz run params_json`: see holo_fuzz::params_json.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| holo_fuzz::params_json(data));
