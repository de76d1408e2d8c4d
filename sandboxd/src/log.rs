//! One JSON line per command on stderr: the sandbox, the command's number,
//! how long it ran, its exit code, how much output it gave and whether it
//! timed out. Never the command's text or output. Keys as in the worker's
//! log lines.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::session::Outcome;

#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandLog<'a> {
    pub event: &'static str,
    pub sandbox: &'a str,
    /// Commands are numbered from 1 in the order they end, across the
    /// process: the id that tells one command's line from another's.
    pub command: u64,
    pub duration_ms: u64,
    pub exit_code: i32,
    /// Of the answer's stdout and stderr, sandboxd's notes included.
    pub stdout_bytes: usize,
    pub stderr_bytes: usize,
    pub timed_out: bool,
    pub truncated: bool,
}

impl<'a> CommandLog<'a> {
    pub fn new(sandbox: &'a str, outcome: &Outcome) -> Self {
        static ENDED: AtomicU64 = AtomicU64::new(0);
        CommandLog {
            event: "command",
            sandbox,
            command: ENDED.fetch_add(1, Ordering::Relaxed) + 1,
            duration_ms: outcome.duration_ms(),
            exit_code: outcome.exit_code,
            stdout_bytes: outcome.stdout.len(),
            stderr_bytes: outcome.stderr.len(),
            timed_out: outcome.timed_out,
            truncated: outcome.truncated,
        }
    }
}

/// Writes one line.
pub fn emit<T: Serialize>(line: &T) {
    if let Ok(line) = serde_json::to_string(line) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_line_has_camel_case_keys_and_no_text() {
        let outcome = Outcome {
            stdout: "secret out\n".into(),
            stderr: "sandboxd: command timed out after 5 ms\n".into(),
            exit_code: 124,
            timed_out: true,
            truncated: false,
            started: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(1234),
            shell_usable: true,
        };
        let first = CommandLog::new("room-1", &outcome);
        let line = serde_json::to_string(&first).unwrap();
        let number = first.command;
        assert_eq!(
            line,
            format!(
                r#"{{"event":"command","sandbox":"room-1","command":{number},"durationMs":1234,"exitCode":124,"stdoutBytes":11,"stderrBytes":39,"timedOut":true,"truncated":false}}"#
            )
        );
        assert!(number >= 1);
        assert!(
            CommandLog::new("room-1", &outcome).command > number,
            "each line its own number"
        );
    }
}
