//! The one error type of the service and its mapping to HTTP statuses.

use std::io;
use std::path::PathBuf;

use hyper::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    BadRequest(String),
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method {method} is not allowed here; allowed: {allowed}")]
    MethodNotAllowed {
        method: String,
        allowed: &'static str,
    },
    #[error("request body is larger than {limit} bytes")]
    BodyTooLarge { limit: u64 },
    #[error("sandbox {0} has no workspace")]
    NoWorkspace(String),
    #[error("the workspace's archive would be larger than {cap} bytes")]
    ArchiveTooLarge { cap: u64 },
    #[error("archive refused: it unpacks to more than {limit} bytes (--max-restore-bytes)")]
    RestoreTooLarge { limit: u64 },
    #[error("sandbox {0} was destroyed before the command started")]
    DestroyedBeforeStart(String),
    #[error("workspace {}: {source}", path.display())]
    Workspace { path: PathBuf, source: io::Error },
    #[error(
        "too many sandboxes: sandboxd keeps at most {max} shells at once (--max-sessions); \
         destroy a sandbox or wait for an idle shell to end"
    )]
    TooManyShells { max: usize },
    #[error("could not start the shell: {0}")]
    Spawn(io::Error),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) | Error::NoWorkspace(_) => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Error::BodyTooLarge { .. }
            | Error::ArchiveTooLarge { .. }
            | Error::RestoreTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::DestroyedBeforeStart(_) => StatusCode::CONFLICT,
            Error::TooManyShells { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Workspace { .. } | Error::Spawn(_) | Error::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}
