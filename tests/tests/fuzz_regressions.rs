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

/// `regressions/byte_span_rate/rate-ceiling-overflow`: libFuzzer's minimized crasher of
/// the rate-ceiling overflow (see `a_rate_near_i128_max_sizes_its_queue` below).
#[test]
fn byte_span_rate_inputs() {
    assert!(replay("byte_span_rate", holo_fuzz::byte_span_rate) > 0);
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

mod rates_near_the_limit {
    use holo_runtime::{
        CompileOptions, ConnectionOptions, ExecutionContext, Graph, Input, Operator, Output,
        ParamSet, Result, compile, operator,
    };

    #[operator]
    struct Source {
        #[output(nominal_rate = Rate::new(i64::MAX, i64::MAX - 2))]
        out: Output<u64>,
    }

    #[operator(trigger = on_arrival(input))]
    struct Relay {
        input: Input<u64>,
        #[output(follows(input, RateRatio::new(u64::MAX - 2, u64::MAX - 4)))]
        out: Output<u64>,
    }

    #[operator(trigger = clock(hz = 1))]
    struct Clocked {
        input: Input<u64>,
    }

    macro_rules! idle {
        ($($t:ty),*) => {$(
            impl Operator for $t {
                fn compute(&mut self, _ctx: &mut ExecutionContext<'_>) -> Result<()> {
                    Ok(())
                }
            }
        )*};
    }
    idle!(Source, Relay, Clocked);

    /// Found while fuzzing byte-span and rate arithmetic: a followed rate whose exact
    /// value needs nearly all of i128 (numerator and denominator both near 2^127) made
    /// `compile` panic (`attempt to add with overflow` in `Ratio::ceil`, called by the
    /// queue sizing's `ceil_entries`). Its queue is now sized exactly: ⌈rate × 1 s⌉ = 2.
    #[test]
    fn a_rate_near_i128_max_sizes_its_queue() {
        let mut g = Graph::new();
        let s = g
            .add_operator(
                "s",
                Source {
                    out: Output::default(),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        let r = g
            .add_operator(
                "r",
                Relay {
                    input: Input::default(),
                    out: Output::default(),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        let c = g
            .add_operator(
                "c",
                Clocked {
                    input: Input::default(),
                },
                ParamSet::defaults().unwrap(),
            )
            .unwrap();
        g.add_flow(s.out, r.input, ConnectionOptions::default());
        g.add_flow(r.out, c.input, ConnectionOptions::default());
        let plan = compile(&g, CompileOptions::default()).unwrap();
        let text = plan.render_human();
        assert!(
            text.contains("× horizon 1 s → 2 arrivals × 2/1 → 4"),
            "{text}"
        );
        eprintln!("{text}");
    }
}
