//! Element types and tensor representations.

use crate::MemoryKind;

/// A tensor element type (a DLPack `DLDataType` with one lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `uint8`
    U8,
    /// `uint16`
    U16,
    /// `uint32`
    U32,
    /// `uint64`
    U64,
    /// `int8`
    I8,
    /// `int16`
    I16,
    /// `int32`
    I32,
    /// `int64`
    I64,
    /// `float16`
    F16,
    /// `bfloat16`
    BF16,
    /// `float32`
    F32,
    /// `float64`
    F64,
}

/// Every dtype's `log2(size_bytes)`, two bits each at twice its discriminant: the size is
/// then a shift of a constant. A `match` compiled to a table in read-only data, one more
/// line for a loan and a commit to fetch again after each driver call (BENCHMARKS.md,
/// "This VM, thirty-second session").
const LOG2_SIZES: u32 = {
    // Two bits for each of at most 16 dtypes.
    assert!(DType::ALL.len() <= 16);
    let mut packed = 0;
    let mut i = 0;
    while i < DType::ALL.len() {
        let d = DType::ALL[i];
        packed |= d.log2_size() << (2 * d as u32);
        i += 1;
    }
    packed
};

impl DType {
    /// Bytes per element.
    #[inline]
    pub const fn size_bytes(self) -> u64 {
        1 << ((LOG2_SIZES >> (2 * self as u32)) & 3)
    }

    /// `log2` of the bytes per element.
    const fn log2_size(self) -> u32 {
        match self {
            DType::U8 | DType::I8 => 0,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 1,
            DType::U32 | DType::I32 | DType::F32 => 2,
            DType::U64 | DType::I64 | DType::F64 => 3,
        }
    }

    /// The stable name (`u8`, `f32`, …) used in plans and diagnostics.
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 12] = [
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The dtype with this stable name.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a tensor looks like: where it lives, its element type and its rank. `None` means
/// "not declared" (for an input: any is accepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TensorRepresentation {
    /// The memory kind; for an output with a memory-kind derivation this stays `None`
    /// and the compiler freezes the derived kind into the plan.
    pub memory_kind: Option<MemoryKind>,
    /// The element type.
    pub dtype: Option<DType>,
    /// The exact rank.
    pub rank: Option<u32>,
}

/// Literal bounds of a runtime-pool slot: hard compile-time caps. Zero means "reject
/// every allocation", never "unbounded".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorBounds {
    /// The largest rank a loan may request.
    pub max_rank: u32,
    /// The largest byte span one slot holds.
    pub max_byte_span: u64,
}

/// Bounds of `max_byte_span` bytes at up to rank [`MAX_TENSOR_RANK`].
pub const fn tensor_bounds(max_byte_span: u64) -> TensorBounds {
    TensorBounds {
        max_rank: MAX_TENSOR_RANK,
        max_byte_span,
    }
}

/// The largest rank holo tensors support (and the most shape extents an expression reads).
/// The one definition: `#[operator]` checks `rank` and `max_rank` against it in the code it
/// generates, and takes it as the default `max_rank` of `bounds`.
pub const MAX_TENSOR_RANK: u32 = 8;

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn every_size_is_the_width_its_name_gives() {
        for d in DType::ALL {
            let bits: u64 = d
                .name()
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                .unwrap();
            assert_eq!(d.size_bytes(), bits / 8, "{}", d.name());
        }
    }
}
