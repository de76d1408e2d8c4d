//! Every way a request can fail, and the one place that maps a failure to its
//! HTTP status and JSON body (`{"error": "...", "details"?: {...}}`).

use std::collections::BTreeMap;

use serde::Serialize;

use duet_wire::job::MAX_RUNNING_JOBS;

use super::limits::ENDED_JOBS_KEPT;
use super::role::RoomRole;

/// Per-field validation messages, as sent in `details`.
pub type FieldErrors = BTreeMap<&'static str, Vec<String>>;

/// The endpoints a 404 names.
pub const ENDPOINTS: &str = "GET /health, HEAD /health, POST /api/rooms/{roomId}/message, \
POST /api/rooms/{roomId}/messages, GET /api/rooms/{roomId}/messages, \
POST /api/rooms/{roomId}/sandbox/exec, GET /api/rooms/{roomId}/sandbox/archive, \
DELETE /api/rooms/{roomId}, \
POST /api/rooms/{roomId}/invites, DELETE /api/rooms/{roomId}/invites, \
GET /api/rooms/{roomId}/policy, PUT /api/rooms/{roomId}/policy, \
GET /api/rooms/{roomId}/approvals, POST /api/rooms/{roomId}/approvals/{approvalId}, \
GET /api/rooms/{roomId}/audit, POST /api/rooms/{roomId}/mcp, \
POST /api/rooms/{roomId}/jobs, GET /api/rooms/{roomId}/jobs, \
GET /api/rooms/{roomId}/jobs/{jobId}, DELETE /api/rooms/{roomId}/jobs/{jobId}, \
GET /api/rooms/{roomId}/files, PUT /api/rooms/{roomId}/files, DELETE /api/rooms/{roomId}/files, \
GET /api/rooms/{roomId}/live, GET /api/rooms/{roomId}/terminal, GET /, HEAD /, GET /rooms/{roomId}, HEAD /rooms/{roomId}, \
GET /assets/{name}, HEAD /assets/{name}";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("invalid request")]
    Invalid(FieldErrors),
    #[error("request body is not valid JSON: {0}")]
    BadJson(String),
    #[error("request body must be a JSON object")]
    NotAnObject,
    #[error("missing or wrong bearer token")]
    Unauthorized,
    #[error("the token has expired: ask the room's owner for a new link")]
    TokenExpired,
    #[error(
        "the token was revoked, or its room deleted or forgotten: ask the room's owner for a new link"
    )]
    TokenRevoked,
    #[error("the token is for another room")]
    OtherRoom,
    #[error("this needs the {} role; the token gives {}", .needed.name(), .held.name())]
    Forbidden { needed: RoomRole, held: RoomRole },
    #[error(
        "this worker is open (DUET_ACCESS = \"open\", no DUET_API_TOKEN): everyone is an owner \
         of every room, so there is nothing to invite to; set DUET_API_TOKEN to use invites"
    )]
    OpenAccess,
    #[error("the worker's access is not configured: {0}")]
    AccessNotConfigured(String),
    #[error("the worker is not configured: {0}")]
    NotConfigured(String),
    #[error("this worker does not answer at {host}; it answers at {known}")]
    MisdirectedHost { host: String, known: String },
    #[error("cross-site request refused: the Origin {0} is not this worker's own")]
    CrossSite(String),
    #[error("the request body must be JSON, sent with Content-Type: application/json")]
    NotJson,
    #[error("no such endpoint; supported: {ENDPOINTS}")]
    NotFound,
    #[error("method not allowed; allowed: {0}")]
    MethodNotAllowed(&'static str),
    #[error("request body too large: the limit is {0} bytes")]
    PayloadTooLarge(u64),
    #[error("request body could not be read: {0}")]
    UnreadableBody(String),
    #[error(
        "this room keeps no archive: one is kept only when a sleeping room's files could not be restored"
    )]
    NoKeptArchive,
    #[error("no such approval in this room (it may have been forgotten with the room)")]
    NoSuchApproval,
    #[error("no such job in this room (the room keeps its running jobs and the newest {ENDED_JOBS_KEPT} ended)")]
    NoSuchJob,
    #[error("this room runs {MAX_RUNNING_JOBS} jobs, the most it may at once: stop one or wait for one to end")]
    TooManyJobs,
    #[error("this command was already {0}")]
    AlreadyDecided(String),
    #[error("the room was cleaned up while this request was in flight; nothing of it was kept")]
    CleanedUp,
    #[error("this route is a WebSocket: connect with `Upgrade: websocket` and its subprotocol")]
    NotAWebSocket,
    #[error("this socket speaks the subprotocol {0}: offer it in Sec-WebSocket-Protocol")]
    NoSubprotocol(&'static str),
    #[error("the room has {0} watchers, the most it takes; try again later")]
    TooManyWatchers(usize),
    #[error("no AI backend: {0}")]
    AiUnavailable(String),
    #[error("AI backend failed: {0}")]
    AiFailed(String),
    #[error("AI backend is busy: {0}")]
    AiBusy(String),
    #[error("AI backend did not answer within {0} ms")]
    AiTimeout(u64),
    #[error("sandbox unavailable: {0}")]
    SandboxUnavailable(String),
    #[error("sandbox failed: {0}")]
    SandboxFailed(String),
    #[error(
        "this room is waking: its saved files are being restored ({0}); try again in a few seconds"
    )]
    Waking(String),
    #[error("sandbox did not answer within {0} ms")]
    SandboxTimeout(u64),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The JSON body of every error response.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<&'a FieldErrors>,
}

impl ApiError {
    /// A validation failure of one field.
    pub fn field(name: &'static str, why: impl Into<String>) -> Self {
        Self::Invalid(FieldErrors::from([(name, vec![why.into()])]))
    }

    pub fn status(&self) -> u16 {
        match self {
            Self::Invalid(_)
            | Self::BadJson(_)
            | Self::NotAnObject
            | Self::UnreadableBody(_)
            | Self::NoSubprotocol(_) => 400,
            Self::Unauthorized | Self::TokenExpired | Self::TokenRevoked | Self::OtherRoom => 401,
            Self::CrossSite(_) | Self::Forbidden { .. } => 403,
            Self::NotFound | Self::NoKeptArchive | Self::NoSuchApproval | Self::NoSuchJob => 404,
            Self::MethodNotAllowed(_) => 405,
            Self::CleanedUp | Self::OpenAccess | Self::AlreadyDecided(_) => 409,
            Self::MisdirectedHost { .. } => 421,
            Self::NotAWebSocket => 426,
            Self::PayloadTooLarge(_) => 413,
            Self::NotJson => 415,
            Self::TooManyJobs => 429,
            Self::Internal(_) => 500,
            Self::AiFailed(_) | Self::SandboxFailed(_) => 502,
            Self::AiUnavailable(_)
            | Self::SandboxUnavailable(_)
            | Self::TooManyWatchers(_)
            | Self::AccessNotConfigured(_)
            | Self::NotConfigured(_)
            | Self::AiBusy(_)
            | Self::Waking(_) => 503,
            Self::AiTimeout(_) | Self::SandboxTimeout(_) => 504,
        }
    }

    /// The `Retry-After` seconds of an answer worth trying again soon.
    pub fn retry_after(&self) -> Option<&'static str> {
        match self {
            Self::Waking(_) => Some("2"),
            _ => None,
        }
    }

    /// The `Allow` header a 405 carries.
    pub fn allow(&self) -> Option<&'static str> {
        match self {
            Self::MethodNotAllowed(allow) => Some(allow),
            _ => None,
        }
    }

    pub fn body(&self) -> ErrorBody<'_> {
        let details = match self {
            Self::Invalid(fields) => Some(fields),
            _ => None,
        };
        ErrorBody {
            error: self.to_string(),
            details,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_carry_details_per_field() {
        let e = ApiError::field("text", "must not be blank");
        assert_eq!(e.status(), 400);
        let json = serde_json::to_value(e.body()).unwrap();
        assert_eq!(json["error"], "invalid request");
        assert_eq!(json["details"]["text"][0], "must not be blank");
    }

    #[test]
    fn other_errors_have_no_details() {
        let json = serde_json::to_value(ApiError::NotFound.body()).unwrap();
        assert!(json.get("details").is_none());
        assert!(json["error"]
            .as_str()
            .unwrap()
            .contains("/api/rooms/{roomId}/sandbox/exec"));
    }

    #[test]
    fn statuses() {
        assert_eq!(ApiError::PayloadTooLarge(1).status(), 413);
        assert_eq!(ApiError::UnreadableBody("x".into()).status(), 400);
        assert_eq!(ApiError::CleanedUp.status(), 409);
        assert_eq!(ApiError::Unauthorized.status(), 401);
        assert_eq!(ApiError::TokenRevoked.status(), 401);
        let forbidden = ApiError::Forbidden {
            needed: RoomRole::Owner,
            held: RoomRole::Writer,
        };
        assert_eq!(forbidden.status(), 403);
        assert_eq!(
            forbidden.to_string(),
            "this needs the owner role; the token gives writer"
        );
        assert_eq!(ApiError::AccessNotConfigured("x".into()).status(), 503);
        assert_eq!(
            ApiError::CrossSite("https://evil.example".into()).status(),
            403
        );
        assert_eq!(ApiError::NotJson.status(), 415);
        assert_eq!(ApiError::NoSuchApproval.status(), 404);
        assert_eq!(ApiError::NoSuchJob.status(), 404);
        assert_eq!(ApiError::TooManyJobs.status(), 429);
        assert!(ApiError::TooManyJobs.to_string().contains('8'));
        assert_eq!(
            ApiError::AlreadyDecided("approved by ana".into()).status(),
            409
        );
        assert_eq!(ApiError::NoSubprotocol("duet.v1").status(), 400);
        assert_eq!(ApiError::AiTimeout(15_000).status(), 504);
        assert_eq!(ApiError::AiFailed("x".into()).status(), 502);
        assert_eq!(ApiError::AiUnavailable("x".into()).status(), 503);
        assert_eq!(ApiError::AiBusy("x".into()).status(), 503);
        assert_eq!(ApiError::SandboxTimeout(1).status(), 504);
        assert_eq!(ApiError::MethodNotAllowed("GET").allow(), Some("GET"));
        assert_eq!(ApiError::NotFound.allow(), None);
    }
}
