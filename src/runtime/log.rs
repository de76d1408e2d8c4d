//! One JSON line per request (room, route, status, duration, and the cause of
//! an error), written to the Workers log. Never a secret, a message text or a
//! command's output.

use serde::Serialize;

#[derive(Serialize)]
pub struct RequestLog<'a> {
    pub method: &'a str,
    pub route: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room: Option<&'a str>,
    pub status: u16,
    #[serde(rename = "durationMs")]
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// A failure inside a Durable Object, with its cause; the front door's line
/// for the same request has only the status.
#[derive(Serialize)]
pub struct ObjectFailure<'a> {
    pub object: &'static str,
    pub path: &'a str,
    pub status: u16,
    pub error: String,
}

/// A room's sandbox went to sleep, woke, or the room expired.
#[derive(Serialize)]
struct LifecycleLog<'a> {
    event: &'static str,
    object: &'static str,
    room: &'a str,
    /// Archive bytes saved (sleep) or restored (wake).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(rename = "durationMs")]
    duration_ms: u64,
    /// Why the files were not kept, or what failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Writes the lifecycle line of `event` for `room`, begun at `started`.
pub fn lifecycle(
    event: &'static str,
    object: &'static str,
    room: &str,
    started: u64,
    bytes: Option<u64>,
    note: Option<String>,
) {
    emit(&LifecycleLog {
        event,
        object,
        room,
        bytes,
        duration_ms: super::clock::now_ms().saturating_sub(started),
        note,
    });
}

/// Writes one line.
pub fn emit<T: Serialize>(line: &T) {
    if let Ok(line) = serde_json::to_string(line) {
        worker::web_sys::console::log_1(&line.into());
    }
}
