//! `cargo +nightly fuzz run app_config`: see holo_fuzz::app_config.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| holo_fuzz::app_config(data));
