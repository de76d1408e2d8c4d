//! The room's live feed. The Sandbox object holds the watchers' WebSockets,
//! since command output, the bulk of what they see, is produced here; the
//! DuetAgent publishes the room's messages to it, and is told whether anyone
//! watches, so an unwatched room pays nothing.
//!
//! Sockets are accepted with the hibernation API: an idle feed costs no
//! running object, and the sockets outlive the object's eviction. Each
//! watcher gets its own sequence numbers and acknowledges what it has shown;
//! one more than [`MAX_UNACKED_EVENTS`] behind is closed (code 4008), so a
//! slow watcher never holds the room back. Counters live in memory: after an
//! eviction they start again, which only delays noticing a slow watcher.
//!
//! When the room is deleted or expires, every watcher gets a last `closed`
//! event and its socket is closed (code 4410): what it shows is gone.

use std::cell::RefCell;
use std::collections::HashMap;

use duet_wire::{ExecResult, Stream};
use worker::{State, WebSocket, WebSocketPair};

use crate::api::limits::{MAX_UNACKED_EVENTS, MAX_WATCHERS, MAX_WATCHER_FRAME_BYTES};
use crate::api::live::{self, CloseReason, Event, FromWatcher, Source};
use crate::api::wire::Message;
use crate::api::ApiError;

/// Close code for a watcher too far behind.
const TOO_SLOW: u16 = 4008;
/// Close code for a watcher that sent a frame too large.
const TOO_LARGE: u16 = 1009;
/// Close code for every watcher of a room deleted or expired.
const ROOM_CLOSED: u16 = 4410;

#[derive(Default)]
struct Counters {
    sent: u64,
    acked: u64,
}

#[derive(Default)]
pub struct Feed {
    /// By watcher id (each socket's tag).
    watchers: RefCell<HashMap<String, Counters>>,
}

impl Feed {
    /// How many watchers are connected.
    pub fn watchers(&self, state: &State) -> usize {
        state.get_websockets().len()
    }

    /// Accepts a new watcher and sends it the stored history; answers the
    /// client's end of the socket.
    pub fn accept(
        &self,
        state: &State,
        room: &str,
        history: &[Message],
    ) -> Result<WebSocket, ApiError> {
        let watchers = self.watchers(state);
        if watchers >= MAX_WATCHERS {
            return Err(ApiError::TooManyWatchers(watchers));
        }
        let pair = WebSocketPair::new()?;
        let id = random_id('w');
        // The room rides along, so the last watcher's leaving can name it.
        state.accept_websocket_with_tags(&pair.server, &[&id, room]);
        self.send(&pair.server, &id, &Event::Hello { room, history }.to_json());
        Ok(pair.client)
    }

    /// Sends an event, as JSON, to every watcher.
    pub fn broadcast(&self, state: &State, event: &str) {
        for ws in state.get_websockets() {
            if let Some(id) = state.get_tags(&ws).into_iter().next() {
                self.send(&ws, &id, event);
            }
        }
    }

    fn send(&self, ws: &WebSocket, id: &str, event: &str) {
        let mut watchers = self.watchers.borrow_mut();
        let counters = watchers.entry(id.to_owned()).or_default();
        if counters.sent.saturating_sub(counters.acked) >= MAX_UNACKED_EVENTS {
            watchers.remove(id);
            let _ = ws.close(Some(TOO_SLOW), Some("too slow: acknowledge what you show"));
            return;
        }
        counters.sent += 1;
        if ws.send_with_str(live::frame(event, counters.sent)).is_err() {
            watchers.remove(id);
        }
    }

    /// Tells the watchers a command starts; answers its id.
    pub fn command_started(&self, state: &State, cmd: &str, source: Source) -> String {
        let id = random_id('c');
        self.broadcast(
            state,
            &Event::Command {
                id: &id,
                cmd,
                source,
            }
            .to_json(),
        );
        id
    }

    /// Tells the watchers a piece of a command's output, as sandboxd cut it
    /// (at most `duet_wire::stream::OUTPUT_EVENT_BYTES`).
    pub fn command_output(&self, state: &State, id: &str, stream: &str, data: &str) {
        self.broadcast(state, &Event::Output { id, stream, data }.to_json());
    }

    /// Tells the watchers how a command ended, from sandboxd's result (its
    /// output went out as it came), or why it could not run.
    pub fn command_ended(&self, state: &State, id: &str, result: Result<&str, &ApiError>) {
        let output: ExecResult = match result {
            Ok(raw) => serde_json::from_str(raw).unwrap_or_default(),
            Err(e) => {
                self.command_output(state, id, Stream::Stderr.name(), &format!("{e}\n"));
                ExecResult {
                    exit_code: -1,
                    ..ExecResult::default()
                }
            }
        };
        let end = Event::CommandEnd {
            id,
            exit_code: output.exit_code,
            truncated: output.truncated,
            timed_out: output.timed_out,
        };
        self.broadcast(state, &end.to_json());
    }

    /// Tells every watcher the room was deleted or expired, and closes its
    /// socket.
    pub fn close(&self, state: &State, reason: CloseReason) {
        self.broadcast(state, &Event::Closed { reason }.to_json());
        let why = match reason {
            CloseReason::Deleted => "the room was deleted",
            CloseReason::Expired => "the room expired",
        };
        for ws in state.get_websockets() {
            let _ = ws.close(Some(ROOM_CLOSED), Some(why));
        }
        self.watchers.borrow_mut().clear();
    }

    /// A frame of `bytes` bytes from a watcher, with its text if it is a
    /// text frame.
    pub fn received(&self, state: &State, ws: &WebSocket, bytes: usize, text: Option<&str>) {
        if bytes > MAX_WATCHER_FRAME_BYTES {
            let _ = ws.close(Some(TOO_LARGE), Some("frame too large"));
            return;
        }
        let Some(FromWatcher::Ack { seq }) = text.and_then(FromWatcher::parse) else {
            return;
        };
        if let Some(id) = state.get_tags(ws).into_iter().next() {
            let mut watchers = self.watchers.borrow_mut();
            let counters = watchers.entry(id).or_default();
            counters.acked = counters.acked.max(seq.min(counters.sent));
        }
    }

    /// A watcher went away; answers the room it watched.
    pub fn closed(&self, state: &State, ws: &WebSocket) -> Option<String> {
        let mut tags = state.get_tags(ws).into_iter();
        let id = tags.next()?;
        self.watchers.borrow_mut().remove(&id);
        tags.next()
    }
}

/// A fresh id for a watcher or a command, `prefix` telling which.
fn random_id(prefix: char) -> String {
    let bits = (worker::js_sys::Math::random() * 2f64.powi(62)) as u64;
    format!("{prefix}{bits:016x}")
}
