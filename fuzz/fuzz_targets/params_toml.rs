//! `cargo +nightly fuzz run params_toml`: see holo_fuzz::params_toml.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| holo_fuzz::params_toml(data));
