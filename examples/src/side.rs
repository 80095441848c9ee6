//! What an example that runs work beside its session (a standalone client, a publisher,
//! from `App::on_session`) needs to report that work's failure once the session has
//! ended, and `main`'s exit.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use holo_runtime::{Error, Result};

/// The failure of work run beside a session, kept for `main` to report once the
/// session has ended. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct SideFailure(Arc<Mutex<Option<Error>>>);

impl SideFailure {
    /// Keeps `e` (a later failure replaces it).
    pub fn set(&self, e: Error) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
    }

    /// `Ok`, or the kept failure located at `what` (taking it).
    pub fn check(&self, what: &str) -> Result<()> {
        match self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(e) => Err(e.at(what.to_owned())),
            None => Ok(()),
        }
    }
}

/// `main`'s exit: success, or the error on stderr and exit code 1.
pub fn exit(result: Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use holo_runtime::{Error, ErrorCode};

    use super::SideFailure;

    #[test]
    fn a_kept_failure_is_reported_once_at_its_place() {
        let failure = SideFailure::default();
        assert!(failure.check("the client").is_ok());
        failure
            .clone()
            .set(Error::new(ErrorCode::ProtocolError, "byte 3 is 7"));
        let e = failure.check("the client").unwrap_err();
        assert_eq!(e.code(), ErrorCode::ProtocolError);
        assert_eq!(e.location(), Some("the client"));
        assert!(failure.check("the client").is_ok());
    }
}
