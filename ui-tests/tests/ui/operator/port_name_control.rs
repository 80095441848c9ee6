use holo_runtime::{operator, Output, Tensor};

// A control character in a port name reached `--print-plan` raw (an escape sequence
// could rewrite the terminal's lines).
#[operator]
struct Source {
    #[output(name = "o\u{1b}[2Kx")]
    out: Output<Tensor>,
}

fn main() {}
