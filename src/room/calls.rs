//! Which of a room's two Durable Objects serves what is asked of it
//! ([`served`]: each object's `handle` matches only its own, [`ToAgent`]
//! or [`ToSandbox`]), and every call between them, in one place: typed
//! handles on each object ([`AgentObject`], [`SandboxObject`]) and the
//! internal paths they use, built and parsed from one table ([`Call`]).
//!
//! The internal paths live under `/internal/rooms/`, which the front door
//! never routes: from outside they are unknown paths, so nobody outside can
//! pass a command off as the agent's, feed the live feed or destroy a
//! sandbox behind the DuetAgent's back.

use duet_wire::ExecResult;
use serde::Serialize;
use worker::{Env, Method, Stub};

use crate::api::route::{self, job_id, job_number, Action, Route};
use crate::api::shapes::{exec_result, messages_of, sandbox_name, AuditEntry, Message, Source};
use crate::api::ApiError;
use crate::approvals::audit::Consent;
use crate::approvals::policy::{Policy, Verdict};
use crate::feed::event::Event;
use crate::files::tools::{normalized, FileTool};
use crate::jobs::Seen;
use crate::runtime::{bindings, body, internal};

/// A [`Call::AgentExec`]'s or [`Call::AgentJob`]'s body: an exec or job
/// request (`api::validate` reads it) with the `userId` of whoever sent
/// the message and the [`Consent`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentExecBody<'a> {
    cmd: &'a str,
    /// A command's; a job's is null.
    timeout_ms: Option<u64>,
    /// A job's; a command's is null.
    name: Option<&'a str>,
    user_id: Option<&'a str>,
    decided_by: Option<&'a str>,
    rule: Option<&'a str>,
}

/// A command of the agent's or an MCP client's tool call (read by
/// `exchange::tools`), as the Sandbox object is asked to carry it out: what
/// it runs (for a job's status or stop,
/// the call as the room's reply names it), the time limit it asks for if
/// any, and what the sandbox is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub cmd: String,
    pub timeout_ms: Option<u64>,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Run,
    /// With the job's name, if given.
    StartJob(Option<String>),
    JobStatus(u64),
    StopJob(u64),
    /// A file tool's call, on the file at `path`.
    File {
        tool: FileTool,
        path: String,
    },
    /// Keys typed into the shared terminal (`write_terminal`): the command
    /// is what they spell, as the policy judges it.
    Terminal,
}

impl Command {
    /// A `<run>` tag's command.
    pub fn run(cmd: &str) -> Self {
        Self {
            cmd: cmd.to_owned(),
            timeout_ms: None,
            kind: Kind::Run,
        }
    }

    /// What the room's policy says of it: a job's status or stop runs
    /// nothing new, so it is not asked.
    /// What the audit records of it: the command, or a file tool's path
    /// under the tool's name.
    pub fn audited(&self) -> (&str, Option<&'static str>) {
        match &self.kind {
            Kind::File { tool, path } => (path, Some(tool.name())),
            _ => (&self.cmd, None),
        }
    }

    /// A file's change is judged by the rules that name files; reading
    /// one changes nothing, so it is not asked either.
    pub fn judged(&self, policy: &Policy) -> Verdict {
        match &self.kind {
            Kind::JobStatus(_) | Kind::StopJob(_) => Verdict::Run { rule: None },
            Kind::File { tool, path } => match tool.changes() {
                true => policy.judge_file(tool.name(), &normalized(path)),
                false => Verdict::Run { rule: None },
            },
            _ => policy.judge(&self.cmd),
        }
    }
}

/// A call from one of a room's objects to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// DuetAgent → Sandbox: a command of the agent's; answers its
    /// `duet_wire::ExecResult`, as sandboxd wrote it.
    AgentExec,
    /// DuetAgent → Sandbox: a command of an MCP client's (`run_command`);
    /// answers as [`Call::AgentExec`] does.
    McpExec,
    /// DuetAgent → Sandbox: a job of the agent's, or of an MCP client's
    /// (`start_job`), to start; answers it as `POST …/jobs` does.
    AgentJob,
    McpJob,
    /// DuetAgent → Sandbox: a job to tell of, or to stop (`job_status`,
    /// `stop_job`), by the number of its id; answers as `GET …/jobs/{id}`.
    Job(u64),
    StopJob(u64),
    /// DuetAgent → Sandbox: a file tool's call of the agent's, or of an MCP
    /// client's, its arguments as the tool takes them (`files::tools`),
    /// with `preview` to hear the change it would make without making it;
    /// answers `{"path", "text"}`, or `{"error"}` for a call the file
    /// refuses.
    AgentFile,
    McpFile,
    /// DuetAgent → Sandbox: the shared terminal's screen (`read_terminal`);
    /// answers `{"cols", "rows", "text"}`.
    TerminalScreen,
    /// DuetAgent → Sandbox: keys an MCP client types into the shared
    /// terminal (`write_terminal`); answers `{"bytes", "echo"}`.
    McpTerminal,
    /// DuetAgent → Sandbox: an event for the live feed.
    Publish,
    /// DuetAgent → Sandbox: a command of the agent's that did not run, for
    /// the room's audit (the Sandbox object records those that do).
    Audit,
    /// DuetAgent → Sandbox: the room's history expired; the feed closes,
    /// and the room's tokens end.
    HistoryExpired,
    /// DuetAgent → Sandbox: the room's token generation changed (see
    /// `access::generation`); the sockets of other generations' tokens close.
    Generation,
    /// DuetAgent → Sandbox: the room is cleaned up; the sandbox goes.
    Destroy,
    /// Sandbox → DuetAgent: the stored history, for a new watcher.
    History,
    /// Sandbox → DuetAgent: whether the live feed has watchers.
    Watching,
}

/// Each call's path tail and method; a path is `/internal/rooms/{room}/{tail}`.
/// A call whose answer changes takes a new tail, so that while a deploy
/// leaves a room's two objects on different versions, the call fails as
/// unknown (before anything runs) rather than being misread.
/// A job's call is listed with job 0; its path ends in the job's id.
const CALLS: [(Call, &str, &str); 17] = [
    (Call::AgentExec, "agent-run", "POST"),
    (Call::McpExec, "mcp-run", "POST"),
    (Call::AgentJob, "agent-job", "POST"),
    (Call::McpJob, "mcp-job", "POST"),
    (Call::Job(0), "job", "POST"),
    (Call::StopJob(0), "stop-job", "POST"),
    (Call::AgentFile, "agent-file", "POST"),
    (Call::McpFile, "mcp-file", "POST"),
    (Call::TerminalScreen, "terminal-screen", "GET"),
    (Call::McpTerminal, "mcp-terminal", "POST"),
    (Call::Publish, "publish", "POST"),
    (Call::Audit, "audit", "POST"),
    (Call::HistoryExpired, "expired", "POST"),
    (Call::Generation, "generation", "PUT"),
    (Call::Destroy, "destroy", "POST"),
    (Call::History, "history", "GET"),
    (Call::Watching, "watching", "PUT"),
];

const PREFIX: &str = "/internal/rooms/";

impl Call {
    fn entry(self) -> (&'static str, &'static str) {
        let listed = match self {
            Call::Job(_) => Call::Job(0),
            Call::StopJob(_) => Call::StopJob(0),
            call => call,
        };
        let (_, tail, method) = CALLS
            .into_iter()
            .find(|&(call, _, _)| call == listed)
            .expect("every call is in the table");
        (tail, method)
    }

    /// The path of this call to `room`'s other object.
    pub fn path(self, room: &str) -> String {
        let tail = self.entry().0;
        match self {
            Call::Job(job) | Call::StopJob(job) => format!("{PREFIX}{room}/{tail}/{}", job_id(job)),
            _ => format!("{PREFIX}{room}/{tail}"),
        }
    }

    fn method(self) -> Method {
        Method::from(self.entry().1.to_owned())
    }

    /// A short stable name for logs.
    pub fn name(self) -> &'static str {
        self.entry().0
    }
}

/// What a request to one of the room's objects asks: a public route the
/// front door handed on, or a call from the room's other object (see
/// [`served`] for which object serves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Public(Action),
    Call(Call),
}

/// Reads a request to a room's object: its room and what it asks.
fn asked(method: &str, path: &str) -> Result<(String, Asked), ApiError> {
    if let Some(rest) = path.strip_prefix(PREFIX) {
        let (raw_room, tail) = rest.split_once('/').ok_or(ApiError::NotFound)?;
        let (tail, job) = tail.split_once('/').unwrap_or((tail, ""));
        let (call, _, _) = CALLS
            .into_iter()
            .find(|&(_, t, m)| (t, m) == (tail, method))
            .ok_or(ApiError::NotFound)?;
        let call = match call {
            Call::Job(_) => Call::Job(job_number(job)?),
            Call::StopJob(_) => Call::StopJob(job_number(job)?),
            _ if job.is_empty() => call,
            _ => return Err(ApiError::NotFound),
        };
        return Ok((route::room_id(raw_room)?, Asked::Call(call)));
    }
    match route::parse(method, path)? {
        Route::Room { room, action } => Ok((room, Asked::Public(action))),
        Route::Health | Route::Page(_) => Err(ApiError::NotFound),
    }
}

/// What the Sandbox object serves: the room's commands, its files, its
/// audit and its live feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToSandbox {
    /// A command, from `POST …/sandbox/exec`, the agent or an MCP client.
    Exec(Source),
    /// A job to start, from `POST …/jobs`, the agent or an MCP client.
    StartJob(Source),
    Jobs,
    Job(u64),
    StopJob(u64),
    /// The workspace's files, by path: read by anyone who watches, changed
    /// by a writer over HTTP.
    ReadFile,
    WriteFile(Source),
    DeleteFile(Source),
    /// A file tool's call, from the agent or an MCP client.
    FileTool(Source),
    /// The shared terminal's screen, and keys typed into it, for MCP.
    TerminalScreen,
    TerminalWrite(Source),
    KeptArchive,
    Audit,
    Terminal,
    /// A command the DuetAgent refused, for the audit.
    RecordRefused,
    Live,
    Publish,
    HistoryExpired,
    Generation,
    Destroy,
}

/// What the DuetAgent serves: the room's history, exchanges, invites,
/// policy, approvals and MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToAgent {
    SendMessage,
    History,
    Cleanup,
    Invite,
    Revoke,
    Policy,
    SetPolicy,
    Approvals,
    Decide { approval: u64 },
    Mcp,
    Watching,
}

/// Which object serves what is asked, and as what: stated here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Sandbox(ToSandbox),
    Agent(ToAgent),
}

fn served(asked: Asked) -> Served {
    use Served::{Agent, Sandbox};
    match asked {
        Asked::Public(action) => match action {
            Action::Exec => Sandbox(ToSandbox::Exec(Source::Exec)),
            Action::KeptArchive => Sandbox(ToSandbox::KeptArchive),
            Action::Live => Sandbox(ToSandbox::Live),
            Action::Audit => Sandbox(ToSandbox::Audit),
            Action::StartJob => Sandbox(ToSandbox::StartJob(Source::Exec)),
            Action::Jobs => Sandbox(ToSandbox::Jobs),
            Action::Job { job } => Sandbox(ToSandbox::Job(job)),
            Action::StopJob { job } => Sandbox(ToSandbox::StopJob(job)),
            Action::ReadFile => Sandbox(ToSandbox::ReadFile),
            Action::WriteFile => Sandbox(ToSandbox::WriteFile(Source::Exec)),
            Action::DeleteFile => Sandbox(ToSandbox::DeleteFile(Source::Exec)),
            Action::Terminal => Sandbox(ToSandbox::Terminal),
            Action::SendMessage => Agent(ToAgent::SendMessage),
            Action::History => Agent(ToAgent::History),
            Action::Cleanup => Agent(ToAgent::Cleanup),
            Action::Invite => Agent(ToAgent::Invite),
            Action::Revoke => Agent(ToAgent::Revoke),
            Action::Policy => Agent(ToAgent::Policy),
            Action::SetPolicy => Agent(ToAgent::SetPolicy),
            Action::Approvals => Agent(ToAgent::Approvals),
            Action::Decide { approval } => Agent(ToAgent::Decide { approval }),
            Action::Mcp => Agent(ToAgent::Mcp),
        },
        Asked::Call(call) => match call {
            Call::AgentExec => Sandbox(ToSandbox::Exec(Source::Agent)),
            Call::McpExec => Sandbox(ToSandbox::Exec(Source::Mcp)),
            Call::AgentJob => Sandbox(ToSandbox::StartJob(Source::Agent)),
            Call::McpJob => Sandbox(ToSandbox::StartJob(Source::Mcp)),
            Call::Job(job) => Sandbox(ToSandbox::Job(job)),
            Call::StopJob(job) => Sandbox(ToSandbox::StopJob(job)),
            Call::AgentFile => Sandbox(ToSandbox::FileTool(Source::Agent)),
            Call::McpFile => Sandbox(ToSandbox::FileTool(Source::Mcp)),
            Call::TerminalScreen => Sandbox(ToSandbox::TerminalScreen),
            Call::McpTerminal => Sandbox(ToSandbox::TerminalWrite(Source::Mcp)),
            Call::Publish => Sandbox(ToSandbox::Publish),
            Call::Audit => Sandbox(ToSandbox::RecordRefused),
            Call::HistoryExpired => Sandbox(ToSandbox::HistoryExpired),
            Call::Generation => Sandbox(ToSandbox::Generation),
            Call::Destroy => Sandbox(ToSandbox::Destroy),
            Call::History => Agent(ToAgent::History),
            Call::Watching => Agent(ToAgent::Watching),
        },
    }
}

/// The object that serves a public `action` of `room`.
pub fn serving(env: &Env, room: &str, action: Action) -> Result<Stub, ApiError> {
    Ok(match served(Asked::Public(action)) {
        Served::Sandbox(_) => sandbox_stub(env, room)?,
        Served::Agent(_) => agent_stub(env, room)?,
    })
}

/// A request to one of the room's objects: its room, whether it came
/// through the front door (so its token's generation is the object's to
/// check), and what it asks of the object that serves it.
pub struct Request {
    pub room: String,
    pub public: bool,
    pub served: Served,
}

/// Reads a request to one of the room's objects.
pub fn request(method: &str, path: &str) -> Result<Request, ApiError> {
    let (room, asked) = asked(method, path)?;
    Ok(Request {
        room,
        public: matches!(asked, Asked::Public(_)),
        served: served(asked),
    })
}

fn agent_stub(env: &Env, room: &str) -> worker::Result<Stub> {
    bindings::durable_objects(env, "DUET_AGENT")?.get_by_name(room)
}

fn sandbox_stub(env: &Env, room: &str) -> worker::Result<Stub> {
    bindings::durable_objects(env, "Sandbox")?.get_by_name(&sandbox_name(room))
}

/// Sends `call` to `stub`; answers the response if it is a 200 (or a 201,
/// a job started), else the error it names.
async fn send(
    stub: &Stub,
    room: &str,
    call: Call,
    body: Option<&[u8]>,
) -> Result<worker::Response, String> {
    let response = internal::send(stub, call.method(), &call.path(room), body)
        .await
        .map_err(|e| e.to_string())?;
    match response.status_code() {
        200 | 201 => Ok(response),
        _ => Err(internal::error_of(response).await),
    }
}

/// The DuetAgent of a room, as its Sandbox object reaches it.
pub struct AgentObject {
    stub: Stub,
    room: String,
}

impl AgentObject {
    pub fn of(env: &Env, room: &str) -> Result<Self, ApiError> {
        Ok(Self {
            stub: agent_stub(env, room)?,
            room: room.to_owned(),
        })
    }

    /// The room's stored history.
    pub async fn history(&self) -> Result<Vec<Message>, ApiError> {
        let mut answer = send(&self.stub, &self.room, Call::History, None)
            .await
            .map_err(ApiError::Internal)?;
        let history: serde_json::Value = answer.json().await?;
        Ok(messages_of(&history))
    }

    /// Tells the DuetAgent whether the room has watchers, so it publishes
    /// the room's messages only when someone sees them. Lost if it cannot
    /// be told.
    pub async fn set_watching(&self, on: bool) {
        let body = if on { &b"true"[..] } else { &b"false"[..] };
        let _ = send(&self.stub, &self.room, Call::Watching, Some(body)).await;
    }
}

/// A command's result as the Sandbox object answers the DuetAgent:
/// sandboxd's [`ExecResult`] as the JSON text sandboxd wrote, checked to be
/// a JSON object there and not rewritten since; or a job's `{"job": …}`
/// as the job routes answer it. It is read once, by whoever needs to read
/// it: the exchange, into an [`ExecResult`] or a [`Seen`] job; an MCP
/// client is given the text as it is.
pub struct Ran(String);

impl Ran {
    /// The result, read.
    pub fn read(&self) -> Result<ExecResult, String> {
        self.value().map(|result| exec_result(&result))
    }

    /// The job, read.
    pub fn read_job(&self) -> Result<Seen, String> {
        Seen::of(&self.value()?).ok_or_else(|| unexpected(&"not a job"))
    }

    /// A file tool's answer: its text, or why the file refused it.
    pub fn file(&self) -> Result<String, String> {
        let value = self.value()?;
        match (value["text"].as_str(), value["error"].as_str()) {
            (Some(text), _) => Ok(text.to_owned()),
            (_, Some(why)) => Err(why.to_owned()),
            _ => Err(unexpected(&"not a file tool's answer")),
        }
    }

    fn value(&self) -> Result<serde_json::Value, String> {
        serde_json::from_str(&self.0).map_err(|e| unexpected(&e))
    }

    /// The result's JSON text.
    pub fn into_json(self) -> String {
        self.0
    }
}

fn unexpected(e: &dyn std::fmt::Display) -> String {
    format!("unexpected sandbox answer: {e}")
}

/// The Sandbox object of a room, as its DuetAgent reaches it.
pub struct SandboxObject {
    stub: Stub,
    room: String,
}

impl SandboxObject {
    pub fn of(env: &Env, room: &str) -> Result<Self, ApiError> {
        Ok(Self {
            stub: sandbox_stub(env, room)?,
            room: room.to_owned(),
        })
    }

    /// Carries out a command of the agent's (`source` [`Source::Agent`],
    /// asked for in `asked_by`'s message) or of an MCP client's
    /// ([`Source::Mcp`]): runs it within `timeout_ms`, or starts, tells of
    /// or stops a job; answers its result, or why the sandbox could not.
    pub async fn act(
        &self,
        command: &Command,
        timeout_ms: u64,
        source: Source,
        asked_by: Option<&str>,
        consent: &Consent,
    ) -> Result<Ran, String> {
        let mcp = source == Source::Mcp;
        let exec = |timeout_ms, name| {
            serde_json::to_string(&AgentExecBody {
                cmd: &command.cmd,
                timeout_ms,
                name,
                user_id: asked_by,
                decided_by: consent.decided_by.as_deref(),
                rule: consent.rule.as_deref(),
            })
            .expect("an exec request serializes")
        };
        let (call, body) = match &command.kind {
            Kind::JobStatus(job) => (Call::Job(*job), exec(None, None)),
            Kind::StopJob(job) => (Call::StopJob(*job), exec(None, None)),
            Kind::StartJob(name) => {
                let call = if mcp { Call::McpJob } else { Call::AgentJob };
                (call, exec(None, name.as_deref()))
            }
            Kind::Run => {
                let call = if mcp { Call::McpExec } else { Call::AgentExec };
                (call, exec(Some(timeout_ms), None))
            }
            Kind::Terminal => {
                let body = serde_json::json!({
                    "data": command.cmd,
                    "userId": asked_by,
                    "decidedBy": consent.decided_by,
                    "rule": consent.rule,
                });
                (Call::McpTerminal, body.to_string())
            }
            Kind::File { tool, path } => {
                let mut body = tool.arguments(path);
                body["userId"] = asked_by.into();
                body["decidedBy"] = consent.decided_by.as_deref().into();
                body["rule"] = consent.rule.as_deref().into();
                let call = if mcp { Call::McpFile } else { Call::AgentFile };
                (call, body.to_string())
            }
        };
        self.send_reading(call, Some(&body)).await
    }

    /// The change a file tool's `command` would make, as a diff for a
    /// writer to approve (or why it would make none); `None` for a command
    /// that changes no file.
    pub async fn diff(&self, command: &Command, mcp: bool) -> Option<String> {
        let Kind::File { tool, path } = &command.kind else {
            return None;
        };
        let mut body = tool.arguments(path);
        body["preview"] = true.into();
        let call = if mcp { Call::McpFile } else { Call::AgentFile };
        let heard = self.send_reading(call, Some(&body.to_string())).await;
        Some(match heard.and_then(|ran| ran.file()) {
            Ok(diff) => diff,
            Err(why) => format!("(no diff: {why})"),
        })
    }

    /// The shared terminal's screen, as `read_terminal` answers it.
    pub async fn terminal_screen(&self) -> Result<Ran, String> {
        self.send_reading(Call::TerminalScreen, None).await
    }

    /// Sends `call` with `body`; answers what came back, read whole.
    async fn send_reading(&self, call: Call, body: Option<&str>) -> Result<Ran, String> {
        let response = send(&self.stub, &self.room, call, body.map(str::as_bytes)).await?;
        let bytes = body::all_of(response)
            .await
            .map_err(|e| unexpected(&worker::Error::from(e)))?;
        String::from_utf8(bytes)
            .map(Ran)
            .map_err(|e| unexpected(&e))
    }

    /// Records a command of the agent's that did not run; lost if the
    /// Sandbox object cannot be reached.
    pub async fn audit(&self, entry: &AuditEntry) {
        let body = serde_json::to_vec(entry).expect("an audit entry serializes");
        let _ = send(&self.stub, &self.room, Call::Audit, Some(&body)).await;
    }

    /// Ends the room's shell and removes its files.
    pub async fn destroy(&self) -> Result<(), String> {
        send(&self.stub, &self.room, Call::Destroy, None).await?;
        Ok(())
    }

    /// Sends events, in order, to the room's live feed and its log. A feed
    /// that cannot be reached costs the caller nothing but the events.
    pub async fn publish(&self, events: &[Event<'_>]) {
        let lines: Vec<String> = events.iter().map(|event| event.written().line()).collect();
        let _ = send(
            &self.stub,
            &self.room,
            Call::Publish,
            Some(lines.join("\n").as_bytes()),
        )
        .await;
    }

    /// Tells the Sandbox object the room's history expired: the live feed
    /// closes and the room's tokens end there too.
    pub async fn history_expired(&self) -> Result<(), String> {
        send(&self.stub, &self.room, Call::HistoryExpired, None).await?;
        Ok(())
    }

    /// Tells the Sandbox object the room's token generation (`None`: it has
    /// none); it closes the sockets of the others' tokens before it answers.
    pub async fn set_generation(&self, generation: Option<&str>) -> Result<(), String> {
        let body = generation.unwrap_or_default().as_bytes();
        send(&self.stub, &self.room, Call::Generation, Some(body)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_reads_back_as_itself() {
        for (call, _, method) in CALLS {
            let path = call.path("r1");
            assert_eq!(
                asked(method, &path).unwrap(),
                ("r1".into(), Asked::Call(call)),
                "{path}"
            );
            assert_eq!(
                route::parse(method, &path).unwrap_err().status(),
                404,
                "the front door does not route {path}"
            );
            let other = if method == "GET" { "POST" } else { "GET" };
            assert_eq!(asked(other, &path).unwrap_err().status(), 404);
        }
    }

    #[test]
    fn the_table_names_each_call_once() {
        let mut tails: Vec<&str> = CALLS.iter().map(|&(_, tail, _)| tail).collect();
        tails.sort_unstable();
        tails.dedup();
        assert_eq!(tails.len(), CALLS.len());
    }

    #[test]
    fn public_routes_read_as_public() {
        assert_eq!(
            asked("GET", "/api/rooms/r1/messages").unwrap(),
            ("r1".to_owned(), Asked::Public(Action::History))
        );
        assert_eq!(asked("GET", "/health").unwrap_err().status(), 404);
        assert_eq!(
            asked("POST", "/internal/rooms/a%2Fb/agent-run")
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(
            asked("POST", "/internal/rooms/r1/other")
                .unwrap_err()
                .status(),
            404
        );
    }
}
