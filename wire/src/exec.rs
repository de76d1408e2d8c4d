//! One command: the request to run it and the result, which `/exec` answers
//! and the `end` of a stream carries.

use serde::{Deserialize, Serialize};

/// A command to run, with its limit in milliseconds. The worker always
/// names a limit; sandboxd reads an `ExecRequest<Option<u64>>` and gives a
/// request without one its default. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecRequest<Timeout = u64> {
    pub cmd: String,
    pub timeout_ms: Timeout,
}

/// What became of a command. sandboxd writes every field, in this order
/// (see [`crate::stream`]); a field missing from what is read is its
/// default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExecResult {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    /// Exit code 0, in time.
    pub success: bool,
    pub command: String,
    /// Milliseconds the command ran.
    pub duration: u64,
    /// When it started: UTC, ISO 8601 with milliseconds.
    pub timestamp: String,
    /// Some output was past the cap and left out.
    pub truncated: bool,
    pub timed_out: bool,
}

/// How a command ended, read from its [`ExecResult`] without its output: the
/// worker reads this of every command for the room's feed and audit, and
/// passes the output on as sandboxd wrote it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecEnd {
    pub exit_code: i32,
    pub truncated: bool,
    pub timed_out: bool,
}

impl From<&ExecResult> for ExecEnd {
    fn from(result: &ExecResult) -> Self {
        Self {
            exit_code: result.exit_code,
            truncated: result.truncated,
            timed_out: result.timed_out,
        }
    }
}
