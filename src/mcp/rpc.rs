//! JSON-RPC 2.0 as MCP uses it: the error codes, and the responses a room
//! writes. Built as `Value`s by [`object`], not `json!`, which converts
//! each value it is given through a serializer of its own: that one alone
//! would cost the upload kilobytes. A tool call's result, which holds JSON
//! text as it came, is written around it instead ([`result_written`]).

use serde_json::{Map, Value};

use super::version::{self, MODERN};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// 2026-07-28: a header missing, or not what the body says.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: a revision the server does not speak.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// A JSON object of `pairs`, in order.
pub fn object(pairs: Vec<(&str, Value)>) -> Value {
    let pairs = pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value));
    Value::Object(pairs.collect::<Map<String, Value>>())
}

/// An error response; its `id` is the request's, or null when there was
/// none to read.
pub fn error(id: Option<&Value>, code: i64, message: &str) -> Value {
    let error = object(vec![("code", code.into()), ("message", message.into())]);
    object(vec![
        ("jsonrpc", "2.0".into()),
        ("id", id.cloned().unwrap_or(Value::Null)),
        ("error", error),
    ])
}

/// The -32022 of a 2026-07-28 request naming a revision not served.
pub fn unsupported(id: Option<&Value>, requested: &str) -> Value {
    let mut error = error(
        id,
        UNSUPPORTED_VERSION,
        &format!("unsupported protocol version {requested}"),
    );
    error["error"]["data"] = object(vec![
        ("supported", version::SUPPORTED.to_vec().into()),
        ("requested", requested.into()),
    ]);
    error
}

/// The result of request `id` in `version`: 2026-07-28 results say they
/// are complete (`resultType`), as that revision requires of every result.
pub fn result(id: &Value, version: &str, mut result: Value) -> Value {
    if version == MODERN {
        result["resultType"] = "complete".into();
    }
    object(vec![
        ("jsonrpc", "2.0".into()),
        ("id", id.clone()),
        ("result", result),
    ])
}

/// [`result`], written, for a result written already: `result` is the
/// JSON text of an object with at least one member, which is not read
/// into a `Value` to be written again.
pub fn result_written(id: &Value, version: &str, mut result: String) -> String {
    if version == MODERN {
        result.pop(); // the object's closing brace
        result.push_str(r#","resultType":"complete"}"#);
    }
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        written(id)
    )
}

/// A response, or a part of one, as JSON text.
pub fn written(value: &Value) -> String {
    // Writing a `Value` cannot fail: its keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}
