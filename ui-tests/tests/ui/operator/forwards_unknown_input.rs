use holo_runtime::{operator, Input, Output, Tensor};

#[operator]
struct Relay {
    frames_in: Input<Tensor>,
    #[output(forwards = frame_in)]
    frames_out: Output<Tensor>,
}

fn main() {}
