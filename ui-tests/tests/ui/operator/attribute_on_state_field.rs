use holo_runtime::operator;

#[operator]
struct Resize {
    #[input]
    frames_seen: u64,
}

fn main() {}
