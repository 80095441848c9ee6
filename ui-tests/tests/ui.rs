//! Every authoring mistake holo's macros promise to catch, one file each, with the
//! compiler output checked in beside it.
//!
//! In each directory, `pass_*.rs` must compile and run; every other `.rs` must fail to
//! compile with the `.stderr` beside it. The files are listed with `std::fs` rather than
//! a glob, so that no file is left out: `[!p]*.rs` once skipped every failing case whose
//! name began with `p`.

use std::path::{Path, PathBuf};

/// The directories of `tests/ui`, one per macro (and `graph` for typed flows, `surface`
/// for the crate's one path per item).
const DIRS: [&str; 8] = [
    "param_schema",
    "param_enum",
    "param_ref",
    "operator",
    "byte_span_projector",
    "memory_kind_map",
    "graph",
    "surface",
];

const PASS_PREFIX: &str = "pass_";

/// The pass cases and the compile-fail cases of `tests/ui/<dir>`, sorted, as paths
/// relative to the crate (how trybuild names them in its output).
fn cases(dir: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut pass, mut fail) = (Vec::new(), Vec::new());
    for name in file_names(dir) {
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let path = Path::new("tests/ui").join(dir).join(&name);
        if stem.starts_with(PASS_PREFIX) {
            pass.push(path);
        } else {
            fail.push(path);
        }
    }
    pass.sort();
    fail.sort();
    (pass, fail)
}

/// The names of the files in `tests/ui/<dir>`.
fn file_names(dir: &str) -> Vec<String> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ui")
        .join(dir);
    std::fs::read_dir(&full)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", full.display()))
        .map(|entry| {
            let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", full.display()));
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect()
}

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    for dir in DIRS {
        let (pass, fail) = cases(dir);
        for case in pass {
            t.pass(case);
        }
        for case in fail {
            t.compile_fail(case);
        }
    }
}

/// Every `.rs` under `tests/ui` is run as exactly one kind of case, every compile-fail
/// case has its `.stderr` and every `.stderr` its case, and no directory is left out.
#[test]
fn every_case_file_is_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut dirs: Vec<String> = std::fs::read_dir(&root)
        .expect("tests/ui lists")
        .filter_map(|entry| {
            let entry = entry.expect("tests/ui lists");
            entry
                .file_type()
                .is_ok_and(|t| t.is_dir())
                .then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect();
    dirs.sort_unstable();
    let mut listed = DIRS.map(str::to_owned).to_vec();
    listed.sort_unstable();
    assert_eq!(dirs, listed, "every directory of tests/ui is in DIRS");

    let mut problems = Vec::new();
    for dir in DIRS {
        let (pass, fail) = cases(dir);
        let names = file_names(dir);
        for name in &names {
            let path = Path::new("tests/ui").join(dir).join(name);
            if let Some(stem) = name.strip_suffix(".rs") {
                let runs = usize::from(pass.contains(&path)) + usize::from(fail.contains(&path));
                if runs != 1 {
                    problems.push(format!("{} runs {runs} times", path.display()));
                }
                let stderr = format!("{stem}.stderr");
                if fail.contains(&path) && !names.contains(&stderr) {
                    problems.push(format!("{} has no {stderr}", path.display()));
                }
            } else if let Some(stem) = name.strip_suffix(".stderr") {
                let case = Path::new("tests/ui").join(dir).join(format!("{stem}.rs"));
                if !fail.contains(&case) {
                    problems.push(format!(
                        "{} belongs to no compile-fail case",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
