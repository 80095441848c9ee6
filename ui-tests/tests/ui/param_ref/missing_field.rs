use holo_runtime::param_ref;

fn main() {
    let _ = param_ref!(ResizeParams);
}
