//! Builds responses: JSON bodies, and the one conversion from [`ApiError`].
//! Also the one conversion into it from the runtime's own errors: a failing
//! runtime call that has no more specific meaning (storage, a binding, a
//! response that cannot be built) is a 500. Calls whose failures mean
//! something to the caller (the model, a container, sandboxd) map their
//! errors where they are made.

use serde::Serialize;
use worker::wasm_bindgen::JsValue;
use worker::{Response, Result};

use crate::api::ApiError;
use crate::runtime::log::{self, ObjectFailure};

impl From<worker::Error> for ApiError {
    fn from(e: worker::Error) -> Self {
        Self::Internal(e.to_string())
    }
}

impl From<JsValue> for ApiError {
    fn from(e: JsValue) -> Self {
        worker::Error::from(e).into()
    }
}

/// A JSON response. Only the serialising is generic: the rest, once per
/// body type, would be a copy in the upload for each.
pub fn json<T: Serialize>(status: u16, body: &T) -> Result<Response> {
    json_text(status, serde_json::to_string(body)?)
}

/// A JSON response whose body is already written.
pub fn json_text(status: u16, body: String) -> Result<Response> {
    Ok(Response::builder()
        .with_status(status)
        .with_header("content-type", "application/json")?
        .fixed(body.into_bytes()))
}

pub fn error(e: &ApiError) -> Response {
    let response = json(e.status(), &e.body()).and_then(|mut response| {
        if let Some(allow) = e.allow() {
            response.headers_mut().set("Allow", allow)?;
        }
        if let Some(seconds) = e.retry_after() {
            response.headers_mut().set("Retry-After", seconds)?;
        }
        // Plain: no OAuth metadata is offered (MCP clients that find it
        // start OAuth instead of sending the token they were given).
        if e.status() == 401 {
            response.headers_mut().set("WWW-Authenticate", "Bearer")?;
        }
        Ok(response)
    });
    // Building a small JSON response only fails if the runtime is broken.
    response.unwrap_or_else(|_| {
        Response::empty()
            .expect("an empty response")
            .with_status(e.status())
    })
}

/// A handler's result as a response, whichever way it went.
pub fn result(outcome: std::result::Result<Response, ApiError>) -> Response {
    outcome.unwrap_or_else(|e| error(&e))
}

/// A Durable Object's handler result as a response; a failure is logged with
/// its cause first.
pub fn from_object(
    object: &'static str,
    path: &str,
    outcome: std::result::Result<Response, ApiError>,
) -> Response {
    if let Err(e) = &outcome {
        log::emit(&ObjectFailure {
            object,
            path,
            status: e.status(),
            error: e.to_string(),
        });
    }
    result(outcome)
}
