use holo_runtime::ParamSchema;

// `min`/`max` on a string or a bool were accepted and never checked: `name = ""` loaded.
#[derive(Clone, ParamSchema)]
#[param(schema = "com.example.Unbounded", version = 1)]
struct Unbounded {
    #[param(min = 1, default = String::from("cam"))]
    name: String,
    #[param(max = 3, default = true)]
    flag: bool,
    #[param(min = 0, max = 255, default = [1, 2])]
    pair: [u8; 2],
}

fn main() {}
