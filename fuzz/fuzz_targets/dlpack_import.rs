//! `cargo +nightly fuzz run dlpack_import`: see holo_fuzz::dlpack_import.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| holo_fuzz::dlpack_import(data));
