//! The room as an MCP server (`crate::mcp`), served by its DuetAgent: the
//! protocol answers what it can itself, and the tool calls are carried out
//! here, where the room's history, policy and approvals are. A client's
//! `run_command` and `start_job` are the agent's commands for the room's
//! policy, carried out through the Sandbox object as the agent's are
//! (`Source::Mcp` on the feed and in the audit), as are `job_status` and
//! `stop_job`, which the policy does not judge (`exchange::tools`);
//! `read_history` and `send_message` are what the history and message
//! routes do.
//!
//! Whatever fails in a call (a command the policy refuses, a sandbox that
//! cannot run it, a room cleaned up meanwhile) is the call's tool error,
//! which the client's model reads, never a failed request.

use std::cell::Cell;

use serde_json::{Map, Value};
use worker::{web_sys, Response};

use super::{written, DuetAgent};
use crate::access::token::Claims;
use crate::api::limits::{
    APPROVAL_TIMEOUT_SECONDS, AUDIT_CMD_CHARS, EXEC_ANSWER_MS, EXEC_DEFAULT_TIMEOUT_MS,
    MAX_MCP_CALLS, MCP_APPROVAL_WAIT_MS, SANDBOXD_MARGIN_MS,
};
use crate::api::role::RoomRole;
use crate::api::shapes::{
    AuditEntry, AuditOutcome, Decision, HistoryResponse, Message, MessageRequest, Role, Source,
};
use crate::api::{validate, ApiError};
use crate::approvals::audit;
use crate::approvals::consent::{Hearer, Said};
use crate::approvals::policy::Verdict;
use crate::approvals::waiting::Heard;
use crate::exchange::tools;
use crate::feed::event::Event;
use crate::mcp::tools::{Output, Tool};
use crate::mcp::{self, CallTool, Headers, Item, Reply};
use crate::room::calls::{Kind, SandboxObject};
use crate::runtime::{body, clock, config, respond, timeout};
use crate::text::first_chars;

/// Counts a call in flight for as long as it lives.
struct Calling<'a>(&'a Cell<usize>);

impl<'a> Calling<'a> {
    /// `None` when [`MAX_MCP_CALLS`] are in flight already.
    fn enter(count: &'a Cell<usize>) -> Option<Self> {
        (count.get() < MAX_MCP_CALLS).then(|| {
            count.set(count.get() + 1);
            Self(count)
        })
    }
}

impl Drop for Calling<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl DuetAgent {
    /// `POST …/mcp`: one JSON-RPC message, or a 2025-03-26 batch.
    pub(super) async fn mcp(
        &self,
        room: &str,
        req: web_sys::Request,
        claims: Option<&Claims>,
    ) -> Result<Response, ApiError> {
        let named = |name| req.headers().get(name);
        let (version, method, name) = (
            named("mcp-protocol-version")?,
            named("mcp-method")?,
            named("mcp-name")?,
        );
        let body = body::read(req).await?;
        let headers = Headers {
            protocol_version: version.as_deref(),
            method: method.as_deref(),
            name: name.as_deref(),
        };
        let role = claims.map_or(RoomRole::Owner, |claims| claims.role);
        let reply = match mcp::read(headers, &body, role) {
            Err(reply) => reply,
            Ok(post) => {
                let mut answers = Vec::with_capacity(post.items.len());
                for item in post.items {
                    answers.push(match item {
                        Item::Answered(reply) => reply,
                        Item::CallTool(call) => {
                            let name = claims.and_then(|claims| claims.name.as_deref());
                            let asked_by = name.or(call.client.as_deref());
                            let output = self.call(room, &call, asked_by).await;
                            mcp::answer(&call, &output)
                        }
                    });
                }
                mcp::reply(post.batch, answers)
            }
        };
        Ok(match reply {
            Reply {
                status,
                body: Some(body),
            } => respond::json_text(status, body)?,
            Reply { status, body: None } => Response::empty()?.with_status(status),
        })
    }

    /// Carries out a call, or refuses it (its role, or too many at once);
    /// every one is in the room's audit (a command, by the Sandbox object
    /// that runs it or here where it is refused).
    async fn call(&self, room: &str, call: &CallTool, asked_by: Option<&str>) -> Output {
        let calling = Calling::enter(&self.mcp_calls);
        let busy = || {
            format!(
                "the room is carrying out {MAX_MCP_CALLS} MCP calls, the most it takes at once; \
                 try again shortly"
            )
        };
        let refused = call
            .refused
            .clone()
            .or_else(|| calling.is_none().then(busy));
        if let Some(why) = refused {
            self.audit_call(room, call, asked_by, AuditOutcome::Refused)
                .await;
            return Output::Failed(why);
        }
        let done = match call.tool {
            Tool::ReadHistory => self.read_history(room).await,
            Tool::ReadTerminal => self.read_terminal(room).await,
            Tool::SendMessage => self.send_message(room, &call.arguments, asked_by).await,
            tool => self.command(room, tool, &call.arguments, asked_by).await,
        };
        let done = done.unwrap_or_else(|e| Output::Failed(e.to_string()));
        // The Sandbox object records the commands it runs, the jobs it
        // starts and the files it changes.
        let recorded = [
            Tool::RunCommand,
            Tool::StartJob,
            Tool::WriteFile,
            Tool::EditFile,
        ];
        if !recorded.contains(&call.tool) {
            let outcome = match done {
                Output::Done(_) => AuditOutcome::Ran,
                Output::Failed(_) => AuditOutcome::Failed,
            };
            self.audit_call(room, call, asked_by, outcome).await;
        }
        done
    }

    /// Records a call that ran no command: what it sent (a command, a
    /// message's text, a job's id, a path, keys typed), if anything, under
    /// its tool's name.
    async fn audit_call(
        &self,
        room: &str,
        call: &CallTool,
        asked_by: Option<&str>,
        outcome: AuditOutcome,
    ) {
        let sent = ["command", "cmd", "text", "jobId", "path", "data"]
            .into_iter()
            .find_map(|key| call.arguments[key].as_str())
            .unwrap_or_default();
        if let Ok(sandbox) = SandboxObject::of(&self.env, room) {
            let entry = AuditEntry {
                at: clock::now_ms(),
                command: first_chars(sent, AUDIT_CMD_CHARS).to_owned(),
                source: Source::Mcp,
                asked_by: asked_by.map(str::to_owned),
                outcome,
                decided_by: None,
                rule: None,
                exit_code: None,
                duration_ms: None,
                timed_out: false,
                tool: Some(call.tool.name()),
            };
            sandbox.audit(&entry).await;
        }
    }

    /// The shared terminal's screen, as the people in the room see it.
    async fn read_terminal(&self, room: &str) -> Result<Output, ApiError> {
        self.touch(room).await?;
        let sandbox = SandboxObject::of(&self.env, room)?;
        Ok(match sandbox.terminal_screen().await {
            Ok(screen) => Output::Done(screen.into_json()),
            Err(why) => Output::Failed(format!("the terminal could not be read: {why}")),
        })
    }

    async fn read_history(&self, room: &str) -> Result<Output, ApiError> {
        self.touch(room).await?;
        let messages = self.store.recent()?;
        Ok(Output::Done(written(&HistoryResponse {
            messages: &messages,
        })?))
    }

    /// A message to the room: with `ask` (the default) an exchange with
    /// the room's agent, as `POST …/message`; without, shown on the live
    /// feed only (the history holds exchanges, user and agent in turn).
    async fn send_message(
        &self,
        room: &str,
        arguments: &Value,
        asked_by: Option<&str>,
    ) -> Result<Output, ApiError> {
        let ask = match &arguments["ask"] {
            Value::Null => true,
            Value::Bool(ask) => *ask,
            _ => return Ok(Output::Failed("`ask` must be true or false".into())),
        };
        let mut fields = Map::new();
        fields.insert("text".into(), arguments["text"].clone());
        let request = match validate::message_fields(&fields) {
            Ok(request) => MessageRequest {
                user_id: asked_by.map(str::to_owned),
                ..request
            },
            Err(e) => return Ok(Output::Failed(invalid(&e))),
        };
        self.touch(room).await?;
        if !ask {
            let message = Message {
                role: Role::User,
                user_id: request.user_id,
                text: request.text,
                ts: clock::now_ms() as i64,
            };
            self.publish(room, &[Event::Message { message: &message }])
                .await;
            return Ok(Output::Done(r#"{"asked":false}"#.into()));
        }
        Ok(Output::Done(self.answer(room, request).await?))
    }

    /// A client's command, or a job's start, status or stop, put to the
    /// room's policy as the agent's are.
    async fn command(
        &self,
        room: &str,
        tool: Tool,
        arguments: &Value,
        asked_by: Option<&str>,
    ) -> Result<Output, ApiError> {
        let command = match tools::asked(tool.name(), arguments) {
            Ok(command) => command,
            Err(why) => return Ok(Output::Failed(why)),
        };
        let cmd = &command.cmd;
        let epoch = self.clock.epoch();
        self.touch(room).await?;
        let sandbox = SandboxObject::of(&self.env, room)?;
        let said = match command.judged(&self.policy()?) {
            Verdict::Ask => {
                let diff = sandbox.diff(&command, true).await;
                self.approval(room, cmd, diff.as_deref(), asked_by).await?
            }
            verdict => Said::of_verdict(&verdict, Hearer::Mcp),
        };
        let consent = match said {
            Said::Run(consent) => consent,
            Said::Refused { why, consent } => {
                let entry = audit::entry(
                    clock::now_ms(),
                    command.audited().0,
                    Source::Mcp,
                    asked_by.map(str::to_owned),
                    AuditOutcome::Refused,
                    consent,
                );
                let tool = Some(tool.name());
                sandbox.audit(&AuditEntry { tool, ..entry }).await;
                return Ok(Output::Failed(why));
            }
        };
        self.clock.still_current(epoch)?;
        let timeout_ms = command.timeout_ms.unwrap_or(EXEC_DEFAULT_TIMEOUT_MS);
        // The Sandbox object answers by its own deadline; this bounds the
        // call to it, should it not.
        let wait = EXEC_ANSWER_MS + SANDBOXD_MARGIN_MS;
        let exec = sandbox.act(&command, timeout_ms, Source::Mcp, asked_by, &consent);
        Ok(match timeout::within(wait, exec).await {
            // A file tool's refusal is the call's.
            Some(Ok(ran)) if matches!(command.kind, Kind::File { .. }) => match ran.file() {
                Ok(_) => Output::Done(ran.into_json()),
                Err(why) => Output::Failed(why),
            },
            // As `POST …/sandbox/exec` answers it in `result`, and as
            // sandboxd wrote it: not read again on its way.
            Some(Ok(ran)) => Output::Done(ran.into_json()),
            Some(Err(why)) => Output::Failed(format!("the sandbox could not run it: {why}")),
            None => Output::Failed(format!("the sandbox did not answer within {wait} ms")),
        })
    }

    /// Waits, within [`MCP_APPROVAL_WAIT_MS`] (or the room's shorter
    /// `DUET_APPROVAL_TIMEOUT_SECONDS`), for a writer to decide on
    /// `cmd` (through `POST …/approvals/{id}`, as for the agent's commands,
    /// and shown on the feed the same way). Answers what the decision says:
    /// who approved it, or who refused it and why; it expires when nobody
    /// decided in time.
    ///
    /// Nothing polls: the call sleeps until its approval is decided (every
    /// decision is told through `approvals::waiting`, whoever makes it) or
    /// its deadline comes. Should the object be evicted meanwhile, the
    /// request ends with it, and the alarm expires the approval.
    async fn approval(
        &self,
        room: &str,
        cmd: &str,
        diff: Option<&str>,
        asked_by: Option<&str>,
    ) -> Result<Said, ApiError> {
        let now = clock::now_ms();
        let wait_ms = config::seconds_as_ms(
            &self.env,
            "DUET_APPROVAL_TIMEOUT_SECONDS",
            APPROVAL_TIMEOUT_SECONDS,
        )
        .min(MCP_APPROVAL_WAIT_MS);
        let asked = self
            .approvals
            .ask(cmd, diff, asked_by, now, now + wait_ms)?;
        // Waiting from here: a decision while the approval is published is
        // heard too.
        let mut decision = self.approvals.wait(asked.id);
        self.schedule(now).await?;
        self.publish(room, &[Event::Approval { approval: &asked }])
            .await;
        // `None`: the room's approvals were forgotten meanwhile.
        let decided = loop {
            // A timer may end a little before the clock reads its end.
            let left = asked.expires_at.saturating_sub(clock::now_ms());
            if left > 0 {
                match timeout::within(left, &mut decision).await {
                    Some(Heard::Decided) => break self.approvals.get(asked.id)?,
                    Some(Heard::Forgotten) => break None,
                    None => continue,
                }
            }
            // The alarm expires it too; the first decision stands.
            match self
                .approvals
                .decide(asked.id, Decision::Expired, None, clock::now_ms())
            {
                Ok(approval) => {
                    self.publish(
                        room,
                        &[Event::Decided {
                            approval: &approval,
                        }],
                    )
                    .await;
                    break Some(approval);
                }
                Err(ApiError::AlreadyDecided(_)) => break self.approvals.get(asked.id)?,
                Err(ApiError::NoSuchApproval) => break None,
                Err(e) => return Err(e),
            }
        };
        let decided = decided.ok_or(ApiError::CleanedUp)?;
        Ok(Said::of_approval(&decided, Hearer::Mcp))
    }
}

/// A validation failure as one line a model can read.
fn invalid(e: &ApiError) -> String {
    match e {
        ApiError::Invalid(fields) => fields
            .iter()
            .map(|(field, whys)| format!("`{field}` {}", whys.join("; ")))
            .collect::<Vec<_>>()
            .join("; "),
        e => e.to_string(),
    }
}
