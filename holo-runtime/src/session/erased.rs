//! Operators with their type erased, for the session's partition threads.

use super::context::{ExecutionContext, LifecycleContext};
use super::ports::PortBinder;
use crate::Result;
use crate::operator::Operator;

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
        Operator::compute(self, ctx).err().map(Box::new)
    }
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        Operator::stop(self, ctx)
    }
}

pub(crate) type OperatorBox = Box<dyn DynOperator>;
