//! Which endpoint a method and path name. Shared by the Worker, which uses it
//! to pick a Durable Object, and by the objects, which use it to pick a handler
//! (they also take the calls of `room::calls`, which are not public).

use super::error::ApiError;
use super::limits::{MAX_BODY_BYTES, MAX_FILE_BYTES, MAX_ROOM_ID_CHARS};

/// What a request asks of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    SendMessage,
    History,
    Exec,
    /// The archive kept of files a wake could not restore.
    KeptArchive,
    Cleanup,
    /// The live feed (a WebSocket).
    Live,
    /// A room token for someone to join with.
    Invite,
    /// Every room token of the room ends.
    Revoke,
    /// What the room lets its agent run (`approvals::policy`).
    Policy,
    SetPolicy,
    /// The agent's commands waiting for a writer's decision.
    Approvals,
    /// A writer's decision on one of them.
    Decide {
        approval: u64,
    },
    /// Every command run or refused in the room, and by whom.
    Audit,
    /// The room as an MCP server (`mcp`): JSON-RPC messages, POSTed.
    Mcp,
    /// A room's jobs (`jobs`): start one, list them, tell of one, stop one.
    /// A job is named by the number of its id ([`job_id`]).
    StartJob,
    Jobs,
    Job {
        job: u64,
    },
    StopJob {
        job: u64,
    },
    /// The workspace's files (`files`), by the `path` in the query: a
    /// directory's listing or a file's bytes, a file written whole, a file
    /// or directory deleted.
    ReadFile,
    WriteFile,
    DeleteFile,
    /// The shared terminal (a WebSocket; `terminal`).
    Terminal,
}

/// The web page's parts.
#[derive(Debug, PartialEq, Eq)]
pub enum Page {
    Home,
    Room(String),
    /// A style sheet or script, by the fingerprinted file name the build
    /// gave it (`scripts/page.mjs`).
    Asset(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Health,
    Page(Page),
    Room { room: String, action: Action },
}

impl Action {
    /// Whether the request carries a JSON body worth reading.
    pub fn has_body(self) -> bool {
        matches!(
            self,
            Self::SendMessage
                | Self::Exec
                | Self::Invite
                | Self::SetPolicy
                | Self::Decide { .. }
                | Self::Mcp
                | Self::StartJob
        )
    }

    /// Whether a browser may ask it only from the worker's own origin (see
    /// `cross_site`): what changes a room, and the live feed, which shows
    /// it.
    pub fn needs_own_origin(self) -> bool {
        matches!(
            self,
            Self::SendMessage
                | Self::Exec
                | Self::Cleanup
                | Self::Live
                | Self::Invite
                | Self::Revoke
                | Self::SetPolicy
                | Self::Decide { .. }
                | Self::Mcp
                | Self::StartJob
                | Self::StopJob { .. }
                | Self::WriteFile
                | Self::DeleteFile
                | Self::Terminal
        )
    }

    /// The largest body it takes, declared or sent: a file's bytes, or
    /// JSON; `None` for what takes no body.
    pub fn body_limit(self) -> Option<u64> {
        match self {
            Self::WriteFile => Some(MAX_FILE_BYTES),
            _ => self.has_body().then_some(MAX_BODY_BYTES as u64),
        }
    }

    /// A short stable name for logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::SendMessage => "message",
            Self::History => "history",
            Self::Exec => "exec",
            Self::KeptArchive => "archive",
            Self::Cleanup => "cleanup",
            Self::Live => "live",
            Self::Invite => "invite",
            Self::Revoke => "revoke",
            Self::Policy => "policy",
            Self::SetPolicy => "set-policy",
            Self::Approvals => "approvals",
            Self::Decide { .. } => "decide",
            Self::Audit => "audit",
            Self::Mcp => "mcp",
            Self::StartJob => "start-job",
            Self::Jobs => "jobs",
            Self::Job { .. } => "job",
            Self::StopJob { .. } => "stop-job",
            Self::ReadFile => "read-file",
            Self::WriteFile => "write-file",
            Self::DeleteFile => "delete-file",
            Self::Terminal => "terminal",
        }
    }
}

/// The path of a request's URL as the runtime serialises it
/// (`scheme://host[:port]/path[?query][#fragment]`), still percent-encoded;
/// read from the text, as the URL is already valid.
pub fn path_of(url: &str) -> &str {
    let path = &url[origin_of(url).len()..];
    match &path[..path.find(['?', '#']).unwrap_or(path.len())] {
        "" => "/",
        path => path,
    }
}

/// The origin of a request's URL as the runtime serialises it:
/// `scheme://host[:port]`, default ports already left out (as browsers
/// leave them out of an `Origin` header).
pub fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// Parses a method and a (still percent-encoded) URL path.
///
/// Order matters for callers: an unknown path is 404 whatever the method; a
/// known path with the wrong method is 405; only then is the room id checked.
pub fn parse(method: &str, path: &str) -> Result<Route, ApiError> {
    let page = match path {
        // HEAD too: health checkers use it.
        "/health" => return allow(method, &["GET", "HEAD"], "GET, HEAD").map(|_| Route::Health),
        "/" => Some(Page::Home),
        _ => match path.strip_prefix("/assets/") {
            Some(name) if is_file_name(name) => Some(Page::Asset(name.into())),
            Some(_) => return Err(ApiError::NotFound),
            None => None,
        },
    };
    // The page's parts answer HEAD as GET, without the body (the runtime
    // leaves it out), as HTTP asks of every GET resource.
    if let Some(page) = page {
        return allow(method, &["GET", "HEAD"], "GET, HEAD").map(|_| Route::Page(page));
    }
    if let Some(raw_room) = path.strip_prefix("/rooms/") {
        allow(method, &["GET", "HEAD"], "GET, HEAD")?;
        return Ok(Route::Page(Page::Room(room_id(raw_room)?)));
    }
    let rest = path.strip_prefix("/api/rooms/").ok_or(ApiError::NotFound)?;
    let (raw_room, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let action = match (tail, method) {
        ("", "DELETE") => Action::Cleanup,
        ("", _) => return Err(ApiError::MethodNotAllowed("DELETE")),
        ("message", "POST") | ("messages", "POST") => Action::SendMessage,
        ("message", _) => return Err(ApiError::MethodNotAllowed("POST")),
        ("messages", "GET") => Action::History,
        ("messages", _) => return Err(ApiError::MethodNotAllowed("GET, POST")),
        ("sandbox/exec", "POST") => Action::Exec,
        ("sandbox/exec", _) => return Err(ApiError::MethodNotAllowed("POST")),
        ("sandbox/archive", "GET") => Action::KeptArchive,
        ("sandbox/archive", _) => return Err(ApiError::MethodNotAllowed("GET")),
        ("live", "GET") => Action::Live,
        ("live", _) => return Err(ApiError::MethodNotAllowed("GET")),
        ("invites", "POST") => Action::Invite,
        ("invites", "DELETE") => Action::Revoke,
        ("invites", _) => return Err(ApiError::MethodNotAllowed("POST, DELETE")),
        ("policy", "GET") => Action::Policy,
        ("policy", "PUT") => Action::SetPolicy,
        ("policy", _) => return Err(ApiError::MethodNotAllowed("GET, PUT")),
        ("approvals", "GET") => Action::Approvals,
        ("approvals", _) => return Err(ApiError::MethodNotAllowed("GET")),
        ("audit", "GET") => Action::Audit,
        ("audit", _) => return Err(ApiError::MethodNotAllowed("GET")),
        // Stateless: no event stream to GET, no session to DELETE.
        ("mcp", "POST") => Action::Mcp,
        ("mcp", _) => return Err(ApiError::MethodNotAllowed("POST")),
        ("jobs", "POST") => Action::StartJob,
        ("jobs", "GET") => Action::Jobs,
        ("jobs", _) => return Err(ApiError::MethodNotAllowed("GET, POST")),
        ("files", "GET") => Action::ReadFile,
        ("files", "PUT") => Action::WriteFile,
        ("files", "DELETE") => Action::DeleteFile,
        ("files", _) => return Err(ApiError::MethodNotAllowed("GET, PUT, DELETE")),
        ("terminal", "GET") => Action::Terminal,
        ("terminal", _) => return Err(ApiError::MethodNotAllowed("GET")),
        (tail, method) => match (tail.split_once('/'), method) {
            (Some(("approvals", id)), "POST") => Action::Decide {
                approval: approval_id(id)?,
            },
            (Some(("approvals", _)), _) => return Err(ApiError::MethodNotAllowed("POST")),
            (Some(("jobs", id)), "GET") => Action::Job {
                job: job_number(id)?,
            },
            (Some(("jobs", id)), "DELETE") => Action::StopJob {
                job: job_number(id)?,
            },
            (Some(("jobs", _)), _) => return Err(ApiError::MethodNotAllowed("GET, DELETE")),
            _ => return Err(ApiError::NotFound),
        },
    };
    Ok(Route::Room {
        room: room_id(raw_room)?,
        action,
    })
}

fn allow(method: &str, allowed: &[&str], header: &'static str) -> Result<(), ApiError> {
    if allowed.contains(&method) {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed(header))
    }
}

/// Whether an asset's name is a plain file name, which the asset store can
/// only read from the assets folder: no `/`, no `..`, nothing encoded.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// An approval's id from its path segment: a positive integer, or the
/// approval does not exist.
fn approval_id(segment: &str) -> Result<u64, ApiError> {
    let digits = !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit());
    match segment.parse::<u64>() {
        Ok(id) if digits && id > 0 => Ok(id),
        _ => Err(ApiError::NoSuchApproval),
    }
}

/// A job's id, as the API and sandboxd name it: `j` and 16 hex digits.
pub fn job_id(job: u64) -> String {
    format!("j{job:016x}")
}

/// The number of a job's id from its path segment; a segment that is not
/// one names no job.
pub fn job_number(segment: &str) -> Result<u64, ApiError> {
    let hex = segment.strip_prefix('j').unwrap_or_default();
    u64::from_str_radix(hex, 16)
        .ok()
        .filter(|&job| job_id(job) == segment)
        .ok_or(ApiError::NoSuchJob)
}

/// Decodes and checks a room id from its path segment.
pub fn room_id(segment: &str) -> Result<String, ApiError> {
    let invalid = |why: &str| ApiError::field("roomId", why);
    let decoded =
        percent_decode(segment).ok_or_else(|| invalid("is not valid percent-encoded UTF-8"))?;
    if decoded.is_empty() {
        return Err(invalid("must not be empty"));
    }
    if decoded.chars().count() > MAX_ROOM_ID_CHARS {
        return Err(invalid(&format!(
            "must be at most {MAX_ROOM_ID_CHARS} characters"
        )));
    }
    if !decoded
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(invalid("may contain only A-Z, a-z, 0-9, '.', '_' and '-'"));
    }
    Ok(decoded)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_read_from_the_url() {
        assert_eq!(path_of("https://duet.example/health"), "/health");
        assert_eq!(
            path_of("http://127.0.0.1:8788/api/rooms/a%20b/message?x=/y#z"),
            "/api/rooms/a%20b/message"
        );
        assert_eq!(path_of("https://duet.example/?q"), "/");
        assert_eq!(path_of("https://duet.example"), "/");
        assert_eq!(path_of("https://duet.example/rooms/r#/x"), "/rooms/r");
        assert_eq!(path_of("https://duet.example?q/x"), "/");
    }

    #[test]
    fn the_origin_is_read_from_the_url() {
        assert_eq!(
            origin_of("http://127.0.0.1:8788/api/rooms/r/live"),
            "http://127.0.0.1:8788"
        );
        assert_eq!(origin_of("https://duet.example"), "https://duet.example");
        assert_eq!(origin_of("https://duet.example?q"), "https://duet.example");
    }

    fn room(method: &str, path: &str) -> (String, Action) {
        match parse(method, path).unwrap() {
            Route::Room { room, action } => (room, action),
            _ => panic!("not a room route"),
        }
    }

    fn status(method: &str, path: &str) -> u16 {
        parse(method, path).unwrap_err().status()
    }

    #[test]
    fn every_endpoint() {
        let id = "0b6e7f0e-3c1a-4a43-9d0e-6f5f2b1c9a10";
        assert_eq!(parse("GET", "/health").unwrap(), Route::Health);
        assert_eq!(parse("HEAD", "/health").unwrap(), Route::Health);
        assert_eq!(
            room("POST", &format!("/api/rooms/{id}/message")),
            (id.into(), Action::SendMessage)
        );
        assert_eq!(
            room("POST", &format!("/api/rooms/{id}/messages")),
            (id.into(), Action::SendMessage)
        );
        assert_eq!(
            room("GET", &format!("/api/rooms/{id}/messages")),
            (id.into(), Action::History)
        );
        assert_eq!(
            room("POST", &format!("/api/rooms/{id}/sandbox/exec")),
            (id.into(), Action::Exec)
        );
        assert_eq!(
            room("GET", &format!("/api/rooms/{id}/sandbox/archive")),
            (id.into(), Action::KeptArchive)
        );
        assert_eq!(
            room("DELETE", &format!("/api/rooms/{id}")),
            (id.into(), Action::Cleanup)
        );
        assert_eq!(
            room("POST", &format!("/api/rooms/{id}/invites")),
            (id.into(), Action::Invite)
        );
        assert_eq!(
            room("DELETE", &format!("/api/rooms/{id}/invites")),
            (id.into(), Action::Revoke)
        );
        for (method, tail, action) in [
            ("GET", "policy", Action::Policy),
            ("PUT", "policy", Action::SetPolicy),
            ("GET", "approvals", Action::Approvals),
            ("POST", "approvals/17", Action::Decide { approval: 17 }),
            ("GET", "audit", Action::Audit),
            ("POST", "mcp", Action::Mcp),
            ("POST", "jobs", Action::StartJob),
            ("GET", "files", Action::ReadFile),
            ("PUT", "files", Action::WriteFile),
            ("DELETE", "files", Action::DeleteFile),
            ("GET", "terminal", Action::Terminal),
            ("GET", "jobs", Action::Jobs),
            ("GET", "jobs/j00000000000000ff", Action::Job { job: 255 }),
            (
                "DELETE",
                "jobs/j00000000000000ff",
                Action::StopJob { job: 255 },
            ),
        ] {
            assert_eq!(
                room(method, &format!("/api/rooms/{id}/{tail}")),
                (id.into(), action)
            );
        }
    }

    #[test]
    fn an_approval_id_is_a_positive_integer() {
        for tail in [
            "approvals/0",
            "approvals/x",
            "approvals/-1",
            "approvals/+1",
            "approvals/",
            "approvals/1/2",
        ] {
            let e = parse("POST", &format!("/api/rooms/r/{tail}")).unwrap_err();
            assert!(matches!(e, ApiError::NoSuchApproval), "{tail}");
        }
        assert_eq!(status("GET", "/api/rooms/r/approvals/1"), 405);
    }

    #[test]
    fn a_job_id_is_j_and_16_lowercase_hex_digits() {
        assert_eq!(job_id(255), "j00000000000000ff");
        assert_eq!(job_number(&job_id(u64::MAX)).ok(), Some(u64::MAX));
        for bad in [
            "",
            "j",
            "jff",
            "J00000000000000ff",
            "j00000000000000FF",
            "j+0000000000000ff",
            "j00000000000000ff0",
            "k00000000000000ff",
        ] {
            assert!(matches!(job_number(bad), Err(ApiError::NoSuchJob)), "{bad}");
        }
        assert_eq!(status("GET", "/api/rooms/r/jobs/x"), 404);
        assert_eq!(
            status("GET", "/api/rooms/r/jobs/j00000000000000ff/output"),
            404
        );
    }

    #[test]
    fn pages_and_the_live_feed() {
        assert_eq!(parse("GET", "/").unwrap(), Route::Page(Page::Home));
        assert_eq!(
            parse("GET", "/rooms/r-1").unwrap(),
            Route::Page(Page::Room("r-1".into()))
        );
        assert_eq!(status("GET", "/rooms/bad%20id"), 400);
        assert_eq!(status("POST", "/"), 405);
        assert_eq!(parse("HEAD", "/").unwrap(), Route::Page(Page::Home));
        assert_eq!(
            parse("HEAD", "/rooms/r-1").unwrap(),
            Route::Page(Page::Room("r-1".into()))
        );
        assert_eq!(status("HEAD", "/rooms/bad%20id"), 400);
        assert_eq!(
            room("GET", "/api/rooms/r1/live"),
            ("r1".into(), Action::Live)
        );
        assert_eq!(status("POST", "/api/rooms/r1/live"), 405);
    }

    #[test]
    fn an_asset_is_a_plain_file_name() {
        for name in [
            "duet.0123456789.js",
            "xterm.css",
            "addon-fit.js",
            "a_b",
            "unknown.js",
        ] {
            for method in ["GET", "HEAD"] {
                assert_eq!(
                    parse(method, &format!("/assets/{name}")).unwrap(),
                    Route::Page(Page::Asset(name.into())),
                    "{method} {name}"
                );
            }
        }
        for name in [
            "",
            "..",
            "a..b.js",
            "../home.html",
            "sub/duet.js",
            "%2e%2e",
            "..%2Fhome.html",
            "duet.js%00",
            "duet js",
            "d\u{e9}.js",
        ] {
            assert_eq!(status("GET", &format!("/assets/{name}")), 404, "{name:?}");
        }
        assert_eq!(status("POST", "/assets/duet.js"), 405);
    }

    #[test]
    fn unknown_paths_are_404() {
        for path in [
            "/index.html",
            "/assets",
            "/healthz",
            "/api",
            "/api/rooms",
            "/api/rooms/r/other",
            "/api/rooms/r/sandbox",
            "/health/",
        ] {
            assert_eq!(status("GET", path), 404, "{path}");
        }
    }

    #[test]
    fn wrong_methods_are_405_with_allow() {
        let cases = [
            ("POST", "/health", "GET, HEAD"),
            ("POST", "/", "GET, HEAD"),
            ("DELETE", "/rooms/r", "GET, HEAD"),
            ("GET", "/api/rooms/r/message", "POST"),
            ("DELETE", "/api/rooms/r/messages", "GET, POST"),
            ("GET", "/api/rooms/r/sandbox/exec", "POST"),
            ("PUT", "/api/rooms/r/sandbox/archive", "GET"),
            ("GET", "/api/rooms/r", "DELETE"),
            ("GET", "/api/rooms/r/invites", "POST, DELETE"),
            ("POST", "/api/rooms/r/policy", "GET, PUT"),
            ("POST", "/api/rooms/r/approvals", "GET"),
            ("DELETE", "/api/rooms/r/audit", "GET"),
            ("GET", "/api/rooms/r/mcp", "POST"),
            ("DELETE", "/api/rooms/r/mcp", "POST"),
            ("DELETE", "/api/rooms/r/jobs", "GET, POST"),
            ("POST", "/api/rooms/r/jobs/j00000000000000ff", "GET, DELETE"),
        ];
        for (method, path, allowed) in cases {
            let e = parse(method, path).unwrap_err();
            assert_eq!(
                (e.status(), e.allow()),
                (405, Some(allowed)),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn room_ids_are_checked_after_decoding() {
        assert_eq!(room("GET", "/api/rooms/a.b_c-D9/messages").0, "a.b_c-D9");
        assert_eq!(room("GET", "/api/rooms/%61bc/messages").0, "abc");
        let longest = "x".repeat(MAX_ROOM_ID_CHARS);
        assert_eq!(room("DELETE", &format!("/api/rooms/{longest}")).0, longest);
        for bad in [
            "",
            "a%2Fb",
            "a%2fb",
            "%00",
            "a%0Ab",
            "x%20y",
            "caf%C3%A9",
            "%zz",
            "%",
            "%C3",
        ] {
            assert_eq!(
                status("GET", &format!("/api/rooms/{bad}/messages")),
                400,
                "{bad:?}"
            );
        }
        assert_eq!(status("DELETE", &format!("/api/rooms/{longest}x")), 400);
    }

    #[test]
    fn bad_room_id_names_the_field() {
        let body = serde_json::to_value(
            parse("GET", "/api/rooms/a%2Fb/messages")
                .unwrap_err()
                .body(),
        )
        .unwrap();
        assert!(body["details"]["roomId"][0]
            .as_str()
            .unwrap()
            .contains("may contain only"));
    }
}
