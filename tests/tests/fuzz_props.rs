//! The fuzz targets' entry points (`fuzz/src/lib.rs`) under proptest on stable, bounded
//! to a few seconds: random bytes, and random text shaped like each target's documents.
//! A finding panics in the entry point; cargo-fuzz explores the same functions for
//! longer (RELIABILITY.md).

#[path = "../../fuzz/src/lib.rs"]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the fuzz crate's public entry points"
)]
mod holo_fuzz;

use proptest::prelude::*;

/// Text made of a document's vocabulary: the schema's keys, tables, literals, punctuation.
fn document() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("shape"),
        Just("batch"),
        Just("output_storage"),
        Just("filter"),
        Just("token"),
        Just("gain"),
        Just("flag"),
        Just("label"),
        Just("geometry"),
        Just("inset"),
        Just("width"),
        Just("offset"),
        Just("resize"),
        Just("camera"),
        Just("hz"),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just("="),
        Just(":"),
        Just(","),
        Just("\""),
        Just("."),
        Just("\n"),
        Just(" "),
        Just("0"),
        Just("1"),
        Just("-1"),
        Just("4096"),
        Just("65537"),
        Just("1e400"),
        Just("nan"),
        Just("true"),
        Just("\"host\""),
        Just("\"pinned\""),
        Just("\"cuda_device\""),
        Just("\"gauss\""),
        Just("\"lanczos\""),
        Just("\"hunter2hunter2\""),
        Just("18446744073709551616"),
    ];
    prop::collection::vec(token, 0..60).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn params_loaders_and_app_config(text in document(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        holo_fuzz::params_toml(text.as_bytes());
        holo_fuzz::params_json(text.as_bytes());
        holo_fuzz::app_config(text.as_bytes());
        holo_fuzz::params_toml(&bytes);
        holo_fuzz::params_json(&bytes);
        holo_fuzz::app_config(&bytes);
    }

    #[test]
    fn byte_span_and_rate_arithmetic(bytes in prop::collection::vec(any::<u8>(), 0..160)) {
        holo_fuzz::byte_span_rate(&bytes);
    }

    #[test]
    fn dlpack_import_of_arbitrary_headers(bytes in prop::collection::vec(any::<u8>(), 0..160)) {
        holo_fuzz::dlpack_import(&bytes);
    }
}
