//! The standard application command line: config loading and its errors, plan printing,
//! and a run with its summary.

mod common;

use common::{ByteSink, ByteSource};
use holo_runtime::app::{App, AppArgs, summary};
use holo_runtime::{CompileOptions, ConnectionOptions, ErrorCode, Graph, ParamSchema, ParamSet};

#[derive(Clone, Debug, ParamSchema)]
#[param(schema = "test.CameraParams", version = 1)]
struct CameraParams {
    #[param(min = 1, max = 256, default = 16)]
    frame_bytes: u64,
    #[param(default = 7)]
    fill: u8,
}

fn config(text: &str) -> tempfile_path::TempPath {
    tempfile_path::write(text)
}

mod tempfile_path {
    pub struct TempPath(pub std::path::PathBuf);
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    pub fn write(text: &str) -> TempPath {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "holo-app-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = std::fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        TempPath(p)
    }
}

fn args(path: Option<&std::path::Path>) -> AppArgs {
    AppArgs {
        config: path.map(std::path::Path::to_path_buf),
        frames: Some(20),
        ..AppArgs::default()
    }
}

fn build(app: &mut App) -> holo_runtime::Result<(Graph, CompileOptions)> {
    let cam = app.params::<CameraParams>("camera")?;
    let (src, _) = ByteSource::new(cam.values().frame_bytes, cam.values().fill);
    let (sink, _) = ByteSink::new(cam.values().fill, 0);
    let mut g = Graph::new();
    // ByteSource declares no schema of its own; the camera table configures it here.
    let a = g.add_operator("camera", src, ParamSet::defaults()?)?;
    let b = g.add_operator("display", sink, ParamSet::defaults()?)?;
    g.add_flow(a.frames, b.frames, ConnectionOptions::default());
    Ok((g, CompileOptions::default()))
}

#[test]
fn a_config_file_sets_parameters_by_operator_name_and_the_run_reports() {
    let file = config("[camera]\nframe_bytes = 32\nfill = 3\n");
    let mut app = App::new(args(Some(&file.0)), "").unwrap();
    let (g, options) = build(&mut app).unwrap();
    let report = app.run(g, options).unwrap().expect("a run");
    assert_eq!(report.activations[0], ("camera".to_owned(), 20));
    assert_eq!(report.pools[0].free_at_end, report.pools[0].slot_count);
    let text = summary(&report);
    assert!(text.starts_with("run summary: "), "{text}");
    assert!(text.contains("pool camera.frames"), "{text}");
}

#[test]
fn config_errors_name_the_file_the_operator_and_the_field() {
    let file = config("[camera]\nframe_bytes = 1000\n");
    let mut app = App::new(args(Some(&file.0)), "").unwrap();
    let err = build(&mut app).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert_eq!(
        err.location(),
        Some(format!("{}: camera.frame_bytes", file.0.display()).as_str())
    );

    let file = config("[camra]\n");
    let mut app = App::new(args(Some(&file.0)), "").unwrap();
    let (g, options) = build(&mut app).unwrap();
    let err = app.run(g, options).unwrap_err();
    assert_eq!(
        err.message(),
        "no operator is named \"camra\"; the operators are: camera"
    );

    let file = config("[camera\nframe_bytes = 1\n");
    let err = App::new(args(Some(&file.0)), "").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert_eq!(
        err.location(),
        Some(format!("{}, line 1", file.0.display()).as_str())
    );

    let err = App::new(
        args(Some(std::path::Path::new("/nonexistent/holo.toml"))),
        "",
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
}

#[test]
fn the_embedded_default_is_used_without_a_config_and_printing_alone_does_not_run() {
    let mut app = App::new(
        AppArgs {
            print_plan: true,
            ..AppArgs::default()
        },
        "[camera]\nframe_bytes = 8\n",
    )
    .unwrap();
    let (g, options) = build(&mut app).unwrap();
    assert!(app.run(g, options).unwrap().is_none());
}
