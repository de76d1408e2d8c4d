//! Requests between this Worker's own parts (the front door, DuetAgent and
//! Sandbox objects). They reuse the public paths, so one router serves all.

use worker::{js_sys, web_sys, Method, Request, Response, Stub};

use crate::api::ApiError;

/// Sends `method path` with an optional body to a Durable Object.
pub async fn send(
    stub: &Stub,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Response, ApiError> {
    // web_sys's RequestInit: worker's would link its image-resizing `cf`
    // options' serializers into the upload, used or not.
    let init = web_sys::RequestInit::new();
    init.set_method(method.as_ref());
    if let Some(body) = body {
        init.set_body(&js_sys::Uint8Array::from(body));
    }
    let request: Request =
        web_sys::Request::new_with_str_and_init(&format!("https://duet.internal{path}"), &init)
            .map_err(worker::Error::from)?
            .into();
    Ok(stub.fetch_with_request(request).await?)
}

/// The `error` of a JSON error body, or the status when there is none.
pub async fn error_of(mut response: Response) -> String {
    #[derive(serde::Deserialize)]
    struct Body {
        error: String,
    }
    let status = response.status_code();
    match response.json::<Body>().await {
        Ok(body) => body.error,
        Err(_) => format!("status {status}"),
    }
}
