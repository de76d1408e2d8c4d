//! Reads a request body without ever holding more than the limit: a declared
//! length over it is refused unread, and a streamed body is cut off as soon as
//! it passes it.

use futures_util::StreamExt;
use worker::Request;

use crate::api::limits::MAX_BODY_BYTES;
use crate::api::ApiError;

pub async fn read(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    let declared = req
        .headers()
        .get("content-length")?
        .and_then(|len| len.parse::<usize>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES) {
        return Err(ApiError::PayloadTooLarge);
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    let Ok(mut stream) = req.stream() else {
        return Ok(body); // no body at all
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::PayloadTooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
