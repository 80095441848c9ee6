//! Byte-span expressions: per-slot byte capacity derived, when the plan is compiled, from
//! literals, parameters, a connected producer's bound, or a named projector.
//!
//! An expression is stable setup metadata. `compile` evaluates it once, with checked
//! arithmetic, against generation zero of the operator's parameters, and writes the result
//! into the plan's `TensorAllocationPlanRecord`. The runtime never retains or evaluates it.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use holo_params::{FieldDescriptor, ParamRef, ParamSchema};

use crate::Result;

/// Most nodes one expression may have.
pub const MAX_EXPRESSION_NODES: usize = 32;
/// Deepest nesting one expression may have.
pub const MAX_EXPRESSION_DEPTH: usize = 16;
/// Most dependencies (parameter fields and inputs) one expression may read.
pub const MAX_EXPRESSION_DEPENDENCIES: usize = 8;
/// Most shape extents a parameter shape may have: a shape is one tensor's, so this is
/// the largest rank.
pub const MAX_SHAPE_EXTENTS: usize = crate::spec::dtype::MAX_TENSOR_RANK as usize;

/// A parameter field an expression reads, by full path.
#[derive(Clone)]
pub struct ParamDependency {
    /// The schema id.
    pub schema_id: &'static str,
    /// The path as keys (`geometry.width`).
    pub path: String,
    /// The field's descriptor.
    pub descriptor: &'static FieldDescriptor,
    /// The field is sensitive, or a struct its path goes through is.
    pub sensitive: bool,
}

impl fmt::Debug for ParamDependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.schema_id, self.path)
    }
}

impl ParamDependency {
    pub(crate) fn of<S: ParamSchema, T>(r: &ParamRef<S, T>) -> Self {
        Self {
            schema_id: r.schema_id(),
            path: r.path(),
            descriptor: r.descriptor(),
            sensitive: r.descriptor().sensitive || r.under_sensitive(),
        }
    }

    /// Whether the compiler may read the field: compile-time or recompile-required, and
    /// neither it nor a struct on its path sensitive.
    pub fn is_compile_readable(&self) -> bool {
        !self.sensitive && self.descriptor.is_compile_readable()
    }
}

type ExtentsFn = dyn Fn(&dyn Any) -> Option<Vec<u64>> + Send + Sync;
type ProjectFn = dyn Fn(&dyn Any) -> Option<Result<u64>> + Send + Sync;

#[derive(Clone)]
pub(crate) enum ByteSpanNode {
    Literal(u64),
    ParameterContiguous {
        dep: ParamDependency,
        extents: Arc<ExtentsFn>,
    },
    InputMax {
        input: &'static str,
    },
    Projected {
        id: &'static str,
        implementation: &'static str,
        reads: Vec<ParamDependency>,
        project: Arc<ProjectFn>,
    },
    Binary {
        op: ByteSpanOp,
        lhs: Arc<ByteSpanNode>,
        rhs: Arc<ByteSpanNode>,
    },
}

/// A checked binary operation of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ByteSpanOp {
    Multiply,
    CeilingDivide,
    Maximum,
    AlignTo,
}

impl ByteSpanOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ByteSpanOp::Multiply => "multiplied_by",
            ByteSpanOp::CeilingDivide => "ceiling_divided_by",
            ByteSpanOp::Maximum => "maximum_with",
            ByteSpanOp::AlignTo => "aligned_to",
        }
    }
}

/// A byte-span expression over parameters of schema `P`.
///
/// Build one with [`tensor_byte_span`], [`parameter_contiguous_byte_span`],
/// [`input_max_byte_span`] or [`parameter_projected_byte_span`], and combine with
/// [`multiplied_by`](Self::multiplied_by), [`ceiling_divided_by`](Self::ceiling_divided_by),
/// [`maximum_with`](Self::maximum_with) and [`aligned_to`](Self::aligned_to). The schema
/// type parameter makes a reference to another operator's parameters a rustc error.
pub struct ByteSpanExpr<P> {
    pub(crate) node: Arc<ByteSpanNode>,
    _params: PhantomData<fn(&P)>,
}

impl<P> Clone for ByteSpanExpr<P> {
    fn clone(&self) -> Self {
        Self::from_node(ByteSpanNode::clone(&self.node))
    }
}

impl<P> fmt::Debug for ByteSpanExpr<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(&self.node))
    }
}

impl<P> ByteSpanExpr<P> {
    fn from_node(node: ByteSpanNode) -> Self {
        Self {
            node: Arc::new(node),
            _params: PhantomData,
        }
    }

    fn binary(self, op: ByteSpanOp, rhs: ByteSpanExpr<P>) -> Self {
        Self::from_node(ByteSpanNode::Binary {
            op,
            lhs: self.node,
            rhs: rhs.node,
        })
    }

    /// `self × rhs`, overflow-checked.
    pub fn multiplied_by(self, rhs: ByteSpanExpr<P>) -> Self {
        self.binary(ByteSpanOp::Multiply, rhs)
    }

    /// `⌈self ÷ rhs⌉`; a zero divisor rejects the plan.
    pub fn ceiling_divided_by(self, rhs: ByteSpanExpr<P>) -> Self {
        self.binary(ByteSpanOp::CeilingDivide, rhs)
    }

    /// `max(self, rhs)`.
    pub fn maximum_with(self, rhs: ByteSpanExpr<P>) -> Self {
        self.binary(ByteSpanOp::Maximum, rhs)
    }

    /// `self` rounded up to a multiple of `rhs`, overflow-checked; a zero alignment
    /// rejects the plan.
    pub fn aligned_to(self, rhs: ByteSpanExpr<P>) -> Self {
        self.binary(ByteSpanOp::AlignTo, rhs)
    }

    /// Renders the expression the way the plan prints it.
    pub fn render(&self) -> String {
        render(&self.node)
    }
}

pub(crate) fn render(node: &ByteSpanNode) -> String {
    match node {
        ByteSpanNode::Literal(v) => format!("tensor_byte_span({v})"),
        ByteSpanNode::ParameterContiguous { dep, .. } => {
            format!("parameter_contiguous_byte_span({})", dep.path)
        }
        ByteSpanNode::InputMax { input } => format!("input_max_byte_span({input})"),
        ByteSpanNode::Projected { id, .. } => format!("parameter_projected_byte_span({id})"),
        ByteSpanNode::Binary { op, lhs, rhs } => {
            format!("{}.{}({})", render(lhs), op.name(), render(rhs))
        }
    }
}

/// A literal byte span.
pub fn tensor_byte_span<P>(bytes: u64) -> ByteSpanExpr<P> {
    ByteSpanExpr::from_node(ByteSpanNode::Literal(bytes))
}

/// A parameter that holds a tensor shape: `[u64; N]`, `[u32; N]`, `[usize; N]` or a
/// `BoundedVec` of those.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shape parameter",
    note = "a shape parameter is `[u64; N]`, `[u32; N]`, `[usize; N]` or `BoundedVec<u64 | u32 | usize, N>`"
)]
pub trait ShapeParam: 'static {
    /// The extents.
    fn extents(&self) -> Vec<u64>;
}

#[allow(
    clippy::cast_lossless,
    reason = "`usize` has no `From` into `u64`; every extent type widens"
)]
mod shape_params {
    use super::ShapeParam;
    macro_rules! shape_param {
    ($($t:ty),*) => {$(
        impl<const N: usize> ShapeParam for [$t; N] {
            fn extents(&self) -> Vec<u64> {
                self.iter().map(|&e| u64::try_from(e).unwrap_or(u64::MAX)).collect()
            }
        }
        impl<const N: usize> ShapeParam for holo_params::BoundedVec<$t, N> {
            fn extents(&self) -> Vec<u64> {
                self.iter().map(|&e| u64::try_from(e).unwrap_or(u64::MAX)).collect()
            }
        }
    )*};
}
    shape_param!(u64, u32, usize);
}

/// The contiguous byte span of a shape parameter: the product of its extents times the
/// output's dtype size. The shape's length must equal the output's exact rank.
pub fn parameter_contiguous_byte_span<P: ParamSchema, T: ShapeParam>(
    shape: ParamRef<P, T>,
) -> ByteSpanExpr<P> {
    let dep = ParamDependency::of(&shape);
    ByteSpanExpr::from_node(ByteSpanNode::ParameterContiguous {
        dep,
        extents: Arc::new(move |params: &dyn Any| {
            params.downcast_ref::<P>().map(|p| shape.get(p).extents())
        }),
    })
}

/// Names an input of the operator being declared, inside a byte-span expression.
/// `#[operator]` puts one in scope for each input field, under the field's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputName(pub &'static str);

/// The finite byte bound of the single concrete producer connected to `input`.
/// Disconnected, fan-in and unbounded producers reject the plan.
pub fn input_max_byte_span<P>(input: InputName) -> ByteSpanExpr<P> {
    ByteSpanExpr::from_node(ByteSpanNode::InputMax { input: input.0 })
}

/// A named, versioned custom byte-span formula; implemented by `#[byte_span_projector]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a byte-span projector",
    note = "add `#[byte_span_projector(id = \"...\", reads(...))]` to the function"
)]
pub trait ByteSpanProjector: 'static {
    /// The parameter schema the projector reads.
    type Params: ParamSchema;
    /// The stable, versioned id (ends in `.vN`).
    const ID: &'static str;
    /// The declared reads, as Rust field paths.
    fn reads() -> Vec<ParamDependency>;
    /// Runs the projector.
    fn project(params: &Self::Params) -> Result<u64>;
}

/// The byte span a projector computes from generation zero.
pub fn parameter_projected_byte_span<J: ByteSpanProjector>() -> ByteSpanExpr<J::Params> {
    ByteSpanExpr::from_node(ByteSpanNode::Projected {
        id: J::ID,
        implementation: std::any::type_name::<J>(),
        reads: J::reads(),
        project: Arc::new(|params: &dyn Any| params.downcast_ref::<J::Params>().map(J::project)),
    })
}
