//! The fuzz targets' inputs on stable (RELIABILITY.md): every file under
//! `fuzz/regressions/<target>/` (minimized inputs that once failed, kept after the fix)
//! and `fuzz/seeds/<target>/` goes through the same entry point `cargo fuzz run <target>`
//! calls (`fuzz/src/lib.rs`, included here), which panics on a finding.

#[path = "../../fuzz/src/lib.rs"]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the fuzz crate's public entry points"
)]
mod holo_fuzz;

use std::path::Path;

/// Runs `entry` on every file of `fuzz/{regressions,seeds}/<target>/`; returns how many.
fn replay(target: &str, entry: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut n = 0;
    for dir in ["regressions", "seeds"] {
        let Ok(files) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = files.map(|f| f.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap();
            eprintln!("{target}: {}", path.display());
            entry(&bytes);
            n += 1;
        }
    }
    n
}

#[test]
fn params_toml_inputs() {
    assert!(replay("params_toml", holo_fuzz::params_toml) > 0);
}

#[test]
fn params_json_inputs() {
    assert!(replay("params_json", holo_fuzz::params_json) > 0);
}

#[test]
fn app_config_inputs() {
    assert!(replay("app_config", holo_fuzz::app_config) > 0);
}

#[test]
fn byte_span_rate_inputs() {
    replay("byte_span_rate", holo_fuzz::byte_span_rate);
}

#[test]
fn dlpack_import_inputs() {
    replay("dlpack_import", holo_fuzz::dlpack_import);
}

/// Hand-picked edges of each target, so that a target with no checked-in file still runs
/// something on stable.
#[test]
fn targets_accept_the_empty_and_saturated_inputs() {
    let entries: [fn(&[u8]); 5] = [
        holo_fuzz::params_toml,
        holo_fuzz::params_json,
        holo_fuzz::app_config,
        holo_fuzz::byte_span_rate,
        holo_fuzz::dlpack_import,
    ];
    for entry in entries {
        entry(&[]);
        entry(&[0xFF; 64]);
        entry(&[0x00; 64]);
        entry(b"\xC3\x28 not utf-8");
    }
}
