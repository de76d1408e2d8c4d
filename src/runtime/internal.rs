//! The one way a request is sent from one of this Worker's objects to
//! another: which calls there are and their paths are `room::calls`'s.

use worker::{js_sys, Method, Response, Stub};

use super::outgoing::{self, Parts};
use crate::api::ApiError;

/// Sends `method path` with an optional body to a Durable Object.
pub async fn send(
    stub: &Stub,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Response, ApiError> {
    let body = body.map(|body| js_sys::Uint8Array::from(body).into());
    let parts = Parts {
        body: body.as_ref(),
        ..Parts::default()
    };
    let request = outgoing::request(method, &format!("https://duet.internal{path}"), parts)?;
    Ok(stub.fetch_with_request(request).await?)
}

/// The `error` of a JSON error body, or the status when there is none.
pub async fn error_of(mut response: Response) -> String {
    let status = response.status_code();
    // Read through a `Value`, whose reader the upload has anyway.
    let body = response.json::<serde_json::Value>().await.ok();
    match body.as_ref().and_then(|body| body["error"].as_str()) {
        Some(error) => error.to_owned(),
        None => format!("status {status}"),
    }
}
