use holo_runtime::{operator, Input, Output};

#[operator]
struct Thumbnailer {
    frames: Input<u64>,
    #[output(follows(frame, RateRatio::new(1, 4)))]
    thumbnails: Output<u64>,
}

fn main() {}
