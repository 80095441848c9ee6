//! Memory kind chosen by a parameter, frozen into the plan when it is compiled.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use holo_params::{ParamEnum, ParamRef, ParamSchema};

use crate::MemoryKind;
use crate::spec::bytespan::ParamDependency;

type KindFn = dyn Fn(&dyn Any) -> Option<(&'static str, MemoryKind)> + Send + Sync;

/// How an output's memory kind follows a parameter.
#[derive(Clone)]
pub struct MemoryKindDerivation<P> {
    pub(crate) dependency: ParamDependency,
    /// `true` for the one-argument form over a `MemoryKind` field.
    pub(crate) exact: bool,
    pub(crate) resolve: Arc<KindFn>,
    _params: std::marker::PhantomData<fn(&P)>,
}

impl<P> fmt::Debug for MemoryKindDerivation<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter_memory_kind({})", self.dependency.path)
    }
}

impl<P> MemoryKindDerivation<P> {
    pub(crate) fn erase(self) -> MemoryKindDerivation<()> {
        MemoryKindDerivation {
            dependency: self.dependency,
            exact: self.exact,
            resolve: self.resolve,
            _params: std::marker::PhantomData,
        }
    }
}

/// Maps an operator's own enum exhaustively to concrete kinds. Write the mapping with
/// `memory_kind_map!`, which expands to a `match` with no `_` arm: a missing variant
/// does not compile, and a duplicated one is a macro error.
pub fn parameter_memory_kind<P: ParamSchema, E: ParamEnum>(
    field: ParamRef<P, E>,
    mapping: fn(E) -> MemoryKind,
) -> MemoryKindDerivation<P> {
    MemoryKindDerivation {
        dependency: ParamDependency::of(&field),
        exact: false,
        resolve: Arc::new(move |params: &dyn Any| {
            params.downcast_ref::<P>().map(|p| {
                let v = *field.get(p);
                (v.wire_name(), mapping(v))
            })
        }),
        _params: std::marker::PhantomData,
    }
}

/// The one-argument form: the field is itself a [`MemoryKind`], whose
/// `#[param(enum_values(...))]` domain must be non-empty and lists exactly the kinds the
/// operator supports (checked when the plan is compiled).
pub fn parameter_memory_kind_exact<P: ParamSchema>(
    field: ParamRef<P, MemoryKind>,
) -> MemoryKindDerivation<P> {
    MemoryKindDerivation {
        dependency: ParamDependency::of(&field),
        exact: true,
        resolve: Arc::new(move |params: &dyn Any| {
            params.downcast_ref::<P>().map(|p| {
                let v = *field.get(p);
                (v.wire_name(), v)
            })
        }),
        _params: std::marker::PhantomData,
    }
}
