//! Errors as values: one [`Error`] type with an [`ErrorCode`] a caller can branch on.
//!
//! The type lives in `holo-params` because parameter loading is the lowest layer that
//! reports errors; `holo-runtime` re-exports it as `holo_runtime::Error`, so there is one
//! error vocabulary across the whole framework.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

/// The stable, matchable category of an [`Error`].
///
/// The names follow the Holoscan vocabulary (`kResourceExhausted` is
/// [`ErrorCode::ResourceExhausted`]); [`ErrorCode::name`] gives the stable spelling used
/// in plan JSON and diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request is well-formed but this build, device or plan does not support it
    /// (for example writing from a stream that is not the operator's compute stream).
    NotSupported,
    /// The caller has no write authority (for example mutable access to a received tensor).
    PermissionDenied,
    /// A bounded resource is exhausted right now (a pool has no free slot, a release-stream
    /// cap is full). Returned at once; holo never blocks waiting for capacity.
    ResourceExhausted,
    /// A peer broke the declared contract (a pass-through tensor that does not match the
    /// consumer's `TensorInputSpec`).
    ProtocolError,
    /// Checked arithmetic overflowed.
    ArithmeticOverflow,
    /// A value given by the user is malformed, out of bounds or unknown.
    InvalidArgument,
    /// A bounded queue is full and its policy refuses the new entry.
    Backpressured,
    /// A device the plan needs is not present or could not be initialized.
    DeviceUnavailable,
    /// A lookup named something that does not exist (an operator, a port, a config table).
    NotFound,
    /// The session was stopped, or an operation raced teardown.
    Cancelled,
    /// An invariant of holo itself broke; please report it.
    Internal,
    /// A peer process exited or was killed: the exporter of a cross-process topic its
    /// subscriber was receiving from (docs/IPC.md).
    PeerLost,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::NotSupported,
        ErrorCode::PermissionDenied,
        ErrorCode::ResourceExhausted,
        ErrorCode::ProtocolError,
        ErrorCode::ArithmeticOverflow,
        ErrorCode::InvalidArgument,
        ErrorCode::Backpressured,
        ErrorCode::DeviceUnavailable,
        ErrorCode::NotFound,
        ErrorCode::Cancelled,
        ErrorCode::Internal,
        ErrorCode::PeerLost,
    ];

    /// The stable name of the code, as printed in diagnostics and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::NotSupported => "NotSupported",
            ErrorCode::PermissionDenied => "PermissionDenied",
            ErrorCode::ResourceExhausted => "ResourceExhausted",
            ErrorCode::ProtocolError => "ProtocolError",
            ErrorCode::ArithmeticOverflow => "ArithmeticOverflow",
            ErrorCode::InvalidArgument => "InvalidArgument",
            ErrorCode::Backpressured => "Backpressured",
            ErrorCode::DeviceUnavailable => "DeviceUnavailable",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::Cancelled => "Cancelled",
            ErrorCode::Internal => "Internal",
            ErrorCode::PeerLost => "PeerLost",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The class of a parameter error, for callers and tests that branch on what went wrong
/// while loading a [`ParamSet`](crate::ParamSet). Every parameter error has
/// [`ErrorCode::InvalidArgument`] and one of these classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ParamErrorKind {
    /// A key the schema does not declare.
    UnknownKey,
    /// A required key (one with no default) is absent.
    MissingKey,
    /// The value has the wrong kind (a string where an integer is expected).
    WrongType,
    /// An integer or float outside the field's bounds or its Rust type's range.
    OutOfBounds,
    /// A string outside the field's enum domain.
    NotInDomain,
    /// An array whose length is not the one the field admits.
    WrongLength,
    /// The document is not well-formed TOML or JSON.
    Malformed,
}

impl ParamErrorKind {
    /// The stable name of the class.
    pub const fn name(self) -> &'static str {
        match self {
            ParamErrorKind::UnknownKey => "UnknownKey",
            ParamErrorKind::MissingKey => "MissingKey",
            ParamErrorKind::WrongType => "WrongType",
            ParamErrorKind::OutOfBounds => "OutOfBounds",
            ParamErrorKind::NotInDomain => "NotInDomain",
            ParamErrorKind::WrongLength => "WrongLength",
            ParamErrorKind::Malformed => "Malformed",
        }
    }
}

impl fmt::Display for ParamErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A holo error: a [`ErrorCode`], a message saying what is wrong, and where
/// (an operator, port, field path or plan record).
///
/// Messages built from `&'static str` do not allocate, so hot-path errors such as
/// `ResourceExhausted` cost no heap traffic.
///
/// An error that condenses a list of findings (every diagnostic of a rejected compile)
/// carries the list itself as its [detail](Error::detail), so a caller gets the findings
/// back typed rather than re-parsing the message.
#[derive(Clone)]
pub struct Error {
    code: ErrorCode,
    message: Cow<'static, str>,
    location: Option<Cow<'static, str>>,
    param_kind: Option<ParamErrorKind>,
    // A thin pointer: the detail is cold, and `Error` travels in every hot-path `Result`.
    detail: Option<Arc<Box<dyn Detail>>>,
}

const _: () = assert!(
    size_of::<Error>() <= 64,
    "`Error` travels in every hot-path `Result`: keep it within one cache line"
);

/// The structured evidence behind an [`Error`], type-erased so `holo-params` need not
/// know the runtime's types, yet comparable and recoverable by downcast.
trait Detail: std::error::Error + Send + Sync + UnwindSafe + RefUnwindSafe + 'static {
    fn as_any(&self) -> &dyn Any;
    fn as_error(&self) -> &(dyn std::error::Error + 'static);
    fn eq_detail(&self, other: &dyn Detail) -> bool;
}

impl<T> Detail for T
where
    T: std::error::Error + PartialEq + Send + Sync + UnwindSafe + RefUnwindSafe + 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }

    fn eq_detail(&self, other: &dyn Detail) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl Error {
    /// A new error with the given code and message.
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            location: None,
            param_kind: None,
            detail: None,
        }
    }

    /// An [`ErrorCode::InvalidArgument`] parameter error of class `kind`, located at a
    /// field path (`geometry.width`, `output_shape[2]`) or a document position.
    pub fn param(
        kind: ParamErrorKind,
        location: impl Into<Cow<'static, str>>,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
            .at(location)
            .with_param_kind(kind)
    }

    /// Marks the error as a parameter error of class `kind`.
    #[must_use]
    pub fn with_param_kind(mut self, kind: ParamErrorKind) -> Self {
        self.param_kind = Some(kind);
        self
    }

    /// The class of a parameter error (`None` for other errors).
    pub fn param_kind(&self) -> Option<ParamErrorKind> {
        self.param_kind
    }

    /// The same error with its message replaced by a redacted one, for an error inside
    /// a sensitive value: code, class and location are kept; the detail, which may
    /// quote the value, is dropped.
    #[must_use]
    pub fn redacted(mut self) -> Self {
        self.message = Cow::Borrowed("the value of a sensitive field was rejected (<redacted>)");
        self.detail = None;
        self
    }

    /// Attaches the structured evidence the message condenses (the full list of
    /// findings), recoverable with [`Error::detail`] and reported as the error's
    /// [`source`](std::error::Error::source). Replaces an earlier detail.
    #[must_use]
    pub fn with_detail<T>(mut self, detail: T) -> Self
    where
        T: std::error::Error + PartialEq + Send + Sync + UnwindSafe + RefUnwindSafe + 'static,
    {
        self.detail = Some(Arc::new(Box::new(detail)));
        self
    }

    /// The attached detail, if there is one of type `T`.
    pub fn detail<T: 'static>(&self) -> Option<&T> {
        self.detail_dyn()?.as_any().downcast_ref()
    }

    fn detail_dyn(&self) -> Option<&dyn Detail> {
        self.detail.as_deref().map(|b| &**b)
    }

    /// Attaches where the error happened (`operator "resize", port "output"`,
    /// `geometry.width`). Replaces an earlier location.
    #[must_use]
    pub fn at(mut self, location: impl Into<Cow<'static, str>>) -> Self {
        self.location = Some(location.into());
        self
    }

    /// The matchable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where it is wrong, if known.
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// Shorthand for [`ErrorCode::InvalidArgument`].
    pub fn invalid_argument(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// Shorthand for [`ErrorCode::ArithmeticOverflow`].
    pub fn overflow(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::ArithmeticOverflow, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(f, "{}: {} (at {location})", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.location == other.location
            && self.param_kind == other.param_kind
            && match (self.detail_dyn(), other.detail_dyn()) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_detail(b),
                _ => false,
            }
    }
}

impl Eq for Error {}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.detail_dyn().map(Detail::as_error)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `Result` with holo's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
