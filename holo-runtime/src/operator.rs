//! Operators: user structs with typed ports, lowered by `#[operator]`.

use std::marker::PhantomData;

use holo_params::ParamSchema;

use crate::Result;
use crate::session::{ExecutionContext, LifecycleContext, PortBinder};
use crate::spec::OperatorSpec;

/// Identifies an operator inside one [`Graph`](crate::Graph): its index, and which graph
/// it belongs to (a port handle of another graph given to `add_flow` is a compile
/// diagnostic, `GRAPH_FOREIGN_PORT`, never a flow to whatever operator has that index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperatorId(pub(crate) u32, pub(crate) u64);

impl OperatorId {
    /// The operator's index in its graph.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What `#[operator]` implements: the declared ports, their handles and binding.
///
/// Do not implement this by hand.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an operator",
    label = "this type has no `#[operator]` attribute",
    note = "add `#[operator(params = YourParams)]` to the struct and implement `holo_runtime::Operator` for it"
)]
pub trait OperatorPorts: Send + 'static {
    /// The operator's parameter schema.
    type Params: ParamSchema;
    /// The typed port handles `add_operator` returns (`<Name>Ports`).
    type Ports: Copy;
    /// Everything the operator declares.
    fn operator_spec() -> OperatorSpec<Self::Params>;
    /// Used by generated code; not a public API.
    #[doc(hidden)]
    fn __ports(id: OperatorId) -> Self::Ports;
    /// Used by generated code; not a public API.
    #[doc(hidden)]
    fn __bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()>;
}

/// The behaviour of an operator.
///
/// `compute` runs each time the operator's temporal contract fires. It must not block:
/// allocation either borrows a slot or fails with `ResourceExhausted` at once.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `holo_runtime::Operator`",
    note = "implement `holo_runtime::Operator` (at least `compute`) for the `#[operator]` struct"
)]
pub trait Operator: OperatorPorts {
    /// Runs once, after every pool is materialized and before the first `compute`.
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// One activation.
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()>;
    /// Runs once when the session stops.
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
}

/// A typed handle to an output port of an operator in a graph, for `add_flow`.
pub struct OutPort<T> {
    pub(crate) operator: OperatorId,
    pub(crate) port: u32,
    _payload: PhantomData<fn() -> T>,
}

/// A typed handle to an input port of an operator in a graph, for `add_flow`.
pub struct InPort<T> {
    pub(crate) operator: OperatorId,
    pub(crate) port: u32,
    _payload: PhantomData<fn() -> T>,
}

macro_rules! port_handle {
    ($name:ident) => {
        impl<T> $name<T> {
            #[doc(hidden)]
            pub const fn __new(operator: OperatorId, port: u32) -> Self {
                Self {
                    operator,
                    port,
                    _payload: PhantomData,
                }
            }
            /// The operator the port belongs to.
            pub fn operator(&self) -> OperatorId {
                self.operator
            }
        }
        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "{}({}, {})",
                    stringify!($name),
                    self.operator.0,
                    self.port
                )
            }
        }
    };
}
port_handle!(OutPort);
port_handle!(InPort);

/// An operator with its type erased, as a graph holds it and a session's partition thread
/// runs it.
pub(crate) trait DynOperator: Send {
    fn bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()>;
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()>;
    /// `None` on success. The error comes boxed, so the hot path returns one pointer in a
    /// register instead of a `Result<(), Error>` through memory.
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Option<Box<crate::Error>>;
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()>;
}

impl<O: Operator> DynOperator for O {
    fn bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()> {
        self.__bind(binder)
    }
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        Operator::start(self, ctx)
    }
    #[inline]
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Option<Box<crate::Error>> {
        match Operator::compute(self, ctx) {
            Ok(()) => None,
            Err(e) => Some(boxed(e)),
        }
    }
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        Operator::stop(self, ctx)
    }
}

/// A failed activation's error, boxed out of line: [`DynOperator::compute`] is a call and a
/// test on every activation, and its allocation would lie among them.
#[cold]
#[inline(never)]
fn boxed(e: crate::Error) -> Box<crate::Error> {
    Box::new(e)
}

pub(crate) type OperatorBox = Box<dyn DynOperator>;
