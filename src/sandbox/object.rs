//! The Sandbox Durable Object. The shell and the files live in sandboxd; the
//! object validates commands, finds sandboxd (its container, or
//! `SANDBOX_URL` where there is none), bounds every call, and keeps the
//! room's lifetime (see `room::clock`) with one alarm:
//!
//! - after `SANDBOX_IDLE_SECONDS` without a command the sandbox sleeps: its
//!   workspace is saved as an archive in the object's storage (`saved`) and
//!   the sandbox stopped; the next command restores the files into a fresh
//!   sandbox first (the shell's directory, variables and processes are not
//!   kept);
//! - a workspace that sandboxd says it could not restore (too many entries,
//!   too large unpacked, ...) is not put to sleep: the sandbox stays up, and
//!   the alarm asks again after another idle time;
//! - a sleeping room wakes with its files: the restore runs on its own, not
//!   as part of the command that began it, for as long as what the archive
//!   holds needs (`duet_wire::restore_ms` of its entries and bytes, which
//!   sandboxd measured when it packed it, and which its sleep was refused
//!   past). Commands wait for it, each until its own deadline, then answer a
//!   retryable 503 naming the wake; a restore given up for time leaves the
//!   room asleep with its archive, for the next command to try again. Only
//!   an archive that sandboxd refuses outright (it cannot come back, now or
//!   later) leaves an empty workspace: the command says so in its stderr and
//!   the log, and the archive is kept aside for the room to fetch (`GET
//!   …/sandbox/archive`). What sleep could not keep (sockets, devices) is
//!   named on the first command's stderr after the wake;
//! - after `ROOM_TTL_SECONDS` without a command the room expires: sandbox
//!   and archive are deleted;
//! - a room with a running job does not sleep: the alarm comes every
//!   `jobs::CHECK_MS` while one runs, and follows again the jobs whose
//!   followers were lost (`follow`); a job's end counts as a use, from
//!   which the idle time runs again.
//!
//! A sleep and a command never overlap: a command that arrives while the
//! workspace is being saved waits for it, and a sleep that sees a command
//! arrived while it saved keeps the sandbox running. One restore serves a
//! wake however many commands arrive: the first begins it, all wait for it,
//! each within its own deadline.
//!
//! Room tokens are checked against the room's generation here, where the
//! commands and the live feed are (`access::generation`): the DuetAgent tells the
//! object each new one, and the sockets of the old ones' tokens close.
//!
//! Cleanup is final: a command that arrived before a cleanup but had not
//! reached sandboxd when it began (waiting for its body, the container or a
//! wake) is not sent (409); one already in sandboxd is ended by the destroy
//! (sandboxd cancels it, or the container goes).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use duet_wire::file::FileChanged;
use duet_wire::job::{JobRequest, JobState};
use duet_wire::{ExecRequest, Route};
use serde_json::value::RawValue;
use worker::js_sys::ArrayBuffer;
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::spawn_local;
use worker::worker_sys::DurableObjectState;
use worker::{web_sys, Delay, Env, Method, Response, State, WebSocket};

use super::deadline::{command_limit, exec_deadline, restore_limit};
use super::files;
use super::follow::Follower;
use super::sandboxd::{ContainerState, Restore, Sandboxd, Saving};
use super::saved::{Archive, Saved};
use super::terminal::{Shared as TerminalShared, Terminal, Typed};
use crate::access::generation::Generation;
use crate::access::request;
use crate::access::roles::{self, Mode};
use crate::access::token::Claims;
use crate::api::limits::{JOB_MAX_SECONDS, SANDBOX_ARCHIVE_MAX_BYTES};
use crate::api::role::RoomRole;
use crate::api::route::{self, job_id, Action};
use crate::api::shapes::{
    exec_end, exec_result, sandbox_name, AuditEntry, AuditOutcome, ExecResponse,
};
use crate::api::shapes::{Source, START_JOB};
use crate::api::{validate, ApiError};
use crate::approvals::audit::Consent;
use crate::approvals::audit::{self, Audit};
use crate::feed::event::{self, CloseReason, Event, Written};
use crate::feed::fanout::{Feed, Joining};
use crate::files::tools::FileTool;
use crate::files::{changed_of, Change};
use crate::jobs::{self, Job, Jobs};
use crate::room::calls::AgentObject;
use crate::room::calls::{self, Served, ToSandbox};
use crate::room::clock::{Due, RoomClock, Timing};
use crate::runtime::log::{self, ObjectFailure};
use crate::runtime::{body, clock, config, random, respond};
use crate::terminal;

/// How long saving a workspace may take.
const SAVE_MS: u64 = 60_000;
/// How often a command checks whether a sleep or wake in progress is over.
const POLL_MS: u64 = 20;
/// When to try a failed sleep again.
const RETRY_MS: u64 = 60_000;
/// How long a stop waits for the job's follower to tell its end.
const STOP_WAIT_MS: u64 = 2_000;

#[wasm_bindgen]
pub struct Sandbox {
    state: State,
    /// The runtime's handle of `state`, for the restore that outlives the
    /// command which began it.
    raw: DurableObjectState,
    env: Env,
    saved: Rc<Saved>,
    container: Rc<ContainerState>,
    timing: Timing,
    clock: RoomClock,
    /// A sleep is saving the workspace or stopping the sandbox.
    sleeping: Cell<bool>,
    wake: Rc<Wake>,
    feed: Rc<Feed>,
    jobs: Rc<Jobs>,
    generation: Generation,
    audit: Rc<Audit>,
    terminal: Rc<TerminalShared>,
}

/// A sleeping room's wake, shared between the restore, which runs on its
/// own, and the commands waiting for it.
#[derive(Default)]
struct Wake {
    /// A restore runs.
    running: Cell<bool>,
    /// What the first command after the wake tells in its stderr.
    note: RefCell<Option<String>>,
    /// Why the last restore left the room asleep, for the commands that
    /// waited for it.
    failed: RefCell<Option<String>>,
}

/// What came of an idle alarm's sleep.
#[derive(Debug, PartialEq, Eq)]
enum Slept {
    Asleep,
    /// A command or a cleanup came while the workspace was saved.
    Interrupted,
    /// The workspace could not be restored, so the sandbox stays up.
    Refused,
}

/// The runtime's entry points (by hand: see the crate docs).
#[wasm_bindgen(wasm_bindgen_futures = worker::wasm_bindgen_futures, js_sys = worker::js_sys)]
impl Sandbox {
    #[wasm_bindgen(constructor)]
    pub fn new(raw: DurableObjectState, env: Env) -> Self {
        let state = State::from(raw.clone().unchecked_into::<DurableObjectState>());
        let saved = Saved::open(state.storage().sql()).expect("the sandbox tables can be created");
        let generation =
            Generation::open(state.storage().sql()).expect("the access table can be created");
        let audit = Audit::open(state.storage().sql()).expect("the audit table can be created");
        let feed =
            Feed::open(&state, state.storage().sql(), &env).expect("the feed log can be created");
        let jobs = Jobs::open(state.storage().sql()).expect("the jobs table can be created");
        Self {
            jobs: Rc::new(jobs),
            generation,
            audit: Rc::new(audit),
            terminal: Rc::default(),
            state,
            raw,
            saved: Rc::new(saved),
            container: Rc::default(),
            timing: Timing::of(&env),
            clock: RoomClock::default(),
            sleeping: Cell::new(false),
            wake: Rc::default(),
            feed: Rc::new(feed),
            env,
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> web_sys::Response {
        let url = req.url();
        let outcome = self.handle(req, &url).await;
        respond::from_object("Sandbox", route::path_of(&url), outcome).into()
    }

    /// A message on the feed or the terminal: only text means anything,
    /// but binary frames are bounded too.
    #[wasm_bindgen(js_name = webSocketMessage)]
    pub async fn websocket_message(&self, ws: web_sys::WebSocket, message: JsValue) {
        let text = message.as_string();
        let bytes = match &text {
            Some(text) => text.len(),
            None => message
                .dyn_ref::<ArrayBuffer>()
                .map_or(0, |buffer| buffer.byte_length() as usize),
        };
        let ws = WebSocket::from(ws);
        if !Terminal::owns(&self.state, &ws) {
            return self.feed.received(&self.state, &ws, bytes, text.as_deref());
        }
        // Typing into the terminal, or sizing it, is a use of the room.
        if let Some(room) = self.terminal().received(&ws, bytes, text.as_deref()) {
            let _ = self.touch(&room, clock::now_ms()).await;
        }
    }

    #[wasm_bindgen(js_name = webSocketClose)]
    pub async fn websocket_close(
        &self,
        ws: web_sys::WebSocket,
        code: usize,
        _reason: String,
        _was_clean: bool,
    ) {
        let ws = WebSocket::from(ws);
        // Completes the closing handshake, whichever side began it.
        let code = u16::try_from(code)
            .ok()
            .filter(|c| (1000..5000).contains(c) && *c != 1005 && *c != 1006);
        let _ = ws.close(code.or(Some(1000)), Some("bye"));
        self.left(&ws).await;
    }

    #[wasm_bindgen(js_name = webSocketError)]
    pub async fn websocket_error(&self, ws: web_sys::WebSocket, _error: JsValue) {
        self.left(&ws.into()).await;
    }

    pub async fn alarm(&self) -> Result<(), JsValue> {
        if let Err(e) = self.on_alarm().await {
            log::emit(&ObjectFailure {
                object: "Sandbox",
                path: "alarm",
                status: e.status(),
                error: e.to_string(),
            });
            self.state
                .storage()
                .set_alarm(Duration::from_millis(RETRY_MS))
                .await?;
        }
        Ok(())
    }
}

impl Sandbox {
    /// A watcher went away; the last one tells the DuetAgent. The last of
    /// the terminal's takes its follower with it.
    async fn left(&self, ws: &WebSocket) {
        if Terminal::owns(&self.state, ws) {
            return self.terminal().left(&self.state);
        }
        let room = self.feed.closed(&self.state, ws);
        if let (0, Some(room)) = (self.feed.watchers(&self.state), room) {
            if let Ok(agent) = AgentObject::of(&self.env, &room) {
                agent.set_watching(false).await;
            }
        }
    }

    /// What each request asks, and the function that answers it.
    async fn handle(&self, req: web_sys::Request, url: &str) -> Result<Response, ApiError> {
        let arrived = clock::now_ms();
        let epoch = self.clock.epoch();
        let asked = calls::request(&req.method(), route::path_of(url))?;
        let claims = request::claims(&req, &self.env)?;
        if asked.public {
            self.generation.admit(claims.as_ref())?;
        }
        let Served::Sandbox(what) = asked.served else {
            return Err(ApiError::NotFound);
        };
        let (room, claims) = (&asked.room, claims.as_ref());
        match what {
            ToSandbox::Exec(source) => self.run(req, room, source, claims, arrived, epoch).await,
            ToSandbox::StartJob(source) => {
                self.start_job(req, room, source, claims, arrived, epoch)
                    .await
            }
            ToSandbox::Jobs => Ok(respond::json_text(200, self.jobs.list()?)?),
            ToSandbox::Job(job) => self.job(job),
            ToSandbox::StopJob(job) => self.stop_job(room, job).await,
            ToSandbox::ReadFile => self.file(req, url, room, None, arrived, epoch).await,
            ToSandbox::WriteFile(source) | ToSandbox::DeleteFile(source) => {
                let by = (source, roles::named(claims, None));
                self.file(req, url, room, Some(by), arrived, epoch).await
            }
            ToSandbox::FileTool(source) => self.file_tool(req, room, source, arrived, epoch).await,
            ToSandbox::KeptArchive => self.kept_archive(room),
            ToSandbox::Audit => self.audit_entries(),
            ToSandbox::RecordRefused => self.record_refused(req).await,
            ToSandbox::Live => self.join(&req, url, room, claims).await,
            ToSandbox::Terminal => self.join_terminal(&req, room, claims, arrived).await,
            ToSandbox::TerminalScreen => self.terminal_screen(room, arrived).await,
            ToSandbox::TerminalWrite(source) => {
                self.write_terminal(req, room, source, arrived).await
            }
            ToSandbox::Publish => self.publish(req).await,
            ToSandbox::HistoryExpired => self.history_expired(),
            ToSandbox::Generation => self.set_generation(req).await,
            ToSandbox::Destroy => self.destroy(room).await,
        }
    }

    /// A command of `source`, refused (and audited) if its token's role
    /// may not run one, else run, shown on the feed and audited.
    async fn run(
        &self,
        req: web_sys::Request,
        room: &str,
        source: Source,
        claims: Option<&Claims>,
        arrived: u64,
        epoch: u64,
    ) -> Result<Response, ApiError> {
        let name = sandbox_name(room);
        let body = body::read(req).await?;
        if let Some(claims) = claims.filter(|_| source == Source::Exec) {
            if let Err(refused) = roles::allow(claims.role, Action::Exec) {
                let cmd = validate::exec_request(&body).map(|e| e.request.cmd);
                let asked_by = roles::named(Some(claims), None);
                let entry = audit::entry(
                    clock::now_ms(),
                    &cmd.unwrap_or_default(),
                    source,
                    asked_by,
                    AuditOutcome::Refused,
                    Consent::default(),
                );
                self.audit.record(&entry)?;
                return Err(refused);
            }
        }
        let exec = validate::exec_request(&body)?;
        let request = exec.request;
        let consent = consent(source, exec.decided_by, exec.rule);
        let asked_by = roles::named(claims, exec.user_id);
        let command = request.cmd.clone();
        self.touch(room, arrived).await?;
        // Output streams to the watchers there are; without any, the
        // log is given it whole at the end.
        let watched = self.feed.watchers(&self.state) > 0;
        let feed_id =
            self.feed
                .command_started(&self.state, &request.cmd, source, asked_by.as_deref())?;
        let result = self
            .exec(
                room,
                &name,
                request,
                arrived,
                epoch,
                watched.then_some(&*feed_id),
            )
            .await;
        // Read once, for the feed and the audit: without the output
        // when it went out as it came.
        let read: Option<serde_json::Value> = match &result {
            Ok(raw) => serde_json::from_str(raw.get()).ok(),
            Err(_) => None,
        };
        let whole = read.as_ref().filter(|_| !watched).map(exec_result);
        let ended = read.as_ref().map(exec_end);
        let outcome = result.as_ref().map(|_| ended.unwrap_or_default());
        self.feed
            .command_ended(&self.state, &feed_id, outcome, whole.as_ref())?;
        let outcome = match result {
            Ok(_) => AuditOutcome::Ran,
            Err(_) => AuditOutcome::Failed,
        };
        self.audit.record(&AuditEntry {
            exit_code: ended.map(|ended| ended.exit_code),
            duration_ms: Some(clock::now_ms().saturating_sub(arrived)),
            timed_out: ended.is_some_and(|ended| ended.timed_out),
            ..audit::entry(arrived, &command, source, asked_by, outcome, consent)
        })?;
        let result = result?;
        Ok(match source {
            Source::Exec => respond::json(
                200,
                &ExecResponse {
                    result,
                    sandbox_name: name,
                },
            )?,
            // The DuetAgent is given the result alone, as sandboxd wrote it:
            // not wrapped, so not written again here.
            Source::Agent | Source::Mcp => {
                respond::json_text(200, Box::<str>::from(result).into_string())?
            }
        })
    }

    /// `GET …/audit`: `{"entries": [...]}`, as stored.
    fn audit_entries(&self) -> Result<Response, ApiError> {
        let entries = RawValue::from_string(self.audit.to_json()?)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(respond::json(200, &entries)?)
    }

    /// A command the DuetAgent refused, as its audit entry.
    async fn record_refused(&self, req: web_sys::Request) -> Result<Response, ApiError> {
        self.audit.record_json(text_of(req).await?)?;
        Ok(Response::empty()?)
    }

    /// Events from the DuetAgent, a line each, for the feed.
    async fn publish(&self, req: web_sys::Request) -> Result<Response, ApiError> {
        for line in text_of(req).await?.lines() {
            let event = Written::read(line)
                .ok_or_else(|| ApiError::Internal(format!("not an event: {line:.40}")))?;
            self.feed.publish(&self.state, &event)?;
        }
        Ok(Response::empty()?)
    }

    /// The room's history expired: the feed closes, and its tokens end.
    fn history_expired(&self) -> Result<Response, ApiError> {
        self.feed.close(&self.state, CloseReason::Expired)?;
        Terminal::close(&self.state, CloseReason::Expired, None);
        self.generation.set(None)?;
        Ok(Response::empty()?)
    }

    /// The room's token generation, new or none: the sockets of the
    /// others' tokens close.
    async fn set_generation(&self, req: web_sys::Request) -> Result<Response, ApiError> {
        let generation = text_of(req).await?;
        let generation = Some(generation.as_str()).filter(|g| !g.is_empty());
        self.generation.set(generation)?;
        self.feed.revoke(&self.state, generation);
        Terminal::close(&self.state, CloseReason::Revoked, Some(generation));
        Ok(Response::empty()?)
    }

    /// The room is cleaned up: its feed, shell, files and audit go.
    async fn destroy(&self, room: &str) -> Result<Response, ApiError> {
        self.feed.close(&self.state, CloseReason::Deleted)?;
        Terminal::close(&self.state, CloseReason::Deleted, None);
        self.generation.set(None)?;
        self.clock.forget();
        // The sandbox's jobs are stopped with it (sandboxd's, or the container).
        self.jobs.forget()?;
        self.sandboxd()?.destroy(&sandbox_name(room)).await?;
        self.saved.forget()?;
        self.audit.forget()?;
        self.state.storage().delete_alarm().await?;
        Ok(respond::json(
            200,
            &serde_json::json!({ "destroyed": true }),
        )?)
    }

    /// Accepts a watcher of the room's live feed with what its token grants:
    /// the socket, then what it missed since the `since` it gave, or a
    /// snapshot (the stored history, asked of the DuetAgent, and the log's
    /// recent past), then every event as it happens.
    ///
    /// A resume reads only the log, with nothing awaited before the socket
    /// is accepted, so no event falls between. A snapshot waits for the
    /// history: the events published meanwhile follow the `hello`, but for
    /// the messages the history already holds.
    ///
    /// The upgrade is checked here, after the token's generation: the page
    /// asks the feed's URL without one to learn why a socket was refused
    /// (see `web/page/duet.js`), and a revoked token must answer 401 there too.
    async fn join(
        &self,
        req: &web_sys::Request,
        url: &str,
        room: &str,
        claims: Option<&Claims>,
    ) -> Result<Response, ApiError> {
        let headers = req.headers();
        let (upgrade, protocols) = (
            headers.get("upgrade")?,
            headers.get("sec-websocket-protocol")?,
        );
        event::check_upgrade(upgrade.as_deref(), protocols.as_deref())?;
        let since = event::since_of(url)?;
        let agent = AgentObject::of(&self.env, room)?;
        // Only an owner in token mode has anyone to invite.
        let owner = claims.is_none_or(|claims| claims.role == RoomRole::Owner);
        let invites = owner && request::mode(&self.env)? == Mode::Token;
        let missed = match since {
            Some(since) => self.feed.missed(since)?,
            None => None,
        };
        let history;
        let joining = match (since, missed) {
            (Some(since), Some(missed)) => Joining::Resumed { since, missed },
            (gap, _) => {
                let upto = self.feed.last()?;
                history = agent.history().await?;
                Joining::Fresh {
                    history: &history,
                    upto,
                    gap,
                }
            }
        };
        let first = self.feed.watchers(&self.state) == 0;
        let client = self
            .feed
            .accept(&self.state, room, joining, claims, invites)?;
        if first {
            agent.set_watching(true).await;
        }
        let mut response = Response::from_websocket(client)?;
        response
            .headers_mut()
            .set("sec-websocket-protocol", event::PROTOCOL)?;
        Ok(response)
    }

    /// Accepts a socket on the shared terminal (`sandbox::terminal`), the
    /// sandbox started or woken first; any role watches, writers type.
    async fn join_terminal(
        &self,
        req: &web_sys::Request,
        room: &str,
        claims: Option<&Claims>,
        arrived: u64,
    ) -> Result<Response, ApiError> {
        let headers = req.headers();
        let (upgrade, protocols) = (
            headers.get("upgrade")?,
            headers.get("sec-websocket-protocol")?,
        );
        event::check_upgrade_to(terminal::PROTOCOL, upgrade.as_deref(), protocols.as_deref())?;
        self.touch(room, arrived).await?;
        let sandboxd = self.sandboxd()?;
        self.ready(&sandboxd, room, &sandbox_name(room), arrived, 0)
            .await?;
        let client = self.terminal().join(room, claims).await?;
        let mut response = Response::from_websocket(client)?;
        response
            .headers_mut()
            .set("sec-websocket-protocol", terminal::PROTOCOL)?;
        Ok(response)
    }

    /// The shared terminal's screen as text, for `read_terminal`.
    async fn terminal_screen(&self, room: &str, arrived: u64) -> Result<Response, ApiError> {
        let sandboxd = self.sandboxd()?;
        let name = sandbox_name(room);
        self.ready(&sandboxd, room, &name, arrived, 0).await?;
        let screen = sandboxd.terminal_screen(&name).await?;
        let shown = serde_json::json!({
            "cols": screen["cols"],
            "rows": screen["rows"],
            "text": screen["text"],
        });
        Ok(respond::json(200, &shown)?)
    }

    /// Keys an MCP client types into the shared terminal (`write_terminal`,
    /// which the DuetAgent put to the room's policy), on record as a
    /// writer's typing is.
    async fn write_terminal(
        &self,
        req: web_sys::Request,
        room: &str,
        source: Source,
        arrived: u64,
    ) -> Result<Response, ApiError> {
        let asked: serde_json::Value = serde_json::from_slice(&body::read(req).await?)
            .map_err(|e| ApiError::BadJson(e.to_string()))?;
        let text = |key: &str| asked[key].as_str().map(str::to_owned);
        let keys = text("data").unwrap_or_default();
        self.touch(room, arrived).await?;
        let sandboxd = self.sandboxd()?;
        let name = sandbox_name(room);
        self.ready(&sandboxd, room, &name, arrived, 0).await?;
        let echo = sandboxd.terminal_input(&name, &keys).await?;
        let typed = Typed {
            room: room.to_owned(),
            name: text("userId"),
            role: RoomRole::Writer,
            source,
            consent: consent(source, text("decidedBy"), text("rule")),
        };
        self.terminal()
            .on_record(&self.state, &keys, echo, &typed)?;
        let typed = serde_json::json!({ "bytes": keys.len(), "echo": echo });
        Ok(respond::json(200, &typed)?)
    }

    /// Runs a command, waking or starting the sandbox first, and answers by
    /// the exec's deadline (see `deadline`). With watchers (`feed_id` is the
    /// command's id in the feed) its output streams to them as it comes.
    async fn exec(
        &self,
        room: &str,
        name: &str,
        request: ExecRequest,
        arrived: u64,
        epoch: u64,
        feed_id: Option<&str>,
    ) -> Result<Box<serde_json::value::RawValue>, ApiError> {
        let sandboxd = self.sandboxd()?;
        let (deadline, cold) = self
            .ready(&sandboxd, room, name, arrived, request.timeout_ms)
            .await?;
        let late = || ApiError::SandboxTimeout(deadline - arrived);
        let note = self.wake.note.take();
        // A warm command keeps its own limit; a cold one gets what the start left.
        let timeout_ms = match cold {
            false => request.timeout_ms,
            true => {
                command_limit(request.timeout_ms, deadline, clock::now_ms()).ok_or_else(late)?
            }
        };
        // Nothing awaits between this check and the command being sent.
        self.clock.still_current(epoch)?;
        let request = ExecRequest {
            timeout_ms,
            ..request
        };
        let result = match feed_id {
            None => sandboxd.exec(name, &request).await,
            Some(id) => {
                // A piece the log could not keep still reaches the result.
                let output = |stream: &str, data: &str| {
                    let _ = self.feed.command_output(&self.state, id, stream, data);
                };
                let streaming = sandboxd.exec_streaming(name, &request, output);
                self.feed.beating(&self.state, streaming).await
            }
        };
        let result = result.map_err(|e| match e {
            ApiError::SandboxTimeout(_) => late(),
            e => e,
        })?;
        match note {
            None => Ok(result),
            Some(note) => with_note(&result, &note),
        }
    }

    /// Readies the sandbox for what arrived at `arrived` with a time limit
    /// of `timeout_ms`: waits out a sleep, starts the container, wakes a
    /// sleeping room. Answers by when it must be answered (see `deadline`),
    /// and whether the sandbox was cold.
    async fn ready(
        &self,
        sandboxd: &Sandboxd<'_>,
        room: &str,
        name: &str,
        arrived: u64,
        timeout_ms: u64,
    ) -> Result<(u64, bool), ApiError> {
        let asleep = self.asleep()? || self.sleeping.get() || self.wake.running.get();
        let cold = asleep || sandboxd.is_cold();
        let deadline = exec_deadline(arrived, timeout_ms, cold);
        self.wait_while(&self.sleeping, deadline)
            .await
            .ok_or(ApiError::SandboxTimeout(deadline - arrived))?;
        sandboxd.start(deadline).await?;
        if self.asleep()? {
            if !self.wake.running.get() {
                self.begin_wake(room, name);
            }
            let wait_ms = config::number(&self.env, "SANDBOX_WAKE_WAIT_MS", u64::MAX, u64::MAX);
            let until = deadline.min(arrived.saturating_add(wait_ms));
            let waited = self.wait_while(&self.wake.running, until).await;
            if waited.is_none() || self.asleep()? {
                let why = self.wake.failed.borrow().clone();
                return Err(ApiError::Waking(
                    why.unwrap_or_else(|| "still restoring".into()),
                ));
            }
        }
        Ok((deadline, cold))
    }

    /// Starts a job of `source` (`POST …/jobs`, the agent's or an MCP
    /// client's `start_job`) and follows it; answers it at once, as started.
    async fn start_job(
        &self,
        req: web_sys::Request,
        room: &str,
        source: Source,
        claims: Option<&Claims>,
        arrived: u64,
        epoch: u64,
    ) -> Result<Response, ApiError> {
        let asked = validate::job_request(&body::read(req).await?)?;
        jobs::admit(self.jobs.running()?.len())?;
        let started_by = roles::named(claims, asked.user_id);
        self.touch(room, arrived).await?;
        let name = sandbox_name(room);
        let sandboxd = self.sandboxd()?;
        self.ready(&sandboxd, room, &name, arrived, 0).await?;
        // Nothing awaits between this check and the job being sent.
        self.clock.still_current(epoch)?;
        let max_ms = config::seconds_as_ms(&self.env, "JOB_MAX_SECONDS", JOB_MAX_SECONDS);
        let request = JobRequest {
            id: random::id('j'),
            cmd: asked.cmd,
            max_ms,
        };
        let jobs = Route::Jobs(&name);
        let info = sandboxd.job(Method::Post, jobs, Some(&request)).await?;
        let job = Job {
            id: &request.id,
            cmd: &request.cmd,
            name: asked.name.as_deref(),
            state: JobState::Running,
            exit_code: None,
            started_at: info["startedAt"].as_str().unwrap_or_default(),
            ended_at: None,
            started_by: started_by.as_deref(),
            source,
        };
        let now = clock::now_ms();
        let job = self.jobs.add(&job, jobs::lost_at(now, max_ms))?;
        let job = RawValue::from_string(job).map_err(|e| ApiError::Internal(e.to_string()))?;
        self.feed
            .publish(&self.state, &Event::Job { job: &job }.written())?;
        let consent = consent(source, asked.decided_by, asked.rule);
        let entry = audit::entry(
            arrived,
            &request.cmd,
            source,
            started_by,
            AuditOutcome::Ran,
            consent,
        );
        let tool = entry.tool.map(|_| START_JOB);
        self.audit.record(&AuditEntry { tool, ..entry })?;
        self.follower().attach(room, &request.id);
        // The alarm that keeps the room awake while it runs, unless one is due sooner.
        let at = (now + jobs::CHECK_MS).min(self.timing.next_alarm(arrived, false));
        self.clock.alarm_at(&self.state.storage(), at).await?;
        Ok(respond::json_text(
            201,
            format!("{{\"job\":{}}}", job.get()),
        )?)
    }

    /// `…/files` (`files`): relayed to sandboxd as it came, once the
    /// sandbox is ready, and its answer given back as it is, a file's bytes
    /// streaming through. A change that was made (`by` a source, and
    /// someone if named) is shown on the feed and audited.
    async fn file(
        &self,
        req: web_sys::Request,
        url: &str,
        room: &str,
        by: Option<(Source, Option<String>)>,
        arrived: u64,
        epoch: u64,
    ) -> Result<Response, ApiError> {
        self.touch(room, arrived).await?;
        let name = sandbox_name(room);
        let sandboxd = self.sandboxd()?;
        self.ready(&sandboxd, room, &name, arrived, 0).await?;
        // Nothing awaits between this check and the request being sent.
        self.clock.still_current(epoch)?;
        let query = url.split_once('?').map_or("", |(_, query)| query);
        let (method, range) = (Method::from(req.method()), req.headers().get("range")?);
        let body = req.body().map(JsValue::from);
        let mut answer = sandboxd
            .files(method, &name, query, range.as_deref(), body)
            .await?;
        let Some((source, by)) = by.filter(|_| answer.status_code() == 200) else {
            return Ok(answer);
        };
        let text = answer.text().await?;
        let changed = serde_json::from_str(&text)
            .ok()
            .as_ref()
            .and_then(changed_of);
        let changed = changed.ok_or_else(|| {
            ApiError::SandboxFailed(format!("unexpected answer from sandboxd: {text:.80}"))
        })?;
        let tool = Change::of(&changed).tool();
        self.file_changed(&changed, tool, source, by, Consent::default(), arrived)?;
        // As sandboxd wrote it.
        Ok(respond::json_text(200, text)?)
    }

    /// A file tool's call of the agent's or an MCP client's
    /// (`files::tools`), carried out without the shell (`sandbox::files`):
    /// answers `{"path", "text"}`, or `{"error"}` when the file refused it.
    /// A change it made is shown and audited as the routes' are.
    async fn file_tool(
        &self,
        req: web_sys::Request,
        room: &str,
        source: Source,
        arrived: u64,
        epoch: u64,
    ) -> Result<Response, ApiError> {
        let asked: serde_json::Value = serde_json::from_slice(&body::read(req).await?)
            .map_err(|e| ApiError::BadJson(e.to_string()))?;
        let name = asked["tool"].as_str().unwrap_or_default();
        let (tool, path) = FileTool::asked(name, &asked)
            .ok_or(ApiError::NotFound)?
            .map_err(ApiError::Internal)?;
        let text = |key: &str| asked[key].as_str().map(str::to_owned);
        self.touch(room, arrived).await?;
        let sandboxd = self.sandboxd()?;
        let sandbox = sandbox_name(room);
        self.ready(&sandboxd, room, &sandbox, arrived, 0).await?;
        // Nothing awaits between this check and the first request sent.
        self.clock.still_current(epoch)?;
        let preview = asked["preview"] == true;
        let (by, consent) = (
            text("userId"),
            consent(source, text("decidedBy"), text("rule")),
        );
        let answer = match files::carry_out(&sandboxd, &sandbox, &tool, &path, preview).await {
            Ok(done) => {
                if let Some(changed) = &done.changed {
                    self.file_changed(changed, tool.name(), source, by, consent, arrived)?;
                }
                serde_json::json!({ "path": path, "text": done.text })
            }
            Err(why) => {
                // A change let through that could not be made is recorded too.
                if tool.changes() && !preview {
                    let outcome = AuditOutcome::Failed;
                    let entry = audit::entry(arrived, &path, source, by, outcome, consent);
                    let tool = Some(tool.name());
                    self.audit.record(&AuditEntry { tool, ..entry })?;
                }
                serde_json::json!({ "error": why })
            }
        };
        Ok(respond::json(200, &answer)?)
    }

    /// A file changed by `tool`, from `source`, `by` someone if named: a
    /// `file` event on the feed, and an entry in the audit.
    fn file_changed(
        &self,
        changed: &FileChanged,
        tool: &'static str,
        source: Source,
        by: Option<String>,
        consent: Consent,
        arrived: u64,
    ) -> Result<(), ApiError> {
        let event = Event::File {
            change: Change::of(changed),
            path: &changed.path,
            size: changed.size,
            changed_by: by.as_deref(),
            source,
        };
        self.feed.publish(&self.state, &event.written())?;
        let outcome = AuditOutcome::Ran;
        let entry = audit::entry(arrived, &changed.path, source, by, outcome, consent);
        let tool = Some(tool);
        Ok(self.audit.record(&AuditEntry { tool, ..entry })?)
    }

    /// `GET …/jobs/{jobId}`: the job, with the newest of its output.
    fn job(&self, job: u64) -> Result<Response, ApiError> {
        let job = self.jobs.get(&job_id(job))?.ok_or(ApiError::NoSuchJob)?;
        Ok(respond::json_text(200, format!("{{\"job\":{job}}}"))?)
    }

    /// Stops a running job and answers it once it ended (as `GET` does);
    /// an ended one is answered as it is.
    async fn stop_job(&self, room: &str, job: u64) -> Result<Response, ApiError> {
        let id = job_id(job);
        if self.jobs.resume(&id)?.is_some() {
            let name = sandbox_name(room);
            let stop = Route::Job(&name, &id);
            let info = match self.sandboxd()?.job(Method::Delete, stop, None).await {
                Ok(info) => info,
                Err(ApiError::NoSuchJob) => serde_json::Value::Null,
                Err(e) => return Err(e),
            };
            // Its follower here ends it after the last of its output.
            let until = clock::now_ms() + STOP_WAIT_MS;
            while self.jobs.followed(&id) && clock::now_ms() < until {
                Delay::from(Duration::from_millis(POLL_MS)).await;
            }
            self.follower().end(&self.state, room, &id, &info)?;
        }
        self.job(job)
    }

    /// Follows again each running job this instance does not follow, and
    /// ends as lost those past their longest life; answers whether any
    /// still runs.
    fn follow_jobs(&self, room: &str, now: u64) -> Result<bool, ApiError> {
        let mut running = false;
        for (id, lost_at) in self.jobs.running()? {
            match now < lost_at {
                true => self.follower().attach(room, &id),
                false => {
                    let lost = serde_json::Value::Null;
                    self.follower().end(&self.state, room, &id, &lost)?
                }
            }
            running |= now < lost_at;
        }
        Ok(running)
    }

    /// What a job's follower needs, its own handles on it.
    fn terminal(&self) -> Terminal {
        Terminal {
            raw: self.raw.clone().unchecked_into(),
            env: self.env.clone(),
            container: Rc::clone(&self.container),
            feed: Rc::clone(&self.feed),
            audit: Rc::clone(&self.audit),
            idle_ms: self.timing.idle_ms,
            shared: Rc::clone(&self.terminal),
        }
    }

    fn follower(&self) -> Follower {
        Follower {
            raw: self.raw.clone().unchecked_into(),
            env: self.env.clone(),
            container: Rc::clone(&self.container),
            saved: Rc::clone(&self.saved),
            feed: Rc::clone(&self.feed),
            jobs: Rc::clone(&self.jobs),
            idle_ms: self.timing.idle_ms,
        }
    }

    fn asleep(&self) -> Result<bool, ApiError> {
        Ok(self.saved.state()?.is_some_and(|s| s.asleep))
    }

    /// Waits while `busy` is set (a sleep or a wake in progress); `None`
    /// once `deadline` came first.
    async fn wait_while(&self, busy: &Cell<bool>, deadline: u64) -> Option<()> {
        while busy.get() {
            if clock::now_ms() >= deadline {
                return None;
            }
            Delay::from(Duration::from_millis(POLL_MS)).await;
        }
        Some(())
    }

    /// Begins restoring a sleeping room's files into its started sandbox,
    /// on its own: the restore goes on when the commands waiting for it
    /// answer first, so a workspace slow to come back still comes back.
    fn begin_wake(&self, room: &str, name: &str) {
        self.wake.running.set(true);
        self.wake.failed.take();
        let raw = self.raw.clone().unchecked_into::<DurableObjectState>();
        let (env, container) = (self.env.clone(), Rc::clone(&self.container));
        let (saved, wake) = (Rc::clone(&self.saved), Rc::clone(&self.wake));
        let idle_ms = self.timing.idle_ms;
        let (room, name) = (room.to_owned(), name.to_owned());
        spawn_local(async move {
            let state = State::from(raw);
            let woke = match Sandboxd::locate(&state, &env, &container, idle_ms) {
                Ok(sandboxd) => restore_saved(&sandboxd, &saved, &room, &name).await,
                Err(e) => Err(e),
            };
            match woke {
                Ok(note) => *wake.note.borrow_mut() = note,
                Err(ApiError::Waking(why)) => *wake.failed.borrow_mut() = Some(why),
                Err(e) => *wake.failed.borrow_mut() = Some(e.to_string()),
            }
            wake.running.set(false);
        });
    }

    /// The archive of files that could not be restored, as it was saved.
    fn kept_archive(&self, room: &str) -> Result<Response, ApiError> {
        let archive = self
            .saved
            .blob(Archive::Kept)?
            .ok_or(ApiError::NoKeptArchive)?;
        let response = web_sys::Response::new_with_opt_blob(Some(&archive))?;
        let headers = response.headers();
        headers.set("content-type", "application/gzip")?;
        headers.set(
            "content-disposition",
            &format!("attachment; filename=\"{room}-workspace.tar.gz\""),
        )?;
        Ok(response.into())
    }

    /// Records a command of `room` at `now`, and sets the alarm from it
    /// (see `room::clock` for how seldom a busy room pays for either).
    async fn touch(&self, room: &str, now: u64) -> Result<(), ApiError> {
        let due = self.clock.use_due(now, self.timing.idle_ms);
        self.saved.touch(room, now, due)?;
        let asleep = self.asleep()?;
        let at = || Ok(self.timing.next_alarm(now, asleep));
        Ok(self.clock.alarm_once(&self.state.storage(), at).await?)
    }

    async fn on_alarm(&self) -> Result<(), ApiError> {
        self.clock.alarm_spent();
        let Some(room) = self.saved.state()? else {
            return Ok(());
        };
        let timing = self.timing;
        let now = clock::now_ms();
        let due = timing.due(now, room.last_used, room.asleep);
        if due == Due::Expire {
            return self.expire(&room.room, room.asleep).await;
        }
        // A room with a running job stays awake, until it expires.
        let at = match self.follow_jobs(&room.room, now)? {
            true => Some((now + jobs::CHECK_MS).min(room.last_used.saturating_add(timing.ttl_ms))),
            false if due == Due::Sleep => match self.sleep(&room.room, room.last_used).await? {
                Slept::Refused => Some(timing.after_refused_sleep(now, room.last_used)),
                Slept::Asleep | Slept::Interrupted => None,
            },
            false => None,
        };
        let Some(room) = self.saved.state()? else {
            return Ok(());
        };
        let at = at.unwrap_or_else(|| timing.next_alarm(room.last_used, room.asleep));
        Ok(self.clock.alarm_at(&self.state.storage(), at).await?)
    }

    /// Saves the workspace and stops the sandbox, unless a command or a
    /// cleanup came meanwhile, or sandboxd says the workspace could not be
    /// restored (then the sandbox stays up).
    async fn sleep(&self, room: &str, last_used: u64) -> Result<Slept, ApiError> {
        let started = clock::now_ms();
        let epoch = self.clock.epoch();
        let name = sandbox_name(room);
        let sandboxd = self.sandboxd()?;
        self.sleeping.set(true);
        self.saved.clear_archive()?;
        let max = config::number(
            &self.env,
            "SANDBOX_ARCHIVE_MAX_BYTES",
            SANDBOX_ARCHIVE_MAX_BYTES,
            u64::MAX,
        );
        let saving = sandboxd
            .save(&name, max, SAVE_MS, |chunk| self.saved.append_chunk(chunk))
            .await;
        let used_meanwhile = self.saved.state()?.map(|s| s.last_used) != Some(last_used);
        if used_meanwhile || self.clock.still_current(epoch).is_err() || saving.is_err() {
            self.sleeping.set(false);
            self.saved.clear_archive()?;
            return saving.map(|_| Slept::Interrupted);
        }
        let note = match saving {
            Ok(Saving::Saved(packed)) => {
                self.saved.set_packed(&packed)?;
                packed.left_out
            }
            Ok(Saving::TooLarge) => {
                self.saved.clear_archive()?;
                Some(format!(
                    "the workspace's archive is over SANDBOX_ARCHIVE_MAX_BYTES ({max} bytes): its files were not kept"
                ))
            }
            Ok(Saving::Unrestorable(why)) => {
                self.sleeping.set(false);
                self.saved.clear_archive()?;
                let note = format!("not put to sleep, the sandbox stays up: {why}");
                log::lifecycle("stay-awake", "Sandbox", room, started, None, Some(note));
                return Ok(Slept::Refused);
            }
            Ok(Saving::Nothing) | Err(_) => None,
        };
        let stopped = sandboxd.destroy(&name).await;
        self.sleeping.set(false);
        stopped?;
        self.saved.set_asleep(true)?;
        // The terminal went with the sandbox; connecting again wakes it.
        Terminal::asleep(&self.state);
        let bytes = self.saved.archive_bytes(Archive::Saved)?;
        log::lifecycle("sleep", "Sandbox", room, started, Some(bytes), note);
        Ok(Slept::Asleep)
    }

    /// Deletes the sandbox (a sleeping one is already stopped) and
    /// everything saved of the room.
    async fn expire(&self, room: &str, asleep: bool) -> Result<(), ApiError> {
        let started = clock::now_ms();
        self.feed.close(&self.state, CloseReason::Expired)?;
        self.clock.forget();
        self.jobs.forget()?;
        if !asleep {
            self.sandboxd()?.destroy(&sandbox_name(room)).await?;
        }
        self.saved.forget()?;
        self.audit.forget()?;
        log::lifecycle("expire", "Sandbox", room, started, None, None);
        Ok(())
    }

    fn sandboxd(&self) -> Result<Sandboxd<'_>, ApiError> {
        Sandboxd::locate(&self.state, &self.env, &self.container, self.timing.idle_ms)
    }
}

/// Restores a sleeping room's saved files into its fresh sandbox, within
/// the time what they hold needs; answers the note for the next command's
/// stderr. The room wakes when they came back, or when sandboxd refused
/// them outright: then with an empty workspace, the archive kept aside, and
/// a note saying so. A restore given up for time, or a sandboxd that cannot
/// be reached, leaves the room asleep with its archive, for another try.
async fn restore_saved(
    sandboxd: &Sandboxd<'_>,
    saved: &Saved,
    room: &str,
    name: &str,
) -> Result<Option<String>, ApiError> {
    let started = clock::now_ms();
    let bytes = saved.archive_bytes(Archive::Saved)?;
    let packed = saved.packed()?;
    let restore = match saved.blob(Archive::Saved)? {
        None => Restore::Done,
        Some(archive) => {
            let limit = restore_limit(packed.entries, packed.unpacked);
            sandboxd.restore(name, archive, limit).await?
        }
    };
    let note = match restore {
        Restore::Done => {
            saved.clear_archive()?;
            packed
                .left_out
                .map(|left_out| format!("duet: when this room went to sleep, {left_out}"))
        }
        Restore::Refused(why) => {
            saved.keep_archive()?;
            Some(format!(
                "duet: this room's saved files could not be restored ({why}); the workspace \
                 starts empty, and the archive is kept at GET /api/rooms/{room}/sandbox/archive"
            ))
        }
        Restore::TooSlow(why) => {
            log::lifecycle(
                "wake-retry",
                "Sandbox",
                room,
                started,
                Some(bytes),
                Some(why.clone()),
            );
            return Err(ApiError::Waking(why));
        }
    };
    saved.set_asleep(false)?;
    log::lifecycle("wake", "Sandbox", room, started, Some(bytes), note.clone());
    Ok(note)
}

/// A command's result with `note` as the first line of its stderr.
fn with_note(
    result: &serde_json::value::RawValue,
    note: &str,
) -> Result<Box<serde_json::value::RawValue>, ApiError> {
    let internal = |e: serde_json::Error| ApiError::Internal(e.to_string());
    let mut result = exec_result(&serde_json::from_str(result.get()).map_err(internal)?);
    result.stderr.insert_str(0, &format!("{note}\n"));
    serde_json::value::to_raw_value(&result).map_err(internal)
}

/// A call's body as text.
/// Who let a command of `source` run and by what rule: what the DuetAgent
/// said of the agent's and MCP clients' commands; a public route's say
/// nothing.
fn consent(source: Source, decided_by: Option<String>, rule: Option<String>) -> Consent {
    match source {
        Source::Agent | Source::Mcp => Consent { decided_by, rule },
        Source::Exec => Consent::default(),
    }
}

async fn text_of(req: web_sys::Request) -> Result<String, ApiError> {
    String::from_utf8(body::read(req).await?).map_err(|_| ApiError::BadJson("not UTF-8".into()))
}
