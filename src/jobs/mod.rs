//! A room's jobs: commands that outlive a request, started beside the
//! room's shell by sandboxd (`duet_wire::job`), which keeps their output
//! while they run. The Sandbox object keeps the room's list of them
//! ([`Jobs`], a table of its own) and follows each running job's output
//! onto the feed (`sandbox::follow`). This is the pure core: a job's shape,
//! the room's bound of running jobs, what of a job's output is kept, and
//! when a job nobody hears of is taken for lost.

use duet_wire::job::{JobState, MAX_RUNNING_JOBS};
use serde::Serialize;
use serde_json::Value;

use crate::api::shapes::Source;
use crate::api::ApiError;

mod table;

pub use table::Jobs;

/// A job as the API shows it, as it starts; its end sets `state`,
/// `exitCode` and `endedAt` (see [`Jobs::end`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job<'a> {
    pub id: &'a str,
    pub cmd: &'a str,
    pub name: Option<&'a str>,
    pub state: JobState,
    pub exit_code: Option<i32>,
    /// As sandboxd wrote it: UTC, ISO 8601 with milliseconds.
    pub started_at: &'a str,
    pub ended_at: Option<&'a str>,
    /// Who started it, as a command's `askedBy` names them.
    pub started_by: Option<&'a str>,
    pub source: Source,
}

/// A job as the room's model hears of it, read once from what the Sandbox
/// object answers (`{"job": {...}}`, with the newest of its output when
/// asked of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub id: String,
    pub state: String,
    pub exit_code: Option<i64>,
    pub output: String,
}

impl Seen {
    pub fn of(answer: &Value) -> Option<Self> {
        let job = &answer["job"];
        let text = |key: &str| job[key].as_str().map(str::to_owned);
        Some(Self {
            id: text("id")?,
            state: text("state")?,
            exit_code: job["exitCode"].as_i64(),
            output: text("output").unwrap_or_default(),
        })
    }

    /// Its id, state, exit code once it has one, and the last `bytes` of
    /// its output, if any: a reader's bound of characters, counted in
    /// bytes, as the job's output is kept (so never more characters).
    pub fn said(&self, bytes: usize) -> String {
        let mut said = format!("job {}: {}", self.id, self.state);
        if let Some(code) = self.exit_code {
            said += &format!(", exit code {code}");
        }
        if !self.output.is_empty() {
            let mut last = String::new();
            tail(&mut last, &self.output, bytes);
            let last = last.trim_end_matches('\n');
            said += &format!("\noutput (its last {bytes} bytes at most):\n{last}");
        }
        said
    }
}

/// How often the alarm comes while a job runs: it keeps the room awake and
/// follows again a job whose follower was lost.
pub const CHECK_MS: u64 = 30_000;

/// What a job may take beyond its longest life before a job still running
/// here, which sandboxd never said ended, is taken for lost.
const LOST_MARGIN_MS: u64 = 60_000;

/// Refuses a job beyond the room's bound of running ones.
pub fn admit(running: usize) -> Result<(), ApiError> {
    match running < MAX_RUNNING_JOBS {
        true => Ok(()),
        false => Err(ApiError::TooManyJobs),
    }
}

/// When a job started at `now` with a longest life of `max_ms` is taken
/// for lost if it is still running here.
pub fn lost_at(now: u64, max_ms: u64) -> u64 {
    now.saturating_add(max_ms).saturating_add(LOST_MARGIN_MS)
}

/// Appends `data` to the output `kept`, and keeps its newest `max` bytes,
/// cut between characters.
pub fn tail(kept: &mut String, data: &str, max: usize) {
    kept.push_str(data);
    if kept.len() > max {
        let cut = kept.ceil_char_boundary(kept.len() - max);
        kept.drain(..cut);
    }
}

/// When the log next bounds a job's output: after a KiB of it or an event,
/// whichever counts more, sixteen times, so a job that prints a line at a
/// time is not bounded at every line.
#[derive(Default)]
pub struct Bounding(u64);

impl Bounding {
    /// Counts an event of `bytes`; whether the bound is due now.
    pub fn due(&mut self, bytes: usize) -> bool {
        self.0 += 1 + bytes as u64 / 1024;
        let due = self.0 >= 16;
        if due {
            self.0 = 0;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::limits::JOB_OUTPUT_TAIL_BYTES;

    #[test]
    fn a_job_shows_every_field_as_it_starts() {
        let job = Job {
            id: "j00000000000000ff",
            cmd: "make",
            name: None,
            state: JobState::Running,
            exit_code: None,
            started_at: "2026-11-29T16:00:00.000Z",
            ended_at: None,
            started_by: Some("ana"),
            source: Source::Exec,
        };
        assert_eq!(
            serde_json::to_string(&job).unwrap(),
            r#"{"id":"j00000000000000ff","cmd":"make","name":null,"state":"running","exitCode":null,"startedAt":"2026-11-29T16:00:00.000Z","endedAt":null,"startedBy":"ana","source":"exec"}"#
        );
    }

    #[test]
    fn a_job_is_told_by_its_state_exit_code_and_last_output() {
        let read = |json: &str| Seen::of(&serde_json::from_str(json).unwrap());
        let started = read(r#"{"job":{"id":"j1","state":"running","exitCode":null}}"#).unwrap();
        assert_eq!(started.said(5), "job j1: running");
        let ended =
            read(r#"{"job":{"id":"j1","state":"exited","exitCode":2,"output":"abcdéfg\n"}}"#);
        assert_eq!(
            ended.unwrap().said(5),
            "job j1: exited, exit code 2\noutput (its last 5 bytes at most):\néfg"
        );
        assert_eq!(read(r#"{"error":"no such job"}"#), None);
    }

    #[test]
    fn a_room_runs_eight_jobs_at_once() {
        assert!(admit(0).is_ok() && admit(MAX_RUNNING_JOBS - 1).is_ok());
        assert_eq!(admit(MAX_RUNNING_JOBS).unwrap_err().status(), 429);
    }

    #[test]
    fn a_job_is_lost_a_minute_after_its_longest_life() {
        assert_eq!(lost_at(1_000, 5_000), 66_000);
        assert_eq!(lost_at(u64::MAX - 1, 5), u64::MAX);
    }

    #[test]
    fn the_output_kept_is_the_newest_cut_between_characters() {
        let mut kept = String::new();
        tail(&mut kept, "abc", 4);
        tail(&mut kept, "de", 4);
        assert_eq!(kept, "bcde");
        tail(&mut kept, "é", 4);
        assert_eq!(kept, "deé");
        tail(&mut kept, "ééé", 4);
        assert_eq!(kept, "éé");
        let mut kept = String::new();
        for _ in 0..100 {
            tail(&mut kept, &"x".repeat(1_000), JOB_OUTPUT_TAIL_BYTES);
        }
        assert_eq!(kept.len(), JOB_OUTPUT_TAIL_BYTES);
    }

    #[test]
    fn the_log_bounds_a_job_every_sixteen_events_or_kib() {
        let mut bounding = Bounding::default();
        let small: Vec<bool> = (0..32).map(|_| bounding.due(10)).collect();
        assert_eq!(small.iter().filter(|due| **due).count(), 2);
        assert!(small[15] && small[31]);
        assert!(bounding.due(16 * 1024), "a full event is bounded at once");
    }
}
