//! The shared terminal's sockets, held by the Sandbox object (what the
//! terminal is, and its frames: `crate::terminal`).
//!
//! How output reaches every socket exactly once
//! --------------------------------------------
//! sandboxd numbers everything the terminal printed by byte offset, and a
//! screen it answers is taken between two pieces of output, at an offset.
//! A socket joins with the screen at offset N (kept in its attachment) and
//! is sent every piece from N on. While any socket is connected, one task
//! of the object (the follower) reads sandboxd's output stream and sends
//! each piece to every socket whose N it is not before. A piece the
//! follower sent while a joiner waited for its screen is sent to the joiner
//! from the newest pieces kept here ([`RECENT_BYTES`]) as it is accepted,
//! with nothing awaited in between, so no piece falls between the two.
//!
//! The follower's request keeps the object in memory while anyone is
//! connected; the sockets themselves are the runtime's (hibernation), so
//! they outlive an eviction, and the next frame from any of them begins a
//! follower again, which first sends every socket a fresh screen. When the
//! last socket goes, so does the follower.
//!
//! Input is written in the order it came, one request at a time: frames
//! are queued, and one task drains the queue.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use futures_util::StreamExt;
use serde_json::Value;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::spawn_local;
use worker::worker_sys::ext::WebSocketExt;
use worker::worker_sys::DurableObjectState;
use worker::{AbortController, AbortSignal, Env, State, WebSocket, WebSocketPair};

use super::sandboxd::{ContainerState, Sandboxd};
use super::stream::Lines;
use crate::access::token::Claims;
use crate::api::limits::MAX_WATCHERS;
use crate::api::role::RoomRole;
use crate::api::shapes::{sandbox_name, AuditEntry, AuditOutcome, Source};
use crate::api::ApiError;
use crate::approvals::audit::{self, Audit, Consent};
use crate::feed::event::{CloseReason, Event};
use crate::feed::fanout::{self, Feed, Grant, BEYOND_ROLE, NOT_IN_PROTOCOL, TOO_LARGE};
use crate::runtime::clock;
use crate::terminal::{FromClient, ToClient, Typist, MAX_FRAME_BYTES, WRITE_TERMINAL};

/// A terminal socket's first tag; its second is its [`Grant`].
pub const TAG: &str = "terminal";
/// The newest output kept for joiners, in bytes.
const RECENT_BYTES: usize = 64 * 1024;
/// Close code for every socket of a room that went to sleep.
const ASLEEP: u16 = 4409;

/// What the terminal's tasks need of the Sandbox object.
pub struct Terminal {
    pub raw: DurableObjectState,
    pub env: Env,
    pub container: Rc<ContainerState>,
    pub feed: Rc<Feed>,
    pub audit: Rc<Audit>,
    pub idle_ms: u64,
    pub shared: Rc<Shared>,
}

impl Clone for Terminal {
    fn clone(&self) -> Self {
        Self {
            raw: self.raw.clone().unchecked_into(),
            env: self.env.clone(),
            container: Rc::clone(&self.container),
            feed: Rc::clone(&self.feed),
            audit: Rc::clone(&self.audit),
            idle_ms: self.idle_ms,
            shared: Rc::clone(&self.shared),
        }
    }
}

/// What this instance of the object knows of the terminal.
#[derive(Default)]
pub struct Shared {
    /// The follower runs; aborting it ends its request.
    following: RefCell<Option<AbortController>>,
    /// The newest pieces sent, each with its offset.
    recent: RefCell<VecDeque<(u64, String)>>,
    /// The bytes of text `recent` holds.
    recent_bytes: Cell<usize>,
    /// Input waiting to be written, with who typed it; one task drains it.
    queue: RefCell<VecDeque<(String, Typed)>>,
    draining: Cell<bool>,
    typists: RefCell<HashMap<String, Typist>>,
}

/// Who typed, from where, and into which room's terminal.
#[derive(Clone)]
pub struct Typed {
    pub room: String,
    pub name: Option<String>,
    pub role: RoomRole,
    pub source: Source,
    pub consent: Consent,
}

impl Terminal {
    fn state(&self) -> State {
        State::from(self.raw.clone().unchecked_into::<DurableObjectState>())
    }

    fn sandboxd<'a>(&'a self, state: &'a State) -> Result<Sandboxd<'a>, ApiError> {
        Sandboxd::locate(state, &self.env, &self.container, self.idle_ms)
    }

    /// The terminal's sockets.
    pub fn sockets(state: &State) -> Vec<WebSocket> {
        state.get_websockets_with_tag(TAG)
    }

    /// Whether `ws` is one of the terminal's.
    pub fn owns(state: &State, ws: &WebSocket) -> bool {
        state.get_tags(ws).first().is_some_and(|tag| tag == TAG)
    }

    /// Accepts a socket with what its token grants, sends it the screen
    /// and what followed, and follows the terminal if nobody did.
    pub async fn join(&self, room: &str, claims: Option<&Claims>) -> Result<WebSocket, ApiError> {
        let state = self.state();
        let connected = Self::sockets(&state).len();
        if connected >= MAX_WATCHERS {
            return Err(ApiError::TooManyWatchers(connected));
        }
        let screen = self
            .sandboxd(&state)?
            .terminal_screen(&sandbox_name(room))
            .await?;
        let from = screen["offset"].as_u64().unwrap_or(0);
        let pair = WebSocketPair::new()?;
        let grant = Grant::of(claims);
        state.accept_websocket_with_tags(&pair.server, &[TAG, &grant.tag()]);
        let name = claims.and_then(|claims| claims.name.clone());
        let attached = Attached {
            from,
            room: room.to_owned(),
            name,
        };
        attached.attach(&pair.server)?;
        self.send_screen(&pair.server, &screen);
        for (offset, data) in self.shared.recent.borrow().iter() {
            if *offset >= from {
                send(&pair.server, &ToClient::Output { data }.text());
            }
        }
        self.follow(room, from);
        Ok(pair.client)
    }

    fn send_screen(&self, ws: &WebSocket, screen: &Value) {
        let cell = |key| screen[key].as_u64().unwrap_or(0) as u16;
        let data = screen["data"].as_str().unwrap_or_default();
        let frame = ToClient::Screen {
            cols: cell("cols"),
            rows: cell("rows"),
            data,
        };
        send(ws, &frame.text());
    }

    /// Begins the follower from offset `from`, unless one runs.
    fn follow(&self, room: &str, from: u64) {
        if self.shared.following.borrow().is_some() {
            return;
        }
        let controller = AbortController::default();
        let signal = controller.signal();
        *self.shared.following.borrow_mut() = Some(controller);
        let (terminal, room) = (self.clone(), room.to_owned());
        spawn_local(async move {
            let state = terminal.state();
            let _ = terminal.follow_from(&state, &room, from, &signal).await;
            terminal.shared.following.borrow_mut().take();
        });
    }

    async fn follow_from(
        &self,
        state: &State,
        room: &str,
        from: u64,
        signal: &AbortSignal,
    ) -> Result<(), ApiError> {
        let sandboxd = self.sandboxd(state)?;
        let mut output = sandboxd
            .terminal_output(&sandbox_name(room), from, signal)
            .await?;
        let mut chunks = output.stream()?;
        let mut lines = Lines::default();
        while let Some(chunk) = chunks.next().await {
            let sockets = Self::sockets(state);
            if sockets.is_empty() {
                return Ok(());
            }
            for line in lines.feed(&chunk?) {
                let event: Value = serde_json::from_str(&line).unwrap_or_default();
                let (Some(offset), Some(data)) = (event["offset"].as_u64(), event["data"].as_str())
                else {
                    continue;
                };
                let frame = ToClient::Output { data }.text();
                for ws in &sockets {
                    if Attached::of(ws).from <= offset {
                        send(ws, &frame);
                    }
                }
                let mut recent = self.shared.recent.borrow_mut();
                recent.push_back((offset, data.to_owned()));
                let mut bytes = self.shared.recent_bytes.get() + data.len();
                while bytes > RECENT_BYTES {
                    let Some((_, gone)) = recent.pop_front() else {
                        break;
                    };
                    bytes -= gone.len();
                }
                self.shared.recent_bytes.set(bytes);
            }
        }
        Err(ApiError::SandboxFailed(
            "the terminal's output stream broke off".into(),
        ))
    }

    /// A frame from a terminal socket; answers the room when it was one
    /// that uses it (input, a size).
    pub fn received(&self, ws: &WebSocket, bytes: usize, text: Option<&str>) -> Option<String> {
        if bytes > MAX_FRAME_BYTES {
            let _ = ws.close(Some(TOO_LARGE), Some("frame too large"));
            return None;
        }
        let state = self.state();
        let grant = state
            .get_tags(ws)
            .get(1)
            .and_then(|tag| Grant::from_tag(tag))?;
        if grant.expired(clock::now_ms()) {
            fanout::close(ws, CloseReason::TokenExpired);
            return None;
        }
        let Some(frame) = text.and_then(FromClient::parse) else {
            let why = "the terminal takes input and resize frames";
            let _ = ws.close(Some(NOT_IN_PROTOCOL), Some(why));
            return None;
        };
        if grant.role < frame.needed() {
            let _ = ws.close(Some(BEYOND_ROLE), Some("a watcher may only watch"));
            return None;
        }
        let Attached { room, name, .. } = Attached::of(ws);
        // After an eviction: follow again, everyone redrawn first.
        if self.shared.following.borrow().is_none() {
            self.redraw(&room);
        }
        match frame {
            FromClient::Input(keys) => {
                let typed = Typed {
                    room: room.clone(),
                    name,
                    role: grant.role,
                    source: Source::Exec,
                    consent: Consent::default(),
                };
                self.shared.queue.borrow_mut().push_back((keys, typed));
                self.drain();
            }
            FromClient::Resize { cols, rows } => {
                let (terminal, name) = (self.clone(), sandbox_name(&room));
                spawn_local(async move {
                    let state = terminal.state();
                    if let Ok(sandboxd) = terminal.sandboxd(&state) {
                        let _ = sandboxd.terminal_size(&name, cols, rows).await;
                    }
                });
            }
        }
        Some(room)
    }

    /// Sends every socket a fresh screen, and follows on from it.
    fn redraw(&self, room: &str) {
        let (terminal, room) = (self.clone(), room.to_owned());
        spawn_local(async move {
            let state = terminal.state();
            let Ok(sandboxd) = terminal.sandboxd(&state) else {
                return;
            };
            let Ok(screen) = sandboxd.terminal_screen(&sandbox_name(&room)).await else {
                return;
            };
            let from = screen["offset"].as_u64().unwrap_or(0);
            for ws in Self::sockets(&state) {
                let _ = Attached {
                    from,
                    ..Attached::of(&ws)
                }
                .attach(&ws);
                terminal.send_screen(&ws, &screen);
            }
            terminal.follow(&room, from);
        });
    }

    /// Writes the queued input in order, one request at a time.
    fn drain(&self) {
        if self.shared.draining.replace(true) {
            return;
        }
        let terminal = self.clone();
        spawn_local(async move {
            let state = terminal.state();
            loop {
                let next = terminal.shared.queue.borrow_mut().pop_front();
                let Some((keys, typed)) = next else { break };
                let echo = match terminal.sandboxd(&state) {
                    Ok(sandboxd) => {
                        sandboxd
                            .terminal_input(&sandbox_name(&typed.room), &keys)
                            .await
                    }
                    Err(e) => Err(e),
                };
                if let Ok(echo) = echo {
                    let _ = terminal.on_record(&state, &keys, echo, &typed);
                }
            }
            terminal.shared.draining.set(false);
        });
    }

    /// What typing leaves on record (see `crate::terminal`): `typing` to
    /// the terminal's sockets, `terminal_input` on the feed, an audit entry
    /// per line.
    pub fn on_record(
        &self,
        state: &State,
        keys: &str,
        echo: bool,
        typed: &Typed,
    ) -> Result<(), ApiError> {
        let who = typed
            .name
            .clone()
            .unwrap_or_else(|| typed.role.name().to_owned());
        let now = clock::now_ms();
        let told = self
            .shared
            .typists
            .borrow_mut()
            .entry(who.clone())
            .or_default()
            .typed(keys, echo, now);
        let Some(told) = told else {
            return Ok(());
        };
        let typing = ToClient::Typing {
            name: &who,
            role: typed.role,
        }
        .text();
        for ws in Self::sockets(state) {
            send(&ws, &typing);
        }
        let unechoed = "(typed while the terminal did not echo: not recorded)";
        for line in &told.lines {
            let entry = audit::entry(
                now,
                line.as_deref().unwrap_or(unechoed),
                typed.source,
                typed.name.clone(),
                AuditOutcome::Ran,
                typed.consent.clone(),
            );
            self.audit.record(&AuditEntry {
                tool: Some(WRITE_TERMINAL),
                ..entry
            })?;
        }
        let event = Event::TerminalInput {
            by: typed.name.as_deref(),
            bytes: told.bytes,
            line: told.lines.last().and_then(|line| line.as_deref()),
        };
        self.feed.publish(state, &event.written())
    }

    /// Closes every terminal socket for `reason` (the room deleted or
    /// expired), or only those of other token generations (revoked).
    pub fn close(state: &State, reason: CloseReason, generation: Option<Option<&str>>) {
        for ws in Self::sockets(state) {
            let grant = state
                .get_tags(&ws)
                .get(1)
                .and_then(|tag| Grant::from_tag(tag));
            let ended = match generation {
                None => true,
                Some(current) => grant.is_some_and(|g| g.revoked(current)),
            };
            if ended {
                let said = serde_json::to_value(reason).unwrap_or_default();
                let closed = ToClient::Closed {
                    reason: said.as_str().unwrap_or_default(),
                };
                send(&ws, &closed.text());
                fanout::close(&ws, reason);
            }
        }
    }

    /// The room went to sleep, and its terminal with the sandbox: every
    /// socket is closed; connecting again wakes the room.
    pub fn asleep(state: &State) {
        for ws in Self::sockets(state) {
            let _ = ws.close(
                Some(ASLEEP),
                Some("the room went to sleep: connect again to wake it"),
            );
        }
    }

    /// A socket went away; the last one takes the follower with it.
    pub fn left(&self, state: &State) {
        if Self::sockets(state).is_empty() {
            if let Some(controller) = self.shared.following.borrow_mut().take() {
                controller.abort();
            }
        }
    }
}

fn send(ws: &WebSocket, text: &str) {
    let _ = ws.send_with_str(text);
}

/// What a terminal socket carries in its attachment: the offset it joined
/// at (its screen's), its room, and the name its token gives. Kept as a
/// plain string, `offset room name`, as the feed keeps its own.
struct Attached {
    from: u64,
    room: String,
    name: Option<String>,
}

impl Attached {
    fn of(ws: &WebSocket) -> Self {
        let attached = ws.as_ref().deserialize_attachment().ok();
        let text = attached.and_then(|v| v.as_string()).unwrap_or_default();
        let mut parts = text.splitn(3, ' ');
        Self {
            from: parts.next().and_then(|from| from.parse().ok()).unwrap_or(0),
            room: parts.next().unwrap_or_default().to_owned(),
            name: parts
                .next()
                .filter(|name| !name.is_empty())
                .map(str::to_owned),
        }
    }

    fn attach(&self, ws: &WebSocket) -> Result<(), ApiError> {
        let name = self.name.as_deref().unwrap_or_default();
        let text = format!("{} {} {name}", self.from, self.room);
        Ok(ws.as_ref().serialize_attachment(text.into())?)
    }
}
