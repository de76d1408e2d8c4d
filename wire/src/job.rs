//! Jobs: commands that outlive a request. sandboxd starts one beside the
//! room's shell, with the shell's working directory and exported
//! environment of that moment, in a process group of its own, its stdout
//! and stderr one stream as printed; it keeps the newest
//! [`JOB_OUTPUT_KEPT_BYTES`] of that stream and, once the job ended, how it
//! ended. The worker names each job ([`JobRequest::id`]) and keeps the
//! room's list of them; sandboxd only knows the jobs of its own lifetime,
//! so a job the worker has as running that sandboxd does not know was lost.
//!
//! ```text
//! POST   /v1/sandboxes/{name}/jobs                    JobRequest -> 201 JobInfo
//! GET    /v1/sandboxes/{name}/jobs                    -> [JobInfo], running first
//! GET    /v1/sandboxes/{name}/jobs/{id}               -> JobInfo
//! GET    /v1/sandboxes/{name}/jobs/{id}/output?from=N -> NDJSON of JobEvent
//! DELETE /v1/sandboxes/{name}/jobs/{id}               -> JobInfo, once it ended
//! ```
//!
//! The output route streams from byte offset `from` of the job's output (a
//! count of all it printed, so a reader that lost its connection goes on
//! where it stopped): what is kept of it at once, then as it is printed,
//! then the `end`. Output older than what is kept is skipped, and the first
//! event's `offset` says where it starts. A stop sends SIGTERM to the job's
//! process group and SIGKILL after [`STOP_GRACE_MS`].

use serde::{Deserialize, Serialize};

/// The newest output of a job that sandboxd keeps.
pub const JOB_OUTPUT_KEPT_BYTES: usize = 1024 * 1024;
/// How long a stopped job has after SIGTERM before SIGKILL.
pub const STOP_GRACE_MS: u64 = 5_000;
/// At most this many jobs run at once in one sandbox; sandboxd refuses the
/// next with 429.
pub const MAX_RUNNING_JOBS: usize = 8;

/// A job to start. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobRequest {
    /// The worker's name for it: letters, digits, `-` and `_`, at most 64.
    pub id: String,
    pub cmd: String,
    /// Its longest life; sandboxd stops it then (state `stopped`).
    pub max_ms: u64,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Running,
    /// It ended by itself; its exit code says how.
    Exited,
    /// It was stopped: asked to, at its longest life, or with its sandbox.
    Stopped,
    /// It ended unseen: the sandboxd that ran it is gone.
    Lost,
}

/// A job as sandboxd knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobInfo {
    pub id: String,
    pub cmd: String,
    pub state: JobState,
    /// Set once it ended: its exit code, or 128 + the signal that ended it.
    pub exit_code: Option<i32>,
    /// UTC, ISO 8601 with milliseconds, as [`crate::ExecResult::timestamp`].
    pub started_at: String,
    pub ended_at: Option<String>,
    /// All it printed so far, in bytes: the offset its next output starts at.
    pub output_bytes: u64,
}

/// One line of a job's output stream; its fields named as [`JobInfo`]'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum JobEvent {
    /// The `bytes` bytes it printed from byte `offset` of its output (at
    /// most [`crate::stream::OUTPUT_EVENT_BYTES`], cut between characters),
    /// as text: bytes that are not UTF-8 come as U+FFFD, so `data` may be
    /// longer. A reader that reconnects asks `from=offset+bytes`.
    Output {
        offset: u64,
        bytes: u64,
        data: String,
    },
    /// How it ended; the last line.
    End {
        state: JobState,
        exit_code: Option<i32>,
        ended_at: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_names_its_fields_as_a_job_does() {
        let end = JobEvent::End {
            state: JobState::Stopped,
            exit_code: Some(143),
            ended_at: "2026-11-29T16:00:00.000Z".into(),
        };
        assert_eq!(
            serde_json::to_string(&end).unwrap(),
            r#"{"type":"end","state":"stopped","exitCode":143,"endedAt":"2026-11-29T16:00:00.000Z"}"#
        );
    }
}
