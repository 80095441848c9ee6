// A field named by a raw identifier: its key is `type`, as written in TOML and JSON, not
// `r#type`.
use holo_runtime::{param_ref, ParamSchema, ParamSet};

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "com.example.Raw", version = 1)]
struct Raw {
    #[param(default = 1)]
    r#type: u32,
}

fn main() {
    let set = ParamSet::<Raw>::from_toml_str("type = 3").unwrap();
    assert_eq!(set.values().r#type, 3);
    let set = ParamSet::<Raw>::from_json_str("{\"type\": 4}").unwrap();
    assert_eq!(set.values().r#type, 4);
    assert!(ParamSet::<Raw>::from_toml_str("r#type = 3").is_err());
    assert_eq!(param_ref!(Raw::r#type).path(), "type");
    assert!(format!("{:?}", set.values()).contains("type"));
}
