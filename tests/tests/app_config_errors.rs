//! `--config FILE`: a file that is missing is `NotFound`; one that exists but cannot be a
//! config (a directory, more than 16 MiB, bytes that are not UTF-8) is `InvalidArgument`
//! naming the file and what is wrong (issue 11: both were reported as `NotFound`).

use std::path::PathBuf;

use holo_runtime::ErrorCode;
use holo_runtime::app::{App, AppArgs};

/// A path under the system temp directory, removed (file or directory) on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        Scratch(std::env::temp_dir().join(format!("holo-app-config-{}-{what}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn load(path: &std::path::Path) -> holo_runtime::Error {
    let args = AppArgs {
        config: Some(path.to_path_buf()),
        ..AppArgs::default()
    };
    App::new(args, "").unwrap_err()
}

#[test]
fn a_directory_is_an_invalid_argument_that_says_so() {
    let dir = Scratch::new("dir.toml");
    std::fs::create_dir(&dir.0).unwrap();
    let err = load(&dir.0);
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert_eq!(err.message(), "the config file is a directory");
    assert_eq!(err.location(), Some(dir.0.display().to_string().as_str()));
    assert_eq!(
        err.to_string(),
        format!(
            "InvalidArgument: the config file is a directory (at {})",
            dir.0.display()
        )
    );
}

#[test]
fn a_file_that_is_not_utf8_is_an_invalid_argument_with_the_offset() {
    let file = Scratch::new("latin1.toml");
    // "[camera]\nname = \"caf\xe9\"\n": a Latin-1 é at byte offset 20.
    let mut bytes = b"[camera]\nname = \"caf".to_vec();
    bytes.push(0xe9);
    bytes.extend_from_slice(b"\"\n");
    std::fs::write(&file.0, &bytes).unwrap();
    let err = load(&file.0);
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert_eq!(
        err.message(),
        "the config file is not UTF-8 text (invalid byte at offset 20)"
    );
    assert_eq!(err.location(), Some(file.0.display().to_string().as_str()));
}

#[test]
fn a_missing_file_stays_not_found() {
    let missing = Scratch::new("missing.toml");
    let err = load(&missing.0);
    assert_eq!(err.code(), ErrorCode::NotFound, "{err}");
    assert!(
        err.message().starts_with("cannot read the config file: "),
        "{err}"
    );
    assert_eq!(
        err.location(),
        Some(missing.0.display().to_string().as_str())
    );
}

#[test]
fn an_endless_config_is_refused_past_16_mib_not_read_until_memory_runs_out() {
    // `/dev/zero` never ends (and its zero bytes are UTF-8): without a limit, reading it
    // ran until memory did.
    let err = load(std::path::Path::new("/dev/zero"));
    assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    assert!(err.message().contains("larger than 16 MiB"), "{err}");
    assert_eq!(err.location(), Some("/dev/zero"));
    // A file of exactly the limit is read: one comment line, an empty config.
    let file = Scratch::new("limit.toml");
    std::fs::write(&file.0, vec![b'#'; 16 << 20]).unwrap();
    let args = AppArgs {
        config: Some(file.0.clone()),
        ..AppArgs::default()
    };
    App::new(args, "").unwrap();
}
