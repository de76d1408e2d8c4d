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
//! Each socket carries what its token grants in a tag ([`Grant`]: role, and
//! for a room token its generation and expiry) and the name it is shown by
//! in its attachment, both of which outlive an eviction too. Everyone on the
//! feed is told who is there (`presence`) whenever that changes. A socket
//! whose token is revoked is closed at once, one whose token expired when
//! the next event comes (code 4401, after a last `closed`); one that sends a
//! frame its role may not is closed with 4403, one that sends something the
//! protocol does not know with 1008.
//!
//! When the room is deleted or expires, every watcher gets a last `closed`
//! event and its socket is closed (code 4410): what it shows is gone.

use std::cell::RefCell;
use std::collections::HashMap;

use duet_wire::{ExecEnd, Stream};
use worker::worker_sys::ext::WebSocketExt;
use worker::{web_sys, State, WebSocket, WebSocketPair};

use crate::api::access::{self, RoomRole};
use crate::api::limits::{MAX_UNACKED_EVENTS, MAX_WATCHERS, MAX_WATCHER_FRAME_BYTES};
use crate::api::live::{self, CloseReason, Event, FromWatcher, Present, Source};
use crate::api::token::Claims;
use crate::api::wire::Message;
use crate::api::{validate, ApiError};
use crate::runtime::{clock, random};

/// Close code for a watcher too far behind.
const TOO_SLOW: u16 = 4008;
/// Close code for a watcher that sent a frame too large.
const TOO_LARGE: u16 = 1009;
/// Close code for a frame the protocol does not have.
const NOT_IN_PROTOCOL: u16 = 1008;
/// Close code for a frame beyond the socket's role.
const BEYOND_ROLE: u16 = 4403;
/// Close code for a socket whose token was revoked or expired.
const TOKEN_ENDED: u16 = 4401;
/// Close code for every watcher of a room deleted or expired.
const ROOM_CLOSED: u16 = 4410;

#[derive(Default)]
struct Counters {
    sent: u64,
    acked: u64,
}

/// What a socket's token grants, kept in the socket's third tag: the role,
/// and for a room token its generation and expiry (the service token, and
/// everyone in open mode, is an owner with neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub role: RoomRole,
    pub generation: Option<String>,
    pub expires_at: Option<u64>,
}

impl Grant {
    /// What the claims of a room token, or their absence, grant.
    pub fn of(claims: Option<&Claims>) -> Self {
        match claims {
            None => Self {
                role: RoomRole::Owner,
                generation: None,
                expires_at: None,
            },
            Some(claims) => Self {
                role: claims.role,
                generation: Some(claims.generation.clone()),
                expires_at: Some(claims.expires_at),
            },
        }
    }

    fn tag(&self) -> String {
        let generation = self.generation.as_deref().unwrap_or("-");
        let expires = self.expires_at.map_or("-".into(), |at| at.to_string());
        format!("{} {generation} {expires}", self.role.name())
    }

    fn from_tag(tag: &str) -> Option<Self> {
        let mut parts = tag.split(' ');
        let role = RoomRole::parse(parts.next()?)?;
        let generation = Some(parts.next()?).filter(|g| *g != "-").map(str::to_owned);
        let expires_at = match parts.next()? {
            "-" => None,
            at => Some(at.parse().ok()?),
        };
        Some(Self {
            role,
            generation,
            expires_at,
        })
    }

    fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// A socket's attachment: the name it is shown by, and whether its token
/// gave it (then it keeps it). Kept as a plain string, `t` or `s` (from the
/// token, or sent by the socket) and the name: the runtime stores any
/// structured value, but converting one from Rust costs the upload code of
/// its own.
#[derive(Default, PartialEq, Eq, Debug)]
struct Shown {
    name: Option<String>,
    from_token: bool,
}

impl Shown {
    fn of(ws: &WebSocket) -> Self {
        let attached = ws.as_ref().deserialize_attachment().ok();
        Self::read(
            &attached
                .and_then(|value| value.as_string())
                .unwrap_or_default(),
        )
    }

    fn read(text: &str) -> Self {
        let from_token = text.starts_with('t');
        let name = text.get(1..).filter(|name| !name.is_empty());
        Self {
            name: name.map(str::to_owned),
            from_token,
        }
    }

    fn text(&self) -> String {
        let kind = if self.from_token { 't' } else { 's' };
        format!("{kind}{}", self.name.as_deref().unwrap_or_default())
    }

    fn attach(&self, ws: &WebSocket) -> Result<(), ApiError> {
        Ok(ws.as_ref().serialize_attachment(self.text().into())?)
    }
}

/// A socket's tags, read: its id, the room, what it may do.
struct Tags {
    id: String,
    room: String,
    grant: Grant,
}

impl Tags {
    fn of(state: &State, ws: &WebSocket) -> Option<Self> {
        let mut tags = state.get_tags(ws).into_iter();
        Some(Self {
            id: tags.next()?,
            room: tags.next()?,
            grant: Grant::from_tag(&tags.next()?)?,
        })
    }
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

    /// Accepts a new watcher with what its token grants, sends it the
    /// stored history and tells everyone who is there; answers the client's
    /// end of the socket. `invites`: whether it may invite others.
    pub fn accept(
        &self,
        state: &State,
        room: &str,
        history: &[Message],
        claims: Option<&Claims>,
        invites: bool,
    ) -> Result<WebSocket, ApiError> {
        let watchers = self.watchers(state);
        if watchers >= MAX_WATCHERS {
            return Err(ApiError::TooManyWatchers(watchers));
        }
        let pair = WebSocketPair::new()?;
        let id = random::id('w');
        let grant = Grant::of(claims);
        let name = claims.and_then(|claims| claims.name.clone());
        Shown {
            from_token: name.is_some(),
            name: name.clone(),
        }
        .attach(&pair.server)?;
        // The room rides along, so the last watcher's leaving can name it.
        state.accept_websocket_with_tags(&pair.server, &[&id, room, &grant.tag()]);
        let hello = Event::Hello {
            room,
            history,
            role: grant.role,
            name: name.as_deref(),
            invites,
        };
        self.send(&pair.server, &id, &hello.to_json());
        self.presence(state, None);
        Ok(pair.client)
    }

    /// Sends an event, as JSON, to every watcher; one whose token has
    /// expired gets its end instead.
    pub fn broadcast(&self, state: &State, event: &str) {
        let now = clock::now_ms();
        for ws in state.get_websockets() {
            let Some(tags) = Tags::of(state, &ws) else {
                continue;
            };
            match tags.grant.expired(now) {
                true => self.end(&ws, &tags.id, CloseReason::TokenExpired),
                false => self.send(&ws, &tags.id, event),
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

    /// Sends a socket its last event, `closed` for `reason`, and closes it.
    fn end(&self, ws: &WebSocket, id: &str, reason: CloseReason) {
        self.send(ws, id, &Event::Closed { reason }.to_json());
        let (code, why) = match reason {
            CloseReason::Deleted => (ROOM_CLOSED, "the room was deleted"),
            CloseReason::Expired => (ROOM_CLOSED, "the room expired"),
            CloseReason::Revoked => (TOKEN_ENDED, "the token was revoked"),
            CloseReason::TokenExpired => (TOKEN_ENDED, "the token expired"),
        };
        let _ = ws.close(Some(code), Some(why));
        self.watchers.borrow_mut().remove(id);
    }

    /// Tells everyone who is on the feed; `leaving` is no longer.
    fn presence(&self, state: &State, leaving: Option<&WebSocket>) {
        let sockets = state.get_websockets();
        let present: Vec<Present> = sockets
            .iter()
            .filter(|ws| leaving.is_none_or(|leaving| leaving.as_ref() != ws.as_ref()))
            .filter(|ws| ws.as_ref().ready_state() == web_sys::WebSocket::OPEN)
            .filter_map(|ws| {
                let role = Tags::of(state, ws)?.grant.role;
                Some(Present {
                    role,
                    name: Shown::of(ws).name,
                })
            })
            .collect();
        self.broadcast(state, &Event::Presence { watchers: &present }.to_json());
    }

    /// The room's token generation is now `generation`: the sockets of
    /// every other generation's tokens end.
    pub fn revoke(&self, state: &State, generation: Option<&str>) {
        let mut ended = false;
        for ws in state.get_websockets() {
            let Some(tags) = Tags::of(state, &ws) else {
                continue;
            };
            if tags
                .grant
                .generation
                .as_deref()
                .is_some_and(|g| Some(g) != generation)
            {
                self.end(&ws, &tags.id, CloseReason::Revoked);
                ended = true;
            }
        }
        if ended {
            self.presence(state, None);
        }
    }

    /// Tells the watchers a command starts; answers its id.
    pub fn command_started(&self, state: &State, cmd: &str, source: Source) -> String {
        let id = random::id('c');
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

    /// Tells the watchers how a command ended (its output went out as it
    /// came), or why it could not run.
    pub fn command_ended(&self, state: &State, id: &str, ended: Result<ExecEnd, &ApiError>) {
        let ended = ended.unwrap_or_else(|e| {
            self.command_output(state, id, Stream::Stderr.name(), &format!("{e}\n"));
            ExecEnd {
                exit_code: -1,
                ..ExecEnd::default()
            }
        });
        let end = Event::CommandEnd {
            id,
            exit_code: ended.exit_code,
            truncated: ended.truncated,
            timed_out: ended.timed_out,
        };
        self.broadcast(state, &end.to_json());
    }

    /// Tells every watcher the room was deleted or expired, and closes its
    /// socket.
    pub fn close(&self, state: &State, reason: CloseReason) {
        for ws in state.get_websockets() {
            if let Some(tags) = Tags::of(state, &ws) {
                self.end(&ws, &tags.id, reason);
            }
        }
        self.watchers.borrow_mut().clear();
    }

    /// A frame of `bytes` bytes from a watcher, with its text if it is a
    /// text frame (binary frames mean nothing).
    pub fn received(&self, state: &State, ws: &WebSocket, bytes: usize, text: Option<&str>) {
        if bytes > MAX_WATCHER_FRAME_BYTES {
            let _ = ws.close(Some(TOO_LARGE), Some("frame too large"));
            return;
        }
        let (Some(text), Some(tags)) = (text, Tags::of(state, ws)) else {
            return;
        };
        let Some(frame) = FromWatcher::parse(text) else {
            let why = "the feed takes ack and name frames; messages and commands go over HTTP";
            let _ = ws.close(Some(NOT_IN_PROTOCOL), Some(why));
            return;
        };
        if tags.grant.role < access::needed_to_send(&frame) {
            let _ = ws.close(Some(BEYOND_ROLE), Some("a watcher may only acknowledge"));
            return;
        }
        match frame {
            FromWatcher::Ack { seq } => {
                let mut watchers = self.watchers.borrow_mut();
                let counters = watchers.entry(tags.id).or_default();
                counters.acked = counters.acked.max(seq.min(counters.sent));
            }
            FromWatcher::Name { name } => {
                let shown = Shown::of(ws);
                let name = validate::shown_name(&name);
                if shown.from_token || shown.name == name {
                    return;
                }
                let renamed = Shown {
                    name,
                    from_token: false,
                };
                if renamed.attach(ws).is_ok() {
                    self.presence(state, None);
                }
            }
        }
    }

    /// A watcher went away; the others are told, and the room it watched is
    /// answered.
    pub fn closed(&self, state: &State, ws: &WebSocket) -> Option<String> {
        let tags = Tags::of(state, ws)?;
        self.watchers.borrow_mut().remove(&tags.id);
        self.presence(state, Some(ws));
        Some(tags.room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_reads_back_from_its_tag() {
        let claims = Claims {
            room: "r".into(),
            role: RoomRole::Watcher,
            expires_at: 1_764_400_000_000,
            generation: "g00ff".into(),
            name: Some("a name with spaces".into()),
        };
        for grant in [Grant::of(None), Grant::of(Some(&claims))] {
            assert_eq!(Grant::from_tag(&grant.tag()).as_ref(), Some(&grant));
        }
        assert_eq!(Grant::of(None).tag(), "owner - -");
        assert_eq!(
            Grant::of(Some(&claims)).tag(),
            "watcher g00ff 1764400000000"
        );
        assert!(Grant::of(Some(&claims)).expired(1_764_400_000_000));
        assert!(!Grant::of(None).expired(u64::MAX));
        for bad in ["", "owner", "owner -", "admin - -", "owner - soon"] {
            assert_eq!(Grant::from_tag(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_name_reads_back_from_its_attachment() {
        for shown in [
            Shown::default(),
            Shown {
                name: Some("tom t".into()),
                from_token: false,
            },
            Shown {
                name: Some("sue".into()),
                from_token: true,
            },
        ] {
            assert_eq!(Shown::read(&shown.text()), shown);
        }
        assert_eq!(Shown::read(""), Shown::default());
    }
}
