//! HTTP routes and the JSON wire types the worker's Durable Object speaks.
//!
//! ```text
//! GET    /health                        200 "ok"
//! POST   /v1/sandboxes/{name}/exec      {"cmd", "timeoutMs"?} -> ExecResult
//! DELETE /v1/sandboxes/{name}           {"destroyed": true}
//! ```
//! Every error is `{"error": "..."}` with the status from [`Error::status`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use crate::error::Error;
use crate::sandboxes::Sandboxes;
use crate::timestamp::iso8601_millis;

pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub struct App {
    pub sandboxes: Arc<Sandboxes>,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExecRequest {
    cmd: String,
    timeout_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ExecResult {
    stdout: String,
    stderr: String,
    exit_code: i32,
    success: bool,
    command: String,
    duration: u64,
    timestamp: String,
    truncated: bool,
    timed_out: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    Health,
    Exec(&'a str),
    Sandbox(&'a str),
}

type Body = Full<Bytes>;

/// Serves HTTP/1.1 (keep-alive included) on one accepted connection.
pub async fn serve_connection(stream: TcpStream, app: Arc<App>) {
    let service = service_fn(move |req| {
        let app = Arc::clone(&app);
        async move { Ok::<_, Infallible>(respond(&app, req).await) }
    });
    // A client hanging up mid-request is routine, not worth a log line.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn respond(app: &App, req: Request<Incoming>) -> Response<Body> {
    handle(app, req).await.unwrap_or_else(|e| {
        let mut response = json(e.status(), &serde_json::json!({ "error": e.to_string() }));
        if let Error::MethodNotAllowed { allowed, .. } = e {
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allowed));
        }
        response
    })
}

async fn handle(app: &App, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    let path = req.uri().path().to_string();
    let route = route(&path).ok_or_else(|| Error::NotFound(path.clone()))?;
    let allowed = match route {
        Route::Health => "GET",
        Route::Exec(_) => "POST",
        Route::Sandbox(_) => "DELETE",
    };
    if req.method().as_str() != allowed {
        return Err(Error::MethodNotAllowed {
            method: req.method().to_string(),
            allowed,
        });
    }
    match route {
        Route::Health => Ok(Response::builder()
            .header(CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from("ok"))
            .map_err(|e| Error::Internal(e.to_string()))?),
        Route::Exec(name) => {
            let request = parse_exec(&read_body(req).await?)?;
            let timeout_ms = request.timeout_ms.unwrap_or(app.default_timeout_ms);
            if timeout_ms > app.max_timeout_ms {
                return Err(Error::BadRequest(format!(
                    "timeoutMs {timeout_ms} exceeds the maximum of {} ms",
                    app.max_timeout_ms
                )));
            }
            let outcome = app
                .sandboxes
                .exec(name, request.cmd.clone(), Duration::from_millis(timeout_ms))
                .await?;
            Ok(json(
                StatusCode::OK,
                &ExecResult {
                    success: outcome.exit_code == 0 && !outcome.timed_out,
                    stdout: outcome.stdout,
                    stderr: outcome.stderr,
                    exit_code: outcome.exit_code,
                    command: request.cmd,
                    duration: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
                    timestamp: iso8601_millis(outcome.started),
                    truncated: outcome.truncated,
                    timed_out: outcome.timed_out,
                },
            ))
        }
        Route::Sandbox(name) => {
            app.sandboxes.destroy(name).await?;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "destroyed": true }),
            ))
        }
    }
}

fn route(path: &str) -> Option<Route<'_>> {
    if path == "/health" {
        return Some(Route::Health);
    }
    let rest = path.strip_prefix("/v1/sandboxes/")?;
    match rest.split_once('/') {
        None => Some(Route::Sandbox(rest)),
        Some((name, "exec")) => Some(Route::Exec(name)),
        Some(_) => None,
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Error> {
    let too_large = Error::BodyTooLarge {
        limit: MAX_BODY_BYTES,
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(too_large);
    }
    match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large),
        Err(e) => Err(Error::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
    }
}

fn parse_exec(body: &[u8]) -> Result<ExecRequest, Error> {
    let request: ExecRequest = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("invalid exec request: {e}")))?;
    if request.cmd.trim().is_empty() {
        return Err(Error::BadRequest("cmd must not be blank".into()));
    }
    if request.cmd.contains('\0') {
        return Err(Error::BadRequest(
            "cmd must not contain NUL characters".into(),
        ));
    }
    if request.timeout_ms == Some(0) {
        return Err(Error::BadRequest(
            "timeoutMs must be a positive integer".into(),
        ));
    }
    Ok(request)
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    // Serializing these plain structs cannot fail.
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/health"), Some(Route::Health));
        assert_eq!(route("/v1/sandboxes/r1/exec"), Some(Route::Exec("r1")));
        assert_eq!(route("/v1/sandboxes/r1"), Some(Route::Sandbox("r1")));
        assert_eq!(route("/v1/sandboxes//exec"), Some(Route::Exec("")));
        assert_eq!(route("/v1/sandboxes/r1/run"), None);
        assert_eq!(route("/v1/sandboxes/r1/exec/x"), None);
        assert_eq!(route("/v1/sandboxes"), None);
        assert_eq!(route("/"), None);
        assert_eq!(route("/health/"), None);
    }

    #[test]
    fn parses_exec_requests() {
        let r = parse_exec(br#"{"cmd":"ls","timeoutMs":5}"#).expect("valid");
        assert_eq!((r.cmd.as_str(), r.timeout_ms), ("ls", Some(5)));
        let r = parse_exec(br#"{"cmd":"ls"}"#).expect("valid");
        assert_eq!(r.timeout_ms, None);
    }

    #[test]
    fn rejects_bad_exec_requests() {
        for (body, needle) in [
            (&br#"{"cmd":"  \n"}"#[..], "blank"),
            (br#"{"cmd":"a\u0000b"}"#, "NUL"),
            (br#"{"cmd":"ls","timeoutMs":0}"#, "positive"),
            (br#"{"cmd":"ls","timeoutMs":-1}"#, "invalid"),
            (br#"{"cmd":"ls","timeoutMs":1.5}"#, "invalid"),
            (br#"{"cmd":1}"#, "invalid"),
            (br#"{"cmd":"ls","cwd":"/"}"#, "unknown field"),
            (br#"{}"#, "missing field"),
            (b"not json", "invalid"),
        ] {
            match parse_exec(body) {
                Err(Error::BadRequest(msg)) => assert!(msg.contains(needle), "{msg}"),
                other => panic!("{} gave {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }
}
