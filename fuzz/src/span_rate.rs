//! Byte-span and rate arithmetic: a random byte-span expression (literals, a shape
//! parameter, the connected producer's bound, a projector, every checked operation) on
//! a pool, and random rates, follows ratios, clock rates, expected rates and headroom on
//! a rate chain, all compiled; and `automatic_queue_depth` against an exact reference.

use std::cell::RefCell;

use num_rational_free::reference_queue_depth;

use super::Bytes;
use holo_runtime::{
    ByteSpanExpr, CompileOptions, ConnectionOptions, ExecutionContext, Graph, Input, Operator,
    Output, ParamSchema, ParamSet, Rate, RateRatio, Result, Tensor, automatic_queue_depth,
    byte_span_projector, compile, input_max_byte_span, operator, param_ref,
    parameter_contiguous_byte_span, parameter_projected_byte_span, tensor_byte_span,
};

/// The parameters a byte-span expression reads.
#[derive(Clone, Debug, PartialEq, ParamSchema)]
#[param(schema = "fuzz.Span", version = 1)]
pub struct SpanParams {
    /// A shape, read contiguously.
    #[param(recompile_required, default = [1, 1])]
    pub shape: [u64; 2],
    /// What the projector returns (zero: a projector error).
    #[param(recompile_required, default = 1)]
    pub projected: u64,
}

#[byte_span_projector(id = "fuzz.Span.projected.v1", reads(projected))]
fn projected_bytes(params: &SpanParams) -> Result<u64> {
    if params.projected == 0 {
        Err(holo_runtime::Error::new(
            holo_runtime::ErrorCode::InvalidArgument,
            "the projector refuses zero",
        ))
    } else {
        Ok(params.projected)
    }
}

/// The rates of one case.
#[derive(Clone, Copy)]
struct Rates {
    source: Rate,
    follows: RateRatio,
    follows_again: RateRatio,
    clock: Rate,
    expected: Rate,
}

thread_local! {
    // Fuzz harness only: the declarations of one case, read by the operators' attribute
    // expressions while `compile` builds their specs on this thread.
    static SPAN: RefCell<Option<ByteSpanExpr<SpanParams>>> = const { RefCell::new(None) };
    static BOUND_SPAN: RefCell<Option<ByteSpanExpr<holo_runtime::NoParams>>> = const { RefCell::new(None) };
    static RATES: RefCell<Option<Rates>> = const { RefCell::new(None) };
}

fn span() -> ByteSpanExpr<SpanParams> {
    SPAN.with_borrow(|s| s.clone().unwrap_or_else(|| tensor_byte_span(1)))
}

fn upstream_span() -> ByteSpanExpr<holo_runtime::NoParams> {
    BOUND_SPAN.with_borrow(|s| s.clone().unwrap_or_else(|| tensor_byte_span(1)))
}

fn rates() -> Rates {
    RATES.with_borrow(|r| {
        r.unwrap_or(Rates {
            source: Rate::hz(1),
            follows: RateRatio::new(1, 1),
            follows_again: RateRatio::new(1, 1),
            clock: Rate::hz(1),
            expected: Rate::hz(1),
        })
    })
}

/// The upstream producer: a literal-span pool, and the rate chain's source.
#[operator]
struct Upstream {
    #[output(storage = runtime_pool, memory = host, dtype = u8, rank = 1, byte_span = upstream_span())]
    frames: Output<Tensor>,
    #[output(nominal_rate = rates().source)]
    ticks: Output<u64>,
}

/// The pool under test: its byte span is the case's expression.
#[operator(params = SpanParams, trigger = on_arrival(ticks))]
struct Spanned {
    frames: Input<Tensor>,
    ticks: Input<u64>,
    #[output(storage = runtime_pool, memory = host, dtype = u16, rank = 2, byte_span = span())]
    out: Output<Tensor>,
    #[output(follows(ticks, rates().follows))]
    ticks_out: Output<u64>,
}

/// A second follows ratio.
#[operator(trigger = on_arrival(ticks))]
struct Again {
    ticks: Input<u64>,
    #[output(follows(ticks, rates().follows_again))]
    ticks_out: Output<u64>,
}

/// A clocked consumer with an expected-rate fallback on a second input.
#[operator(trigger = clock(rate = rates().clock))]
struct Clocked {
    #[input(memory = host, dtype = u16, rank = 2, optional)]
    out: Input<Tensor>,
    #[input(optional)]
    ticks: Input<u64>,
    #[input(expected_rate = rates().expected, optional)]
    polled: Input<u64>,
}

/// Never emits: the expected-rate edge's producer.
#[operator]
struct Silent {
    ticks: Output<u64>,
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
idle!(Upstream, Spanned, Again, Clocked, Silent);

/// The exact references, without the runtime's rational type.
mod num_rational_free {
    /// `⌈a ÷ b⌉` for `b > 0`.
    pub(crate) fn ceil_div(a: u128, b: u128) -> u128 {
        a.div_ceil(b)
    }

    /// The seed's queue arithmetic in exact integers: `(arrivals, recommendation)`, or
    /// `None` when the rate or headroom is not positive or a count exceeds `u32`.
    pub(crate) fn reference_queue_depth(
        rate: (i64, i64),
        horizon: (i64, i64),
        headroom: (u64, u64),
    ) -> Option<(u32, u32)> {
        let (n, d) = rate;
        if d == 0 || n == 0 || (n < 0) != (d < 0) || headroom.0 == 0 || headroom.1 == 0 {
            return None;
        }
        let (hn, hd) = horizon;
        // rate × horizon = (n·hn) / (d·hd), both factors' signs folded in.
        let num = i128::from(n) * i128::from(hn);
        let den = i128::from(d) * i128::from(hd);
        let positive = (num > 0) == (den > 0);
        let (num, den) = (num.unsigned_abs(), den.unsigned_abs());
        let arrivals = if positive || num == 0 {
            ceil_div(num, den)
        } else {
            // A negative product: ⌈-x⌉ = -⌊x⌋, never a valid entry count unless zero.
            let floor = num / den;
            if floor == 0 {
                0
            } else {
                return None;
            }
        };
        let arrivals = u32::try_from(arrivals).ok()?;
        let rec = ceil_div(
            u128::from(arrivals) * u128::from(headroom.0),
            u128::from(headroom.1),
        );
        Some((arrivals, u32::try_from(rec).ok()?))
    }
}

/// A random expression and its exact value (`None`: overflow or a zero divisor).
fn expression(
    b: &mut Bytes<'_>,
    params: &SpanParams,
    bound: u64,
    depth: u32,
) -> (ByteSpanExpr<SpanParams>, Option<u64>) {
    let tag = b.byte();
    if depth >= 20 || b.is_empty() || tag % 8 < 3 {
        return match tag % 5 {
            0 | 3 => {
                let v = b.u64();
                (tensor_byte_span(v), Some(v))
            }
            1 => {
                let bytes = params.shape[0]
                    .checked_mul(params.shape[1])
                    .and_then(|e| e.checked_mul(2));
                (
                    parameter_contiguous_byte_span(param_ref!(SpanParams::shape)),
                    bytes,
                )
            }
            4 => (
                input_max_byte_span(holo_runtime::spec::InputName("frames")),
                Some(bound),
            ),
            _ => (
                parameter_projected_byte_span::<projected_bytes>(),
                (params.projected != 0).then_some(params.projected),
            ),
        };
    }
    let (lhs, a) = expression(b, params, bound, depth + 1);
    let (rhs, c) = expression(b, params, bound, depth + 1);
    let both = a.zip(c);
    match tag % 4 {
        0 => (
            lhs.multiplied_by(rhs),
            both.and_then(|(a, c)| a.checked_mul(c)),
        ),
        1 => (
            lhs.ceiling_divided_by(rhs),
            both.and_then(|(a, c)| (c != 0).then(|| a.div_ceil(c))),
        ),
        2 => (lhs.maximum_with(rhs), both.map(|(a, c)| a.max(c))),
        _ => (
            lhs.aligned_to(rhs),
            both.and_then(|(a, c)| {
                if c == 0 {
                    None
                } else {
                    a.div_ceil(c).checked_mul(c)
                }
            }),
        ),
    }
}

/// `byte_span_rate`: see the module.
pub fn byte_span_rate(data: &[u8]) {
    let mut b = Bytes::new(data);
    let rate = |b: &mut Bytes<'_>| Rate::new(b.i64(), b.i64());
    let ratio = |b: &mut Bytes<'_>| RateRatio::new(b.u64(), b.u64());

    // The seed's queue arithmetic, directly.
    let (rn, rd, hn, hd) = (b.i64(), b.i64(), b.i64(), b.i64());
    let headroom = ratio(&mut b);
    let floor = u32::from(b.byte());
    if hd != 0 {
        let got = automatic_queue_depth(
            Rate::new(rn, rd),
            num_rational::Ratio::new(i128::from(hn), i128::from(hd)),
            headroom,
            floor,
        );
        let want = reference_queue_depth(
            (rn, rd),
            (hn, hd),
            (headroom.numerator, headroom.denominator),
        );
        match (got, want) {
            (Some(s), Some((arrivals, rec))) => {
                assert_eq!((s.nominal_arrivals, s.recommendation), (arrivals, rec));
                assert_eq!(s.automatic_depth, floor.max(rec));
            }
            (None, None) => {}
            // A negative horizon may give no arrivals (an invalid product) either way.
            (got, want) => assert!(
                hn < 0 || hd < 0,
                "automatic_queue_depth({rn}/{rd} Hz, {hn}/{hd} s, {headroom}, {floor}) = {got:?}, exact {want:?}"
            ),
        }
    }

    // A graph whose pool and queues take the case's spans and rates.
    let params = SpanParams {
        shape: [b.u64(), b.u64()],
        projected: b.u64(),
    };
    let bound = b.u64();
    let case_rates = Rates {
        source: rate(&mut b),
        follows: ratio(&mut b),
        follows_again: ratio(&mut b),
        clock: rate(&mut b),
        expected: rate(&mut b),
    };
    let options = CompileOptions::default()
        .with_default_queue_depth(u32::from(b.byte() % 8))
        .with_automatic_queue_sizing(
            holo_runtime::AutomaticQueueSizing::default().with_headroom_ratio(ratio(&mut b)),
        );
    let depth = match b.byte() % 4 {
        0 => None,
        1 => Some(0),
        2 => Some(u32::from(b.byte())),
        _ => Some(u32::MAX - u32::from(b.byte())),
    };
    let (expr, span) = expression(&mut b, &params, bound, 0);
    // The slot bound is the span rounded up to a multiple of the pool's dtype size
    // (`Spanned::out` is `u16`): slots `per_slot_bytes` apart stay aligned for the
    // dtype; past `u64::MAX` it is an overflow, refused as a byte-span diagnostic.
    let want = span.and_then(|bytes| bytes.checked_next_multiple_of(2));
    SPAN.with_borrow_mut(|s| *s = Some(expr));
    BOUND_SPAN.with_borrow_mut(|s| *s = Some(tensor_byte_span(bound)));
    RATES.with_borrow_mut(|r| *r = Some(case_rates));

    let mut g = Graph::new();
    let up = g
        .add_operator(
            "up",
            Upstream {
                frames: Output::default(),
                ticks: Output::default(),
            },
            ParamSet::defaults().expect("no parameters"),
        )
        .expect("a fresh name");
    let sp = g
        .add_operator(
            "span",
            Spanned {
                frames: Input::default(),
                ticks: Input::default(),
                out: Output::default(),
                ticks_out: Output::default(),
            },
            ParamSet::from_values(params.clone()),
        )
        .expect("a fresh name");
    let again = g
        .add_operator(
            "again",
            Again {
                ticks: Input::default(),
                ticks_out: Output::default(),
            },
            ParamSet::defaults().expect("no parameters"),
        )
        .expect("a fresh name");
    let clocked = g
        .add_operator(
            "clocked",
            Clocked {
                out: Input::default(),
                ticks: Input::default(),
                polled: Input::default(),
            },
            ParamSet::defaults().expect("no parameters"),
        )
        .expect("a fresh name");
    let silent = g
        .add_operator(
            "silent",
            Silent {
                ticks: Output::default(),
            },
            ParamSet::defaults().expect("no parameters"),
        )
        .expect("a fresh name");
    let conn = || match depth {
        None => ConnectionOptions::default(),
        Some(d) => ConnectionOptions::default().with_queue_depth(d),
    };
    g.add_flow(up.frames, sp.frames, conn());
    g.add_flow(up.ticks, sp.ticks, conn());
    g.add_flow(sp.ticks_out, again.ticks, conn());
    g.add_flow(again.ticks_out, clocked.ticks, conn());
    g.add_flow(sp.out, clocked.out, conn());
    g.add_flow(silent.ticks, clocked.polled, conn());

    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(&g, options)));
    SPAN.with_borrow_mut(|s| *s = None);
    BOUND_SPAN.with_borrow_mut(|s| *s = None);
    RATES.with_borrow_mut(|r| *r = None);
    match result.unwrap_or_else(|p| std::panic::resume_unwind(p)) {
        Ok(plan) => {
            let pool = plan
                .tensor_allocation("span.out")
                .expect("the pool under test");
            assert_eq!(
                Some(pool.per_slot_bytes),
                want,
                "the plan's byte span differs from the exact value"
            );
            let up_pool = plan
                .tensor_allocation("up.frames")
                .expect("the upstream pool");
            assert_eq!(up_pool.per_slot_bytes, bound);
        }
        Err(diagnostics) => {
            assert!(
                !diagnostics.items.is_empty(),
                "a rejection without a diagnostic"
            );
            for d in &diagnostics.items {
                assert!(!d.code.name().is_empty(), "{d}");
                assert!(!d.message.is_empty(), "{d}");
            }
            if want.is_none() {
                // An expression with no value is refused, as a byte-span diagnostic.
                assert!(
                    diagnostics
                        .items
                        .iter()
                        .any(|d| d.code.name().contains("BYTE_SPAN")),
                    "{diagnostics}"
                );
            }
        }
    }
}
