//! Attribute keywords, in one place (serde's `symbol.rs`).

use std::fmt;

use syn::{Ident, Path};

#[derive(Copy, Clone)]
pub(crate) struct Symbol(pub(crate) &'static str);

pub(crate) const PARAM: Symbol = Symbol("param");
/// The typed field path macro, recognised inside `history = parameter_count(...)`.
pub(crate) const PARAM_REF: Symbol = Symbol("param_ref");
/// The function `history = ...` takes a parameter's count through.
pub(crate) const PARAMETER_COUNT: Symbol = Symbol("parameter_count");
/// The function a rate reads a parameter through, recognised in `clock(hz = ...)`.
pub(crate) const PARAMETER_RATE: Symbol = Symbol("parameter_rate");
pub(crate) const DOC: Symbol = Symbol("doc");

// Container keys of `#[derive(ParamSchema)]`.
pub(crate) const SCHEMA: Symbol = Symbol("schema");
pub(crate) const VERSION: Symbol = Symbol("version");
pub(crate) const CRATE: Symbol = Symbol("crate");
pub(crate) const DEBUG: Symbol = Symbol("debug");

// Field keys of `#[derive(ParamSchema)]`; `NAME` is also the variant key of
// `#[derive(ParamEnum)]`.
pub(crate) const NAME: Symbol = Symbol("name");
pub(crate) const RECOMPILE_REQUIRED: Symbol = Symbol("recompile_required");
pub(crate) const SENSITIVE: Symbol = Symbol("sensitive");
pub(crate) const COMPILE_TIME: Symbol = Symbol("compile_time");
pub(crate) const MIN: Symbol = Symbol("min");
pub(crate) const MAX: Symbol = Symbol("max");
pub(crate) const DEFAULT: Symbol = Symbol("default");
pub(crate) const ENUM_VALUES: Symbol = Symbol("enum_values");

pub(crate) const SCHEMA_CONTAINER_KEYS: &[Symbol] = &[SCHEMA, VERSION, CRATE, DEBUG];
pub(crate) const SCHEMA_FIELD_KEYS: &[Symbol] = &[
    NAME,
    RECOMPILE_REQUIRED,
    SENSITIVE,
    COMPILE_TIME,
    MIN,
    MAX,
    DEFAULT,
    ENUM_VALUES,
];
pub(crate) const ENUM_CONTAINER_KEYS: &[Symbol] = &[CRATE];
pub(crate) const ENUM_VARIANT_KEYS: &[Symbol] = &[NAME];

// `#[operator(...)]` and its container keys, and the port attributes with their keys.
pub(crate) const OPERATOR: Symbol = Symbol("operator");
pub(crate) const PARAMS: Symbol = Symbol("params");
pub(crate) const INPUT: Symbol = Symbol("input");
pub(crate) const OUTPUT: Symbol = Symbol("output");
pub(crate) const STORAGE: Symbol = Symbol("storage");
pub(crate) const MEMORY: Symbol = Symbol("memory");
pub(crate) const DTYPE: Symbol = Symbol("dtype");
pub(crate) const RANK: Symbol = Symbol("rank");
pub(crate) const MAX_RANK: Symbol = Symbol("max_rank");
pub(crate) const BOUNDS: Symbol = Symbol("bounds");
pub(crate) const BYTE_SPAN: Symbol = Symbol("byte_span");
pub(crate) const MEMORY_KIND: Symbol = Symbol("memory_kind");
pub(crate) const MAX_LOANS: Symbol = Symbol("max_loans");
pub(crate) const OPTIONAL: Symbol = Symbol("optional");
/// `#[output(forwards = input)]`: the output emits tensors received on that input.
pub(crate) const FORWARDS: Symbol = Symbol("forwards");
// Temporal contracts and rates.
pub(crate) const TRIGGER: Symbol = Symbol("trigger");
pub(crate) const WINDOW: Symbol = Symbol("window");
pub(crate) const LATEST: Symbol = Symbol("latest");
pub(crate) const HISTORY: Symbol = Symbol("history");
pub(crate) const MISSING: Symbol = Symbol("missing");
pub(crate) const EXPECTED_RATE: Symbol = Symbol("expected_rate");
pub(crate) const NOMINAL_RATE: Symbol = Symbol("nominal_rate");
pub(crate) const FOLLOWS: Symbol = Symbol("follows");
pub(crate) const BURST: Symbol = Symbol("burst");
pub(crate) const ON_ARRIVAL: Symbol = Symbol("on_arrival");
pub(crate) const CLOCK: Symbol = Symbol("clock");
pub(crate) const ANY_INPUT: Symbol = Symbol("any_input");
pub(crate) const ALL_INPUTS: Symbol = Symbol("all_inputs");
pub(crate) const HZ: Symbol = Symbol("hz");
pub(crate) const RATE: Symbol = Symbol("rate");
pub(crate) const TRIGGER_WORDS: &[Symbol] = &[ALL_INPUTS, ANY_INPUT, ON_ARRIVAL, CLOCK];
pub(crate) const CLOCK_KEYS: &[Symbol] = &[HZ, RATE];
pub(crate) const SKIP: Symbol = Symbol("skip");
pub(crate) const REUSE_LAST: Symbol = Symbol("reuse_last");
pub(crate) const MISSING_WORDS: &[Symbol] = &[SKIP, REUSE_LAST];

/// The helper attribute that carries `#[operator(...)]`'s arguments to its internal
/// derive (named in the derive's `attributes(...)` in `lib.rs`).
pub(crate) const OPERATOR_ARGS: Symbol = Symbol("__holo_operator");

pub(crate) const OPERATOR_CONTAINER_KEYS: &[Symbol] = &[PARAMS, TRIGGER, CRATE];
pub(crate) const OUTPUT_KEYS: &[Symbol] = &[
    NAME,
    STORAGE,
    MEMORY,
    DTYPE,
    RANK,
    MAX_RANK,
    BOUNDS,
    BYTE_SPAN,
    MEMORY_KIND,
    MAX_LOANS,
    NOMINAL_RATE,
    FOLLOWS,
    BURST,
    FORWARDS,
];
pub(crate) const INPUT_KEYS: &[Symbol] = &[
    NAME,
    MEMORY,
    DTYPE,
    RANK,
    OPTIONAL,
    WINDOW,
    LATEST,
    HISTORY,
    MISSING,
    EXPECTED_RATE,
];
/// Keys only an output takes.
pub(crate) const OUTPUT_ONLY_KEYS: &[Symbol] = &[
    STORAGE,
    MAX_RANK,
    BOUNDS,
    BYTE_SPAN,
    MEMORY_KIND,
    MAX_LOANS,
    NOMINAL_RATE,
    FOLLOWS,
    BURST,
    FORWARDS,
];
/// Keys only an input takes.
pub(crate) const INPUT_ONLY_KEYS: &[Symbol] =
    &[OPTIONAL, WINDOW, LATEST, HISTORY, MISSING, EXPECTED_RATE];
/// Keys a message input takes.
pub(crate) const MESSAGE_INPUT_KEYS: &[Symbol] = &[
    NAME,
    OPTIONAL,
    WINDOW,
    LATEST,
    HISTORY,
    MISSING,
    EXPECTED_RATE,
];
/// Keys a message output takes.
pub(crate) const MESSAGE_OUTPUT_KEYS: &[Symbol] = &[NAME, NOMINAL_RATE, FOLLOWS, BURST];

// Values of `storage`, `memory` and `dtype`: the word and the runtime variant it names.
pub(crate) const RUNTIME_POOL: Symbol = Symbol("runtime_pool");
pub(crate) const PASS_THROUGH: Symbol = Symbol("pass_through");
pub(crate) const STORAGE_WORDS: &[Symbol] = &[RUNTIME_POOL, PASS_THROUGH];
pub(crate) const MEMORY_WORDS: &[(Symbol, &str)] = &[
    (Symbol("host"), "Host"),
    (Symbol("pinned"), "PinnedHost"),
    (Symbol("cuda_device"), "CudaDevice"),
    (Symbol("cuda_managed"), "CudaManaged"),
    (Symbol("opencl_device"), "OpenClDevice"),
    (Symbol("device"), "Device"),
];
pub(crate) const DTYPE_WORDS: &[(Symbol, &str)] = &[
    (Symbol("u8"), "U8"),
    (Symbol("u16"), "U16"),
    (Symbol("u32"), "U32"),
    (Symbol("u64"), "U64"),
    (Symbol("i8"), "I8"),
    (Symbol("i16"), "I16"),
    (Symbol("i32"), "I32"),
    (Symbol("i64"), "I64"),
    (Symbol("f16"), "F16"),
    (Symbol("bf16"), "BF16"),
    (Symbol("f32"), "F32"),
    (Symbol("f64"), "F64"),
];
/// The concrete `MemoryKind` variants `memory_kind_map!` maps to.
pub(crate) const MEMORY_KIND_VARIANTS: &[Symbol] = &[
    Symbol("Host"),
    Symbol("PinnedHost"),
    Symbol("CudaDevice"),
    Symbol("CudaManaged"),
    Symbol("OpenClDevice"),
    Symbol("Device"),
];

// `#[byte_span_projector(...)]` and its keys.
pub(crate) const BYTE_SPAN_PROJECTOR: Symbol = Symbol("byte_span_projector");
pub(crate) const ID: Symbol = Symbol("id");
pub(crate) const READS: Symbol = Symbol("reads");
pub(crate) const PROJECTOR_KEYS: &[Symbol] = &[ID, READS, CRATE];

/// "`a`, `b` or `c`" for messages.
pub(crate) fn one_of(keys: &[Symbol]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{}`", k.0)).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

impl Symbol {
    /// The word as an identifier, for generated attributes.
    pub(crate) fn ident(self) -> Ident {
        Ident::new(self.0, proc_macro2::Span::call_site())
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
