//! Operators with their type erased, for the session's partition threads.

use super::context::{ExecutionContext, LifecycleContext};
use super::ports::PortBinder;
use crate::Result;
use crate::operator::Operator;

pub(crate) trait DynOperator: Send {
    fn bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()>;
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()>;
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()>;
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()>;
}

impl<O: Operator> DynOperator for O {
    fn bind(&mut self, binder: &mut PortBinder<'_>) -> Result<()> {
        self.__bind(binder)
    }
    fn start(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        Operator::start(self, ctx)
    }
    fn compute(&mut self, ctx: &mut ExecutionContext<'_>) -> Result<()> {
        Operator::compute(self, ctx)
    }
    fn stop(&mut self, ctx: &mut LifecycleContext<'_>) -> Result<()> {
        Operator::stop(self, ctx)
    }
}

pub(crate) type OperatorBox = Box<dyn DynOperator>;
