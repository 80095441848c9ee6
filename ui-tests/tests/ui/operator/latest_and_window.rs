use holo_runtime::{operator, Input};

#[operator]
struct Fusion {
    #[input(latest, window)]
    imu: Input<u64>,
}

fn main() {}
