//! `cargo +nightly fuzz run byte_span_rate`: see holo_fuzz::byte_span_rate.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| holo_fuzz::byte_span_rate(data));
