use holo_runtime::ParamSchema;

// `300u8` is no `u8`, and the field is a `u16`: the suffix was dropped unchecked.
#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Suffixed", version = 1)]
struct Suffixed {
    #[param(max = 300u8, default = 1)]
    x: u16,
}

fn main() {}
