//! A flag that prints a document prints it alone on stdout, so two of them together are a
//! usage error naming both (issue 11: `--plan-json` and `--plan-dot` shared stdout with
//! titles, summaries and each other). The examples' stdout itself is checked by
//! `examples/tests/cli.rs`.

use holo_runtime::ErrorCode;
use holo_runtime::app::{App, AppArgs};

#[test]
fn two_plan_flags_are_a_usage_error_naming_both() {
    let cases = [
        (true, true, false, "--print-plan and --plan-json"),
        (true, false, true, "--print-plan and --plan-dot"),
        (false, true, true, "--plan-json and --plan-dot"),
        (
            true,
            true,
            true,
            "--print-plan, --plan-json, and --plan-dot",
        ),
    ];
    for (print_plan, plan_json, plan_dot, named) in cases {
        let args = AppArgs {
            print_plan,
            plan_json,
            plan_dot,
            ..AppArgs::default()
        };
        let err = App::new(args, "").unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
        assert_eq!(
            err.message(),
            format!("{named} each print the plan on stdout; give one of them")
        );
    }
}

#[test]
fn one_plan_flag_is_accepted() {
    for (print_plan, plan_json, plan_dot) in [
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ] {
        let args = AppArgs {
            print_plan,
            plan_json,
            plan_dot,
            ..AppArgs::default()
        };
        App::new(args, "").unwrap();
    }
}
