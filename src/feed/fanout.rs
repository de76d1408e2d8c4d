//! The room's live feed. The Sandbox object holds the watchers' WebSockets,
//! since command output, the bulk of what they see, is produced here; the
//! DuetAgent publishes the room's messages to it. Every event published is
//! numbered and kept in the room's log (`feed::log`) before it goes out, so
//! a watcher that comes back with the last number it saw (`?since=N`) is
//! sent exactly what it missed, and one that joins late (or whose missed
//! events were trimmed: a `gap` first) is sent a snapshot in its `hello`:
//! the chat history, and the terminal's recent past.
//!
//! Sockets are accepted with the hibernation API: an idle feed costs no
//! running object, and the sockets outlive the object's eviction. The page
//! keeps an idle socket alive with pings the runtime answers itself
//! ([`PING`]), which wake nothing. While a command runs the object is awake
//! anyway, and when nothing went out for the heartbeat interval it sends a
//! `heartbeat`: proxies see traffic both ways, and a watcher that answers
//! two of them with no ack is let go (code 4408); it can come back with
//! `since`. Watchers acknowledge what they have shown; one more than
//! [`MAX_UNACKED_EVENTS`] behind is closed (code 4008), so a slow watcher
//! never holds the room back. What is acknowledged lives in memory: after
//! an eviction it starts again from the next event, which only delays
//! noticing a slow watcher.
//!
//! Each socket carries what its token grants in a tag ([`Grant`]: role, and
//! for a room token its generation and expiry) and the name it is shown by
//! in its attachment, both of which outlive an eviction too. An instance of
//! the object reads the tags once, into its list of watchers, and sends
//! each event from that list: a frame is written once, with its number,
//! and goes to every socket as it is. Everyone on the
//! feed is told who is there (`presence`) whenever that changes. A socket
//! whose token is revoked is closed at once, one whose token expired when
//! the next event comes (code 4401, after a last `closed`); one that sends a
//! frame its role may not is closed with 4403, one that sends something the
//! protocol does not know with 1008.
//!
//! When the room is deleted or expires, every watcher gets a last `closed`
//! event and its socket is closed (code 4410): what it shows is gone, and
//! so is the log (its numbers are never given again).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use duet_wire::{ExecEnd, ExecResult, Stream};
use futures_util::future::{select, Either};
use worker::worker_sys::ext::WebSocketExt;
use worker::{web_sys, Delay, Env, SqlStorage, State, WebSocket, WebSocketPair};

use super::event::{Frame, Written};
use super::log::{FeedLog, Resume};
use crate::access::token::Claims;
use crate::api::limits::{
    FEED_LOG_EVENTS, HEARTBEAT_MS, JOB_LOG_BYTES, JOB_LOG_EVENTS, MAX_UNACKED_EVENTS, MAX_WATCHERS,
    MAX_WATCHER_FRAME_BYTES,
};
use crate::api::role::RoomRole;
use crate::api::shapes::Message;
use crate::api::shapes::Source;
use crate::api::{validate, ApiError};
use crate::feed::event::{self, CloseReason, Event, FromWatcher, Present};
use crate::runtime::{clock, config, random};

/// What a watcher sends to keep an idle socket open, and what the runtime
/// answers ([`PONG`]) without waking the object. The runtime matches this
/// exact text; the same frame spelled otherwise (`{"type": "ping"}`) wakes
/// the object, which answers it too.
pub const PING: &str = r#"{"type":"ping"}"#;
const PONG: &str = r#"{"type":"pong"}"#;

/// Close code for a watcher too far behind.
const TOO_SLOW: u16 = 4008;
/// Close code for a watcher that sent a frame too large.
pub const TOO_LARGE: u16 = 1009;
/// Close code for a frame the protocol does not have.
pub const NOT_IN_PROTOCOL: u16 = 1008;
/// Close code for a frame beyond the socket's role.
pub const BEYOND_ROLE: u16 = 4403;
/// Close code for a socket whose token was revoked or expired.
const TOKEN_ENDED: u16 = 4401;
/// Close code for every watcher of a room deleted or expired.
const ROOM_CLOSED: u16 = 4410;
/// Close code for a watcher that answered no heartbeat.
const NOT_ANSWERING: u16 = 4408;

/// Where a watcher is: the number of the last event sent to it and of the
/// last it acknowledged, and since when a heartbeat waits for its answer.
struct Counters {
    sent: u64,
    acked: u64,
    asked_at: Option<u64>,
}

impl Counters {
    /// A watcher that has seen, and shown, every event up to `seq`.
    fn at(seq: u64) -> Self {
        Self {
            sent: seq,
            acked: seq,
            asked_at: None,
        }
    }
}

/// How a watcher joins.
pub enum Joining<'a> {
    /// It saw every event up to `since`, and missed these frames.
    Resumed { since: u64, missed: Vec<Frame> },
    /// It starts afresh from the history, as read when `upto` was the
    /// newest event; `gap` is the number it asked to resume from, when it
    /// could not.
    Fresh {
        history: &'a [Message],
        upto: u64,
        gap: Option<u64>,
    },
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

    pub fn tag(&self) -> String {
        let generation = self.generation.as_deref().unwrap_or("-");
        let expires = self.expires_at.map_or("-".into(), |at| at.to_string());
        format!("{} {generation} {expires}", self.role.name())
    }

    pub fn from_tag(tag: &str) -> Option<Self> {
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

    /// Whether the room's token generation becoming `current` ends it: a
    /// room token of another generation (the service token has none).
    pub fn revoked(&self, current: Option<&str>) -> bool {
        self.generation
            .as_deref()
            .is_some_and(|g| Some(g) != current)
    }

    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// A socket's attachment: the name it is shown by, and whether its token
/// gave it (then it keeps it). Kept as a plain string, `t` or `s` (from the
/// token, or sent by the socket) and the name: the runtime stores any
/// structured value, but converting one from Rust costs the upload code of
/// its own.
#[derive(Default, PartialEq, Eq, Debug)]
struct NameTag {
    name: Option<String>,
    from_token: bool,
}

impl NameTag {
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

/// A watcher socket's tags, read: its id, the room, what it may do. (The
/// terminal's sockets have two tags, and are none of the feed's.)
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

/// A watcher as this instance of the object knows it: its socket and its
/// tags, read once, and where it is (`None` until something is sent to it
/// or heard from it).
struct Watcher {
    ws: WebSocket,
    tags: Tags,
    counters: Option<Counters>,
}

impl Watcher {
    /// Its counters; one not known yet (a new one, or any after an
    /// eviction) is taken to have seen and shown everything up to `seq`.
    fn counters(&mut self, seq: u64) -> &mut Counters {
        self.counters.get_or_insert_with(|| Counters::at(seq))
    }

    /// Sends it a frame; `false` when it is let go: too far behind (its
    /// socket is closed), or its socket is gone.
    fn send(&mut self, frame: &Frame) -> bool {
        // After an eviction, a watcher starts again from this frame.
        let counters = self.counters(frame.seq.saturating_sub(1));
        if counters.sent.saturating_sub(counters.acked) >= MAX_UNACKED_EVENTS {
            let _ = self
                .ws
                .close(Some(TOO_SLOW), Some("too slow: acknowledge what you show"));
            return false;
        }
        counters.sent = counters.sent.max(frame.seq);
        self.ws.send_with_str(&frame.text).is_ok()
    }

    /// Sends it its last event, `closed` for `reason` (numbered `seq`), and
    /// closes its socket.
    fn end(&mut self, reason: CloseReason, seq: u64) {
        self.send(&event::frame(&Event::Closed { reason }.written().json, seq));
        close(&self.ws, reason);
    }
}

/// Closes a socket for `reason`, with its code.
pub fn close(ws: &WebSocket, reason: CloseReason) {
    let (code, why) = match reason {
        CloseReason::Deleted => (ROOM_CLOSED, "the room was deleted"),
        CloseReason::Expired => (ROOM_CLOSED, "the room expired"),
        CloseReason::Revoked => (TOKEN_ENDED, "the token was revoked"),
        CloseReason::TokenExpired => (TOKEN_ENDED, "the token expired"),
    };
    let _ = ws.close(Some(code), Some(why));
}

pub struct Feed {
    /// The watchers, read from the sockets' tags once per instance: the
    /// sockets outlive an eviction, this list does not (`None`: not read
    /// yet).
    watchers: RefCell<Option<Vec<Watcher>>>,
    log: FeedLog,
    heartbeat_ms: u64,
    /// When a frame last went to the watchers.
    last_sent_at: Cell<u64>,
}

impl Feed {
    /// The feed of the object whose storage is `sql`; `FEED_LOG_EVENTS`
    /// and `FEED_HEARTBEAT_MS` lower its bounds (for tests).
    pub fn open(state: &State, sql: SqlStorage, env: &Env) -> worker::Result<Self> {
        let events = config::number(env, "FEED_LOG_EVENTS", FEED_LOG_EVENTS, FEED_LOG_EVENTS);
        let auto = worker::worker_sys::WebSocketRequestResponsePair::new(PING, PONG)?;
        state.set_websocket_auto_response(&auto);
        Ok(Self {
            watchers: RefCell::default(),
            log: FeedLog::open(sql, events)?,
            heartbeat_ms: config::number(env, "FEED_HEARTBEAT_MS", HEARTBEAT_MS, HEARTBEAT_MS)
                .max(1),
            last_sent_at: Cell::new(0),
        })
    }

    /// Runs `f` on the watchers, read from the sockets first if this
    /// instance has not yet.
    fn with_watchers<R>(&self, state: &State, f: impl FnOnce(&mut Vec<Watcher>) -> R) -> R {
        let mut watchers = self.watchers.borrow_mut();
        let watchers = watchers.get_or_insert_with(|| {
            state
                .get_websockets()
                .into_iter()
                .filter_map(|ws| {
                    let tags = Tags::of(state, &ws)?;
                    Some(Watcher {
                        ws,
                        tags,
                        counters: None,
                    })
                })
                .collect()
        });
        f(watchers)
    }

    /// How many watchers are connected.
    pub fn watchers(&self, state: &State) -> usize {
        self.with_watchers(state, |watchers| watchers.len())
    }

    /// The number of the newest event published.
    pub fn last(&self) -> Result<u64, ApiError> {
        Ok(self.log.last()?)
    }

    /// What a watcher that saw every event up to `since` missed; `None`
    /// when that is gone, and it must start afresh.
    pub fn missed(&self, since: u64) -> Result<Option<Vec<Frame>>, ApiError> {
        Ok(match self.log.since(since)? {
            Resume::Missed(frames) => Some(frames),
            Resume::Gap => None,
        })
    }

    /// Accepts a new watcher with what its token grants, sends it its
    /// `hello` and what it missed (see [`Joining`]), and tells everyone who
    /// is there; answers the client's end of the socket. `invites`: whether
    /// it may invite others.
    pub fn accept(
        &self,
        state: &State,
        room: &str,
        joining: Joining<'_>,
        claims: Option<&Claims>,
        invites: bool,
    ) -> Result<WebSocket, ApiError> {
        // Read before the new socket is accepted, which then joins the list.
        let watchers = self.watchers(state);
        if watchers >= MAX_WATCHERS {
            return Err(ApiError::TooManyWatchers(watchers));
        }
        let pair = WebSocketPair::new()?;
        let id = random::id('w');
        let grant = Grant::of(claims);
        let name = claims.and_then(|claims| claims.name.clone());
        NameTag {
            from_token: name.is_some(),
            name: name.clone(),
        }
        .attach(&pair.server)?;
        // The room rides along, so the last watcher's leaving can name it.
        state.accept_websocket_with_tags(&pair.server, &[&id, room, &grant.tag()]);
        let resumed = matches!(joining, Joining::Resumed { .. });
        let (seen, history, recent, missed, gap) = match joining {
            Joining::Resumed { since, missed } => (since, &[][..], vec![], missed, None),
            Joining::Fresh { history, upto, gap } => {
                let recent = self.log.recent(upto)?;
                (
                    upto,
                    history,
                    recent,
                    self.published_after(upto, history)?,
                    gap,
                )
            }
        };
        let hello = Event::Hello {
            room,
            resumed,
            history,
            role: grant.role,
            name: name.as_deref(),
            invites,
        };
        // What is replayed counts as shown: the log bounds it.
        let last = self.last()?;
        let mut watcher = Watcher {
            ws: pair.server,
            tags: Tags {
                id,
                room: room.to_owned(),
                grant,
            },
            counters: Some(Counters::at(last)),
        };
        let gap = gap.map(|since| event::frame(&Event::Gap { since }.written().json, seen));
        let hello = event::hello_frame(&hello, seen, &recent);
        let mut sent = gap.iter().chain([&hello]).chain(&missed);
        if sent.all(|frame| watcher.send(frame)) {
            self.with_watchers(state, |watchers| watchers.push(watcher));
        }
        self.last_sent_at.set(clock::now_ms());
        self.presence(state, None);
        Ok(pair.client)
    }

    /// The frames published after `upto`, but for the messages `history`
    /// already holds (read while they came).
    fn published_after(&self, upto: u64, history: &[Message]) -> Result<Vec<Frame>, ApiError> {
        let Some(frames) = self.missed(upto)? else {
            return Ok(vec![]);
        };
        let held: Vec<String> = history
            .iter()
            .map(|message| Event::Message { message }.written().json)
            .collect();
        Ok(frames
            .into_iter()
            .filter(|frame| !held.iter().any(|event| frame.text.ends_with(&event[1..])))
            .collect())
    }

    /// Logs an event and sends it to every watcher; one whose token has
    /// expired gets its end instead.
    pub fn publish(&self, state: &State, event: &Written) -> Result<(), ApiError> {
        let frame = self.log.append(event)?;
        self.broadcast(state, &frame);
        Ok(())
    }

    /// Sends a frame to every watcher; one whose token has expired gets its
    /// end instead, and one let go leaves the list.
    fn broadcast(&self, state: &State, frame: &Frame) {
        let now = clock::now_ms();
        self.with_watchers(state, |watchers| {
            watchers.retain_mut(|watcher| match watcher.tags.grant.expired(now) {
                true => {
                    watcher.end(CloseReason::TokenExpired, frame.seq);
                    false
                }
                false => watcher.send(frame),
            })
        });
        self.last_sent_at.set(now);
    }

    /// Sends every watcher a frame of its own, outside the log: it carries
    /// the number of the newest event, which every watcher has been sent.
    fn tell(&self, state: &State, event: &Event<'_>) {
        let seq = self.log.last().unwrap_or_default();
        self.broadcast(state, &event::frame(&event.written().json, seq));
    }

    /// Runs `work` (a command the watchers see), sending them a heartbeat
    /// whenever nothing else went out for the heartbeat interval meanwhile.
    pub async fn beating<F: Future>(&self, state: &State, work: F) -> F::Output {
        let mut work = pin!(work);
        loop {
            let quiet = clock::now_ms().saturating_sub(self.last_sent_at.get());
            let wait = self.heartbeat_ms.saturating_sub(quiet).max(1);
            let beat = Delay::from(Duration::from_millis(wait));
            match select(work.as_mut(), beat).await {
                Either::Left((output, _)) => return output,
                Either::Right(_) => self.heartbeat(state),
            }
        }
    }

    /// Sends a heartbeat if the feed has been quiet for the interval, and
    /// lets go of the watchers that answered none of the last two.
    fn heartbeat(&self, state: &State) {
        let now = clock::now_ms();
        if now.saturating_sub(self.last_sent_at.get()) < self.heartbeat_ms {
            return;
        }
        let seq = self.log.last().unwrap_or_default();
        let frame = event::frame(&Event::Heartbeat.written().json, seq);
        let heartbeat_ms = self.heartbeat_ms;
        self.with_watchers(state, |watchers| {
            watchers.retain_mut(|watcher| {
                let asked_at = *watcher.counters(seq).asked_at.get_or_insert(now);
                if now.saturating_sub(asked_at) >= 2 * heartbeat_ms {
                    let _ = watcher.ws.close(
                        Some(NOT_ANSWERING),
                        Some("stopped answering: ack the heartbeats"),
                    );
                    return false;
                }
                watcher.send(&frame)
            })
        });
        self.last_sent_at.set(now);
    }

    /// Tells everyone who is on the feed; `leaving` is no longer.
    fn presence(&self, state: &State, leaving: Option<&str>) {
        let present: Vec<Present> = self.with_watchers(state, |watchers| {
            watchers
                .iter()
                .filter(|watcher| Some(watcher.tags.id.as_str()) != leaving)
                .filter(|watcher| watcher.ws.as_ref().ready_state() == web_sys::WebSocket::OPEN)
                .map(|watcher| Present {
                    role: watcher.tags.grant.role,
                    name: NameTag::of(&watcher.ws).name,
                })
                .collect()
        });
        self.tell(state, &Event::Presence { watchers: &present });
    }

    /// The room's token generation is now `generation`: the sockets of
    /// every other generation's tokens end.
    pub fn revoke(&self, state: &State, generation: Option<&str>) {
        let seq = self.log.last().unwrap_or_default();
        let ended = self.with_watchers(state, |watchers| {
            let before = watchers.len();
            watchers.retain_mut(|watcher| {
                let revoked = watcher.tags.grant.revoked(generation);
                if revoked {
                    watcher.end(CloseReason::Revoked, seq);
                }
                !revoked
            });
            watchers.len() < before
        });
        if ended {
            self.presence(state, None);
        }
    }

    /// Tells the watchers a command starts; answers its id.
    pub fn command_started(
        &self,
        state: &State,
        cmd: &str,
        source: Source,
        asked_by: Option<&str>,
    ) -> Result<String, ApiError> {
        let id = random::id('c');
        let started = Event::Command {
            id: &id,
            cmd,
            source,
            asked_by,
        };
        self.publish(state, &started.written())?;
        Ok(id)
    }

    /// Tells the watchers a piece of a command's output, as sandboxd cut it
    /// (at most `duet_wire::stream::OUTPUT_EVENT_BYTES`).
    pub fn command_output(
        &self,
        state: &State,
        id: &str,
        stream: &str,
        data: &str,
    ) -> Result<(), ApiError> {
        self.publish(state, &Event::Output { id, stream, data }.written())
    }

    /// Tells the watchers how a command ended, or why it could not run.
    /// `result` is its whole result when its output did not go out as it
    /// came (nobody watched when it started): then it goes out first.
    pub fn command_ended(
        &self,
        state: &State,
        id: &str,
        ended: Result<ExecEnd, &ApiError>,
        result: Option<&ExecResult>,
    ) -> Result<(), ApiError> {
        if let Some(result) = result {
            for (stream, text) in [
                (Stream::Stdout, &result.stdout),
                (Stream::Stderr, &result.stderr),
            ] {
                for data in duet_wire::stream::pieces(text) {
                    self.command_output(state, id, stream.name(), data)?;
                }
            }
        }
        let ended = match ended {
            Ok(ended) => ended,
            Err(e) => {
                self.command_output(state, id, Stream::Stderr.name(), &format!("{e}\n"))?;
                ExecEnd {
                    exit_code: -1,
                    ..ExecEnd::default()
                }
            }
        };
        let end = Event::CommandEnd {
            id,
            exit_code: ended.exit_code,
            truncated: ended.truncated,
            timed_out: ended.timed_out,
        };
        self.publish(state, &end.written())
    }

    /// Tells the watchers a piece of a job's output; with `bound`, the log
    /// then forgets what it keeps of the job beyond its newest output
    /// (`JOB_LOG_BYTES`).
    pub fn job_output(
        &self,
        state: &State,
        id: &str,
        data: &str,
        bound: bool,
    ) -> Result<(), ApiError> {
        self.publish(state, &Event::JobOutput { id, data }.written())?;
        if bound {
            let prefix = event::job_output_prefix(id);
            self.log.bound(&prefix, JOB_LOG_BYTES, JOB_LOG_EVENTS)?;
        }
        Ok(())
    }

    /// Tells every watcher the room was deleted or expired, closes its
    /// socket, and forgets the log.
    pub fn close(&self, state: &State, reason: CloseReason) -> Result<(), ApiError> {
        let seq = self.log.last().unwrap_or_default();
        self.with_watchers(state, |watchers| {
            for watcher in watchers.iter_mut() {
                watcher.end(reason, seq);
            }
            watchers.clear();
        });
        Ok(self.log.forget()?)
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
            let why =
                "the feed takes ack, name and ping frames; messages and commands go over HTTP";
            let _ = ws.close(Some(NOT_IN_PROTOCOL), Some(why));
            return;
        };
        if tags.grant.role < frame.needed() {
            let _ = ws.close(Some(BEYOND_ROLE), Some("a watcher may only acknowledge"));
            return;
        }
        match frame {
            FromWatcher::Ack { seq } => self.with_watchers(state, |watchers| {
                if let Some(watcher) = watchers.iter_mut().find(|w| w.tags.id == tags.id) {
                    let counters = watcher.counters(seq);
                    counters.acked = counters.acked.max(seq.min(counters.sent));
                    counters.asked_at = None;
                }
            }),
            FromWatcher::Ping => {
                let _ = ws.send_with_str(PONG);
            }
            FromWatcher::Name { name } => {
                let shown = NameTag::of(ws);
                let name = validate::shown_name(&name);
                if shown.from_token || shown.name == name {
                    return;
                }
                let renamed = NameTag {
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
        self.with_watchers(state, |watchers| watchers.retain(|w| w.tags.id != tags.id));
        self.presence(state, Some(&tags.id));
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
            NameTag::default(),
            NameTag {
                name: Some("tom t".into()),
                from_token: false,
            },
            NameTag {
                name: Some("sue".into()),
                from_token: true,
            },
        ] {
            assert_eq!(NameTag::read(&shown.text()), shown);
        }
        assert_eq!(NameTag::read(""), NameTag::default());
    }
}
