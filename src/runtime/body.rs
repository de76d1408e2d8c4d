//! Reads a request body without ever holding more than the limit: a declared
//! length over it is refused unread, and a streamed body is cut off as soon as
//! it passes it. A body that breaks off (malformed chunks, a client that hung
//! up) is the client's failure, a 400, not the server's.
//!
//! Also reads a whole response body whose size its sender bounds, in one call
//! to the runtime: `worker`'s own reads take several calls per chunk.

use futures_util::StreamExt;
use worker::js_sys::Uint8Array;
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys::{self, Request};

use crate::api::limits::MAX_BODY_BYTES;
use crate::api::ApiError;

/// Refuses a body whose declared length is over `limit`, unread.
pub fn check_declared_length(req: &Request, limit: u64) -> Result<Option<u64>, ApiError> {
    let declared = req
        .headers()
        .get("content-length")?
        // u64: on wasm32 a usize would not hold a length of 4 GiB or more.
        .and_then(|len| len.trim().parse::<u64>().ok());
    match declared {
        Some(len) if len > limit => Err(ApiError::PayloadTooLarge(limit)),
        _ => Ok(declared),
    }
}

/// The whole body, at most [`MAX_BODY_BYTES`]. A body of declared length
/// (within the limit) is read in one call; only one without a length is
/// read piece by piece (through `worker`'s byte stream), to cut it off as
/// soon as it passes the limit.
pub async fn read(req: Request) -> Result<Vec<u8>, ApiError> {
    let declared = check_declared_length(&req, MAX_BODY_BYTES as u64)?;
    if declared.is_some() {
        let buffer = JsFuture::from(req.array_buffer().map_err(unreadable)?)
            .await
            .map_err(unreadable)?;
        return Ok(Uint8Array::new(&buffer).to_vec());
    }
    let mut body = Vec::new();
    let Ok(mut stream) = worker::Request::from(req).stream() else {
        return Ok(body); // no body at all
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::UnreadableBody(e.to_string()))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge(MAX_BODY_BYTES as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// All of a response's body.
pub async fn all_of(response: worker::Response) -> Result<Vec<u8>, JsValue> {
    let response = web_sys::Response::from(response);
    let buffer = JsFuture::from(response.array_buffer()?).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

fn unreadable(e: JsValue) -> ApiError {
    ApiError::UnreadableBody(worker::Error::from(e).to_string())
}
