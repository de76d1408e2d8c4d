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
    #[error("archive refused: {0}")]
    RestoreTooLarge(Over),
    /// Packing found what no restore would take; the workspace stays.
    #[error("workspace cannot be restored: {0}")]
    Unrestorable(String),
    #[error("the restore did not finish within {ms} ms")]
    RestoreTimedOut { ms: u64 },
    /// Never answered: there is no one left to answer.
    #[error("the client went away before the restore finished")]
    ClientGone,
    #[error("sandbox {0} is already being restored")]
    RestoreRunning(String),
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
    #[error("no job {0} in this sandbox")]
    NoJob(String),
    #[error("a job {0} already exists in this sandbox")]
    JobExists(String),
    #[error(
        "too many jobs: a sandbox runs at most {max} at once; \
         stop one or wait for one to end"
    )]
    TooManyJobs { max: usize },
    #[error("could not start the job: {0}")]
    JobSpawn(io::Error),
    #[error("could not start the terminal's shell: {0}")]
    TerminalSpawn(io::Error),
    #[error("the terminal took no input within {ms} ms: its shell reads none")]
    TerminalStuck { ms: u64 },
    #[error("the terminal was ended: its sandbox was destroyed")]
    TerminalEnded,
    #[error("sandbox {0} is being destroyed; try again once it is")]
    Destroying(String),
    #[error("{0}: no such file or directory")]
    NoFile(String),
    /// A file path that leads outside the workspace, or is not ours to touch.
    #[error("{0}")]
    Forbidden(String),
    /// What is at a file path is not what the request needs there.
    #[error("{0}")]
    FileConflict(String),
    #[error("{path} is {size} bytes, more than the {limit} read whole; ask for a range")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("the range is outside the file's {size} bytes")]
    RangeNotSatisfiable { size: u64 },
    #[error("the request body did not arrive within {ms} ms")]
    BodyTooSlow { ms: u64 },
    #[error("internal error: {0}")]
    Internal(String),
}

/// A bound of what a restore unpacks, which packing applies too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Over {
    #[error("it unpacks to more than {0} bytes (--max-restore-bytes)")]
    Bytes(u64),
    #[error("it has more than {0} entries (--max-restore-entries)")]
    Entries(u64),
}

impl Error {
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) | Error::NoWorkspace(_) | Error::NoJob(_) | Error::NoFile(_) => {
                StatusCode::NOT_FOUND
            }
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::FileConflict(_) => StatusCode::CONFLICT,
            Error::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Error::BodyTooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
            Error::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Error::BodyTooLarge { .. }
            | Error::ArchiveTooLarge { .. }
            | Error::RestoreTooLarge(_)
            | Error::FileTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Unrestorable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::RestoreTimedOut { .. } => StatusCode::GATEWAY_TIMEOUT,
            Error::ClientGone => StatusCode::BAD_REQUEST,
            Error::DestroyedBeforeStart(_)
            | Error::RestoreRunning(_)
            | Error::JobExists(_)
            | Error::TerminalEnded => StatusCode::CONFLICT,
            Error::TooManyJobs { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::TooManyShells { .. } | Error::TerminalStuck { .. } | Error::Destroying(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::Workspace { .. }
            | Error::Spawn(_)
            | Error::JobSpawn(_)
            | Error::TerminalSpawn(_)
            | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
