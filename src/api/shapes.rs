//! The JSON shapes of the public API (see the README). `ts` is an integer
//! count of milliseconds: the Go caller decodes it into an int64. A
//! command's request and result are sandboxd's, passed on as they are, so
//! they are the `duet_wire` crate's.

use duet_wire::{ExecEnd, ExecResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `POST /sandbox/exec`.
    Exec,
    /// The room's agent: a `<run>` tag or a tool call of its model.
    Agent,
    /// An MCP client's `run_command` (`mcp`).
    Mcp,
}

impl Source {
    /// The MCP tool a command of this source came through, as the audit
    /// names it.
    pub fn tool(self) -> Option<&'static str> {
        (self == Self::Mcp).then_some(RUN_COMMAND)
    }
}

/// The tools that run a command, start a job, tell of one and stop one:
/// the model's, and an MCP client's.
pub const RUN_COMMAND: &str = "run_command";
pub const START_JOB: &str = "start_job";
pub const JOB_STATUS: &str = "job_status";
pub const STOP_JOB: &str = "stop_job";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

/// One stored chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: Role,
    #[serde(rename = "userId", skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    pub text: String,
    pub ts: i64,
}

/// A validated `POST .../message` body.
#[derive(Debug, PartialEq, Eq)]
pub struct MessageRequest {
    pub text: String,
    pub user_id: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct MessageResponse<'a> {
    pub reply: &'a str,
    pub messages: &'a [Message],
    /// The agent's commands that wait for a writer (`approvals::policy`'s `ask`).
    #[serde(skip_serializing_if = "<[Approval]>::is_empty")]
    pub approvals: &'a [Approval],
}

/// What became of a command of the agent's that waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approved,
    Denied,
    /// Nobody decided in time: it did not run.
    Expired,
}

impl Decision {
    const ALL: [Self; 3] = [Self::Approved, Self::Denied, Self::Expired];

    pub fn name(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|decision| decision.name() == name)
    }
}

/// A command of the agent's put to the room: waiting while `decision` is
/// none. `askedBy` is who sent the message that led the agent to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub id: u64,
    pub command: String,
    /// A file's change: the change, as a diff (`files::tools::diff`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    pub asked_by: Option<String>,
    pub asked_at: u64,
    pub expires_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Who decided: a writer's name, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The allow or deny rule that decided it before anyone was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<u64>,
}

/// `GET .../approvals`.
#[derive(Debug, Serialize)]
pub struct ApprovalsResponse<'a> {
    pub approvals: &'a [Approval],
}

/// `POST .../approvals/{id}`: the approval as decided.
#[derive(Debug, Serialize)]
pub struct DecisionResponse<'a> {
    pub approval: &'a Approval,
}

/// What the audit says of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditOutcome {
    /// The sandbox ran it (whatever its exit code).
    Ran,
    /// It was not run: a rule, the policy, a writer or the clock said no.
    Refused,
    /// It was let through, but the sandbox could not run it.
    Failed,
}

/// One command of the room's audit (`GET .../audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub at: u64,
    pub command: String,
    pub source: Source,
    pub asked_by: Option<String>,
    pub outcome: AuditOutcome,
    pub decided_by: Option<String>,
    pub rule: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub timed_out: bool,
    /// For an MCP client's call, the tool it called (`run_command` for its
    /// commands; for the others, `command` is what it sent, if anything).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'static str>,
}

/// `GET .../messages`.
#[derive(Debug, Serialize)]
pub struct HistoryResponse<'a> {
    pub messages: &'a [Message],
}

/// The messages of a [`HistoryResponse`]'s JSON, read through a `Value`
/// (see [`exec_result`]); one that is not a message is left out.
pub fn messages_of(value: &Value) -> Vec<Message> {
    let messages = value["messages"].as_array().map(Vec::as_slice);
    messages
        .unwrap_or_default()
        .iter()
        .filter_map(|message| {
            let role = match message["role"].as_str()? {
                "user" => Role::User,
                "agent" => Role::Agent,
                _ => return None,
            };
            Some(Message {
                role,
                user_id: message["userId"].as_str().map(str::to_owned),
                text: message["text"].as_str()?.to_owned(),
                ts: message["ts"].as_i64()?,
            })
        })
        .collect()
}

/// The exec answer: `{"result": ..., "sandboxName": ...}`. The result is
/// sandboxd's [`ExecResult`](duet_wire::ExecResult) (that of
/// `docs/openapi.yaml` too): the Sandbox object passes it through as
/// sandboxd wrote it, as it may carry megabytes of output. The DuetAgent's
/// calls (`room::calls`) are answered the result alone, which the agent
/// reads once and an MCP client is given as it is.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecResponse<R> {
    pub result: R,
    pub sandbox_name: String,
}

/// A command's result as the worker reads it, from the JSON of an
/// [`ExecResult`] (what is missing is empty, as in sandboxd's): through a
/// `Value`, whose reader the upload has anyway, where a derived reader of
/// its own would cost it more than these lines.
pub fn exec_result(value: &Value) -> ExecResult {
    let text = |key| value[key].as_str().unwrap_or_default().to_owned();
    let flag = |key| value[key].as_bool().unwrap_or_default();
    ExecResult {
        stdout: text("stdout"),
        stderr: text("stderr"),
        exit_code: value["exitCode"].as_i64().unwrap_or_default() as i32,
        success: flag("success"),
        command: text("command"),
        duration: value["duration"].as_u64().unwrap_or_default(),
        timestamp: text("timestamp"),
        truncated: flag("truncated"),
        timed_out: flag("timedOut"),
    }
}

/// How a command ended, from the JSON of its [`ExecResult`], read as
/// [`exec_result`] reads it.
pub fn exec_end(value: &Value) -> ExecEnd {
    ExecEnd {
        exit_code: value["exitCode"].as_i64().unwrap_or_default() as i32,
        truncated: value["truncated"].as_bool().unwrap_or_default(),
        timed_out: value["timedOut"].as_bool().unwrap_or_default(),
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupResponse<'a> {
    pub cleaned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_id: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub errors: &'a [String],
}

/// The sandbox that belongs to a room.
pub fn sandbox_name(room: &str) -> String {
    format!("sandbox-{room}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_serialize_as_the_go_server_expects() {
        let user = Message {
            role: Role::User,
            user_id: Some("ana".into()),
            text: "hi".into(),
            ts: 1_764_400_000_000,
        };
        let agent = Message {
            role: Role::Agent,
            user_id: None,
            text: "hello".into(),
            ts: 1_764_400_000_950,
        };
        assert_eq!(
            serde_json::to_string(&[user, agent]).unwrap(),
            r#"[{"role":"user","userId":"ana","text":"hi","ts":1764400000000},{"role":"agent","text":"hello","ts":1764400000950}]"#
        );
    }

    #[test]
    fn a_history_reads_back_as_written() {
        let messages = [
            Message {
                role: Role::User,
                user_id: Some("ana".into()),
                text: "hi".into(),
                ts: 1,
            },
            Message {
                role: Role::Agent,
                user_id: None,
                text: "hello".into(),
                ts: 2,
            },
        ];
        let written = serde_json::to_value(HistoryResponse {
            messages: &messages,
        })
        .unwrap();
        assert_eq!(messages_of(&written), messages);
        let odd = serde_json::json!({"messages": [{"role": "bot", "text": "x", "ts": 1}, 3]});
        assert!(messages_of(&odd).is_empty());
        let ended = exec_end(&serde_json::json!({"exitCode": 3, "timedOut": true}));
        assert_eq!(
            (ended.exit_code, ended.truncated, ended.timed_out),
            (3, false, true)
        );
    }

    #[test]
    fn cleanup_bodies() {
        let ok = CleanupResponse {
            cleaned: true,
            room_id: Some("r1"),
            errors: &[],
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"cleaned":true,"roomId":"r1"}"#
        );
        let errors = ["sandbox: gone".to_string()];
        let partial = CleanupResponse {
            cleaned: true,
            room_id: None,
            errors: &errors,
        };
        assert_eq!(
            serde_json::to_string(&partial).unwrap(),
            r#"{"cleaned":true,"errors":["sandbox: gone"]}"#
        );
    }

    #[test]
    fn exec_answers_are_read_whole() {
        let whole = ExecResult {
            stdout: "hi\n".into(),
            stderr: "ü".into(),
            exit_code: -9,
            success: false,
            command: "echo hi".into(),
            duration: 3,
            timestamp: "2026-11-29T16:00:00.000Z".into(),
            truncated: true,
            timed_out: true,
        };
        let written = serde_json::to_value(&whole).unwrap();
        assert_eq!(
            exec_result(&written),
            whole,
            "every field, as sandboxd writes it"
        );
        let answer: Value = serde_json::from_str(
            r#"{"result":{"stdout":"hi\n","stderr":"","exitCode":0,"success":true,"command":"echo hi","duration":3,"timestamp":"2026-11-29T16:00:00.000Z","truncated":false,"timedOut":false},"sandboxName":"sandbox-r"}"#,
        )
        .unwrap();
        assert_eq!(
            exec_result(&answer["result"]),
            ExecResult {
                stdout: "hi\n".into(),
                stderr: String::new(),
                exit_code: 0,
                success: true,
                command: "echo hi".into(),
                duration: 3,
                timestamp: "2026-11-29T16:00:00.000Z".into(),
                truncated: false,
                timed_out: false,
            }
        );
        let sparse: Value = serde_json::from_str(r#"{"stderr":"boom"}"#).unwrap();
        assert_eq!(
            exec_result(&sparse),
            ExecResult {
                stderr: "boom".into(),
                ..ExecResult::default()
            }
        );
    }
}
