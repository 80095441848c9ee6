//! The entry points of holo's fuzz targets, one function per target, each taking the
//! fuzzer's bytes. A function returns normally for every input: a rejection is a typed
//! `Error` or compile diagnostic, checked here; a panic (or a failed check) is a finding.
//!
//! The same file runs on stable: `tests/tests/fuzz_regressions.rs` feeds it the minimized
//! inputs checked in under `fuzz/regressions/<target>/`, and `tests/tests/fuzz_props.rs`
//! random inputs (proptest), both including this file with `#[path]`.
#![allow(
    clippy::missing_panics_doc,
    reason = "a panic is exactly what a fuzz target reports"
)]

pub use self::bytes::Bytes;

mod bytes {
    /// A reader of fuzz bytes that never fails: past the end every byte is zero. Numbers
    /// are drawn with a bias to boundaries (small, powers of two, near the maximum), so
    /// the fuzzer reaches overflow edges in a few mutations.
    pub struct Bytes<'a> {
        data: &'a [u8],
    }

    impl<'a> Bytes<'a> {
        /// Reads `data` from its start.
        pub fn new(data: &'a [u8]) -> Self {
            Self { data }
        }

        /// Whether every byte was read.
        pub fn is_empty(&self) -> bool {
            self.data.is_empty()
        }

        /// One byte (zero past the end).
        pub fn byte(&mut self) -> u8 {
            match self.data.split_first() {
                Some((&b, rest)) => {
                    self.data = rest;
                    b
                }
                None => 0,
            }
        }

        /// Eight bytes, little-endian.
        fn raw_u64(&mut self) -> u64 {
            let mut v = [0_u8; 8];
            for b in &mut v {
                *b = self.byte();
            }
            u64::from_le_bytes(v)
        }

        /// A `u64`: small, a power of two (± 1), near `u64::MAX`, or any.
        pub fn u64(&mut self) -> u64 {
            match self.byte() % 5 {
                0 => u64::from(self.byte()),
                1 => 1_u64 << (self.byte() % 64),
                2 => (1_u64 << (self.byte() % 64)).wrapping_add(1),
                3 => u64::MAX - u64::from(self.byte()),
                _ => self.raw_u64(),
            }
        }

        /// An `i64`, from [`u64`](Self::u64), negated when the next byte is odd.
        #[allow(clippy::cast_possible_wrap, reason = "any bit pattern is a test value")]
        pub fn i64(&mut self) -> i64 {
            let v = self.u64() as i64;
            if self.byte() & 1 == 1 {
                v.wrapping_neg()
            } else {
                v
            }
        }

        /// The rest of the bytes.
        pub fn rest(&mut self) -> &'a [u8] {
            std::mem::take(&mut self.data)
        }
    }
}

mod params;
pub use params::{app_config, params_json, params_toml};

mod span_rate;
pub use span_rate::byte_span_rate;

mod dlpack;
pub use dlpack::dlpack_import;
