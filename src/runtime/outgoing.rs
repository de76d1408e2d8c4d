//! Requests this Worker sends: to its own objects, to sandboxd and to an
//! OpenAI-compatible server. Each is built on `web_sys`'s `RequestInit`, set
//! field by field: the `worker` crate's own converts itself through serde,
//! which links the serializers of every image-resizing `cf` option into the
//! upload, used or not.

use wasm_bindgen::JsValue;
use worker::{web_sys, AbortSignal, Headers, Method, Request};

/// What a request carries besides its method and URL.
#[derive(Default)]
pub struct Parts<'a> {
    pub headers: Option<&'a Headers>,
    pub body: Option<&'a JsValue>,
    /// Aborts the request (the runtime stops waiting on it).
    pub signal: Option<&'a AbortSignal>,
}

pub fn request(method: Method, url: &str, parts: Parts<'_>) -> worker::Result<Request> {
    let init = web_sys::RequestInit::new();
    init.set_method(method.as_ref());
    if let Some(headers) = parts.headers {
        init.set_headers(headers.as_ref());
    }
    if let Some(body) = parts.body {
        init.set_body(body);
    }
    init.set_signal(parts.signal.map(|signal| &**signal));
    Ok(web_sys::Request::new_with_str_and_init(url, &init)?.into())
}
