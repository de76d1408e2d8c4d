//! The live feed of a room as plain data: the events a watcher (anyone on
//! the feed, whatever their role) receives, what a watcher may send, and how
//! a browser presents its token.
//!
//! Every frame carries a `seq`. The events of the room's log (all but
//! `hello`, `gap`, `presence`, `heartbeat` and `closed`) each have their
//! own, room-wide and increasing; those five are the watcher's alone, and
//! carry the number of the last logged event sent before them. So the
//! largest `seq` a watcher received is always the one to resume from
//! (`?since=`, see [`since_of`]).
//!
//! Browsers cannot set headers on a WebSocket, so the token comes as a
//! subprotocol: the page offers `duet.v1` and `duet.auth.<token as
//! base64url>`, and the worker answers `duet.v1`. The token so never appears
//! in a URL, where logs would keep it.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::api::role::RoomRole;
use crate::api::shapes::{Approval, Message, Source};
use crate::api::ApiError;
use crate::approvals::policy::Policy;
use crate::files::Change;

/// The subprotocol every watcher offers, and the one the worker answers.
pub const PROTOCOL: &str = "duet.v1";

/// Why the feed closed a watcher's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// `DELETE /api/rooms/{roomId}`; every socket.
    Deleted,
    /// The room went unused for `ROOM_TTL_SECONDS`: its history or its
    /// sandbox was forgotten; every socket.
    Expired,
    /// The room's invites were revoked; the sockets of room tokens.
    Revoked,
    /// The socket's own room token expired.
    TokenExpired,
}

/// Someone on the feed, as the others see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Present {
    pub role: RoomRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a watcher receives, one JSON text frame each, with `seq` added.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event<'a> {
    /// First, on connecting: the watcher's own role and name, and whether
    /// it may invite others (an owner, in token mode). Resumed, it is all
    /// (what it missed follows); afresh, with the stored history and the
    /// logged events that show the room as the others see it (`recent`:
    /// the terminal's recent past, and an answer still being written).
    /// `recent` is added by [`hello_frame`].
    Hello {
        room: &'a str,
        resumed: bool,
        history: &'a [Message],
        role: RoomRole,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        invites: bool,
    },
    /// Before a fresh `hello`: what the watcher asked to resume after
    /// (`since`) is no longer in the log; it starts again from the `hello`.
    Gap { since: u64 },
    /// Who is on the feed, whenever that changes.
    Presence { watchers: &'a [Present] },
    /// While a command runs and nothing else went out for a while: to be
    /// acknowledged, as proof the watcher is still there.
    Heartbeat,
    /// A message as it is stored (a user's when the exchange starts, the
    /// agent's when it ends).
    Message { message: &'a Message },
    /// A piece of the agent's answer as the model writes it: what of round
    /// `round` (its first answer is 1) became visible since the last delta.
    /// The agent's message that ends the exchange is what counts.
    Delta {
        exchange: &'a str,
        round: usize,
        text: &'a str,
    },
    /// An exchange failed; its user message is not kept.
    Failed { error: &'a str },
    /// A command starts; `askedBy` is who asked, where known (the
    /// `userId` given, else the token's name, else an MCP client's name).
    #[serde(rename_all = "camelCase")]
    Command {
        id: &'a str,
        cmd: &'a str,
        source: Source,
        #[serde(skip_serializing_if = "Option::is_none")]
        asked_by: Option<&'a str>,
    },
    /// Output as it is produced.
    Output {
        id: &'a str,
        stream: &'a str,
        data: &'a str,
    },
    /// A command ended.
    #[serde(rename_all = "camelCase")]
    CommandEnd {
        id: &'a str,
        exit_code: i32,
        truncated: bool,
        timed_out: bool,
    },
    /// A job started (`jobs`): the job as `GET …/jobs/{jobId}` shows it,
    /// without its output.
    Job { job: &'a RawValue },
    /// A piece of a job's output, stdout and stderr as printed (at most
    /// 16 KiB of text, as sandboxd cut it).
    JobOutput { id: &'a str, data: &'a str },
    /// A job ended: the job, with its state, exit code and end.
    JobEnd { job: &'a RawValue },
    /// A file of the workspace was written (with the size written) or
    /// deleted (`files`); `changedBy` is who, as a command's `askedBy`.
    #[serde(rename_all = "camelCase")]
    File {
        change: Change,
        path: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        changed_by: Option<&'a str>,
        source: Source,
    },
    /// Someone typed into the shared terminal (`crate::terminal`): at most
    /// once a second per writer, the bytes since, and the last line entered
    /// with Enter, unless the terminal did not echo it.
    TerminalInput {
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<&'a str>,
        bytes: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<&'a str>,
    },
    /// A command of the agent's waits for a writer's decision.
    Approval { approval: &'a Approval },
    /// A waiting command was approved, denied, or expired.
    Decided { approval: &'a Approval },
    /// The room's policy changed.
    Policy { policy: &'a Policy },
    /// Last: the room was deleted or expired, or the watcher's token ended;
    /// the socket is closed next.
    Closed { reason: CloseReason },
}

impl Event<'_> {
    /// Its `type`, as the log files it (and serde writes it, first).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Gap { .. } => "gap",
            Self::Presence { .. } => "presence",
            Self::Heartbeat => "heartbeat",
            Self::Message { .. } => "message",
            Self::Delta { .. } => "delta",
            Self::Failed { .. } => "failed",
            Self::Command { .. } => "command",
            Self::Output { .. } => "output",
            Self::CommandEnd { .. } => "command_end",
            Self::Job { .. } => "job",
            Self::JobOutput { .. } => "job_output",
            Self::JobEnd { .. } => "job_end",
            Self::File { .. } => "file",
            Self::TerminalInput { .. } => "terminal_input",
            Self::Approval { .. } => "approval",
            Self::Decided { .. } => "decided",
            Self::Policy { .. } => "policy",
            Self::Closed { .. } => "closed",
        }
    }

    /// Written once, as the log keeps it and the sockets get it.
    pub fn written(&self) -> Written {
        Written {
            kind: self.kind(),
            json: serde_json::to_string(self).expect("events serialize"),
        }
    }
}

/// An event written: its kind, and its JSON object (`type` first). The
/// DuetAgent sends its events to the Sandbox object so, a line each
/// ([`Written::line`]), and the kind is never read back out of the JSON.
#[derive(Debug, PartialEq, Eq)]
pub struct Written {
    pub kind: &'static str,
    pub json: String,
}

/// The kinds of the events the DuetAgent publishes, so that a line of
/// another names none.
const PUBLISHED: [&str; 6] = [
    "message", "delta", "failed", "approval", "decided", "policy",
];

impl Written {
    /// One line of a publish call: the kind, a space, the JSON (which has
    /// no raw newline).
    pub fn line(&self) -> String {
        format!("{} {}", self.kind, self.json)
    }

    /// A line of a publish call; `None` for one that is not.
    pub fn read(line: &str) -> Option<Self> {
        let (kind, json) = line.split_once(' ')?;
        let kind = PUBLISHED.into_iter().find(|known| *known == kind)?;
        Some(Self {
            kind,
            json: json.to_owned(),
        })
    }
}

/// What every `job_output` event of job `id` begins with, as written.
pub fn job_output_prefix(id: &str) -> String {
    format!(r#"{{"type":"job_output","id":"{id}","#)
}

/// An event numbered for the watchers: its `seq`, and the text a socket
/// is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub seq: u64,
    pub text: String,
}

/// The frame of an event (its JSON object) numbered `seq`.
pub fn frame(event: &str, seq: u64) -> Frame {
    Frame {
        seq,
        text: format!("{{\"seq\":{seq},{}", &event[1..]),
    }
}

/// The frame of a `hello` numbered `seq`, its `recent` the frames given,
/// spliced in as the log keeps them: parsing them only to write them again
/// would cost time and the upload code.
pub fn hello_frame(hello: &Event<'_>, seq: u64, recent: &[Frame]) -> Frame {
    let frame = frame(&hello.written().json, seq);
    let open = &frame.text[..frame.text.len() - 1];
    let recent: Vec<&str> = recent.iter().map(|frame| frame.text.as_str()).collect();
    Frame {
        seq,
        text: format!("{open},\"recent\":[{}]}}", recent.join(",")),
    }
}

/// The number a watcher resumes after, from the feed URL's `since`;
/// `None` to join afresh.
pub fn since_of(url: &str) -> Result<Option<u64>, ApiError> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(None);
    };
    let Some(since) = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="))
    else {
        return Ok(None);
    };
    since.parse().map(Some).map_err(|_| {
        ApiError::field(
            "since",
            "must be the seq of a frame received: a whole number",
        )
    })
}

/// What a watcher may send, and the role each needs.
/// Messages and commands are not among them: those go over HTTP.
#[derive(Debug, PartialEq, Eq)]
pub enum FromWatcher {
    /// What it has shown, which is how a slow watcher is told from a fast
    /// one.
    Ack { seq: u64 },
    /// The name to show it by, when its token gives none.
    Name { name: String },
    /// A keep-alive written otherwise than the exact text the runtime
    /// answers by itself (`{"type": "ping"}`, with a space): answered
    /// `pong` all the same.
    Ping,
}

impl FromWatcher {
    /// The role it takes to send this frame.
    pub fn needed(&self) -> RoomRole {
        match self {
            Self::Ack { .. } | Self::Ping => RoomRole::Watcher,
            // A name shows in everyone's list of who is there; watchers are
            // named by their invite, if at all.
            Self::Name { .. } => RoomRole::Writer,
        }
    }

    /// Parses a text frame; `None` for anything that is not one of the
    /// protocol's.
    pub fn parse(text: &str) -> Option<Self> {
        // Read through a `Value`, whose reader the upload has anyway.
        let frame: serde_json::Value = serde_json::from_str(text).ok()?;
        match (frame["type"].as_str()?, frame.get("seq"), frame.get("name")) {
            ("ack", Some(seq), None) => Some(Self::Ack { seq: seq.as_u64()? }),
            ("name", None, Some(name)) => Some(Self::Name {
                name: name.as_str()?.to_owned(),
            }),
            ("ping", None, None) => Some(Self::Ping),
            _ => None,
        }
    }
}

/// Refuses an upgrade to the feed that is not one: no `Upgrade: websocket`
/// (426), or a WebSocket that does not offer [`PROTOCOL`] (400), which the
/// answer could not name without breaking the handshake.
pub fn check_upgrade(upgrade: Option<&str>, protocols: Option<&str>) -> Result<(), ApiError> {
    check_upgrade_to(PROTOCOL, upgrade, protocols)
}

/// As [`check_upgrade`], to a socket that speaks `protocol`.
pub fn check_upgrade_to(
    protocol: &'static str,
    upgrade: Option<&str>,
    protocols: Option<&str>,
) -> Result<(), ApiError> {
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::NotAWebSocket);
    }
    if !protocols.is_some_and(|header| header.split(',').any(|p| p.trim() == protocol)) {
        return Err(ApiError::NoSubprotocol(protocol));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::shapes::Role;

    #[test]
    fn frames_carry_the_watchers_sequence_number_first() {
        let e = Event::CommandEnd {
            id: "c1",
            exit_code: 2,
            truncated: false,
            timed_out: true,
        };
        assert_eq!(
            frame(&e.written().json, 7).text,
            r#"{"seq":7,"type":"command_end","id":"c1","exitCode":2,"truncated":false,"timedOut":true}"#
        );
        let m = Message {
            role: Role::User,
            user_id: Some("ana".into()),
            text: "hi".into(),
            ts: 5,
        };
        assert_eq!(
            frame(&Event::Message { message: &m }.written().json, 1).text,
            r#"{"seq":1,"type":"message","message":{"role":"user","userId":"ana","text":"hi","ts":5}}"#
        );
        let delta = Event::Delta {
            exchange: "x1",
            round: 2,
            text: "Let me",
        };
        assert_eq!(
            frame(&delta.written().json, 4).text,
            r#"{"seq":4,"type":"delta","exchange":"x1","round":2,"text":"Let me"}"#
        );
        let output = Event::Output {
            id: "c1",
            stream: "stdout",
            data: "1\n",
        };
        assert_eq!(
            frame(&output.written().json, 2).text,
            r#"{"seq":2,"type":"output","id":"c1","stream":"stdout","data":"1\n"}"#
        );
    }

    #[test]
    fn an_event_names_its_kind_as_serde_writes_its_type() {
        let m = Message {
            role: Role::Agent,
            user_id: None,
            text: "hi".into(),
            ts: 1,
        };
        let events = [
            Event::Heartbeat,
            Event::Gap { since: 9 },
            Event::Message { message: &m },
            Event::Failed { error: "no" },
            Event::CommandEnd {
                id: "c1",
                exit_code: 0,
                truncated: false,
                timed_out: false,
            },
            Event::Closed {
                reason: CloseReason::Deleted,
            },
            Event::File {
                change: Change::Written,
                path: "src/a.rs",
                size: Some(3),
                changed_by: None,
                source: Source::Mcp,
            },
        ];
        for event in events {
            let written = event.written();
            let json: serde_json::Value = serde_json::from_str(&written.json).unwrap();
            assert_eq!(json["type"], written.kind);
            assert!(written
                .json
                .starts_with(&format!(r#"{{"type":"{}""#, written.kind)));
        }
        let job = RawValue::from_string(r#"{"id":"j1"}"#.into()).unwrap();
        for event in [
            Event::Job { job: &job },
            Event::JobOutput {
                id: "j1",
                data: "1\n",
            },
            Event::JobEnd { job: &job },
        ] {
            let written = event.written();
            assert!(written
                .json
                .starts_with(&format!(r#"{{"type":"{}","#, written.kind)));
        }
        let output = Event::JobOutput {
            id: "j1",
            data: "x",
        }
        .written()
        .json;
        assert!(output.starts_with(&job_output_prefix("j1")), "{output}");
        assert!(!output.starts_with(&job_output_prefix("j")));
        let gap = Event::Gap { since: 9 }.written().json;
        assert_eq!(frame(&gap, 20).text, r#"{"seq":20,"type":"gap","since":9}"#);
        assert_eq!(frame(&gap, 20).seq, 20);
    }

    #[test]
    fn a_published_line_reads_back_as_written_and_only_then() {
        let m = Message {
            role: Role::User,
            user_id: None,
            text: "a b\nc".into(),
            ts: 1,
        };
        let written = Event::Message { message: &m }.written();
        assert_eq!(Written::read(&written.line()), Some(written));
        for line in ["", "message", "hello {}", "closed {}", "x {}"] {
            assert_eq!(Written::read(line), None, "{line}");
        }
    }

    #[test]
    fn a_hello_carries_the_recent_frames_as_they_are() {
        let hello = Event::Hello {
            room: "r",
            resumed: false,
            history: &[],
            role: RoomRole::Watcher,
            name: None,
            invites: false,
        };
        let recent = [Frame {
            seq: 3,
            text: r#"{"seq":3,"type":"command","id":"c1","cmd":"ls","source":"exec"}"#.into(),
        }];
        let frame = hello_frame(&hello, 4, &recent);
        assert_eq!(
            frame.text,
            r#"{"seq":4,"type":"hello","room":"r","resumed":false,"history":[],"role":"watcher","invites":false,"recent":[{"seq":3,"type":"command","id":"c1","cmd":"ls","source":"exec"}]}"#
        );
        let parsed: serde_json::Value =
            serde_json::from_str(&hello_frame(&hello, 0, &[]).text).unwrap();
        assert_eq!(parsed["recent"], serde_json::json!([]));
    }

    #[test]
    fn a_watcher_resumes_after_the_since_of_its_url() {
        let at = |url: &str| since_of(url).map_err(|e| e.status());
        assert_eq!(at("https://w/api/rooms/r/live"), Ok(None));
        assert_eq!(at("https://w/api/rooms/r/live?since=0"), Ok(Some(0)));
        assert_eq!(at("https://w/api/rooms/r/live?x=1&since=42"), Ok(Some(42)));
        assert_eq!(at("https://w/api/rooms/r/live?x=1"), Ok(None));
        for bad in [
            "?since=",
            "?since=-1",
            "?since=1.5",
            "?since=soon",
            "?since=99999999999999999999",
        ] {
            let url = format!("https://w/api/rooms/r/live{bad}");
            assert_eq!(at(&url), Err(400), "{bad}");
        }
    }

    #[test]
    fn the_last_event_says_why_the_feed_closed() {
        let closed = Event::Closed {
            reason: CloseReason::Deleted,
        };
        assert_eq!(
            frame(&closed.written().json, 3).text,
            r#"{"seq":3,"type":"closed","reason":"deleted"}"#
        );
        let expired = Event::Closed {
            reason: CloseReason::Expired,
        };
        assert_eq!(
            expired.written().json,
            r#"{"type":"closed","reason":"expired"}"#
        );
    }

    #[test]
    fn watchers_send_acks_names_and_pings_only() {
        assert_eq!(
            FromWatcher::parse(r#"{"type":"ack","seq":12}"#),
            Some(FromWatcher::Ack { seq: 12 })
        );
        assert_eq!(
            FromWatcher::parse(r#"{"type":"name","name":"ana \u00fc"}"#),
            Some(FromWatcher::Name {
                name: "ana ü".into()
            })
        );
        // The exact text is the runtime's to answer; any other spelling is ours.
        for ping in [
            r#"{"type": "ping"}"#,
            r#"{ "type" : "ping" }"#,
            "{\"type\":\"ping\"}\n",
        ] {
            assert_eq!(FromWatcher::parse(ping), Some(FromWatcher::Ping), "{ping}");
        }
        for other in [
            r#"{"type":"ping","seq":1}"#,
            r#"{"type":"say","text":"x"}"#,
            r#"{"type":"exec","cmd":"touch x"}"#,
            r#"{"type":"message","text":"x"}"#,
            "not json",
            r#"{"type":"ack"}"#,
            r#"{"type":"ack","seq":1,"name":"x"}"#,
            r#"{"type":"name","name":5}"#,
            r#"{"type":"name"}"#,
        ] {
            assert_eq!(FromWatcher::parse(other), None, "{other}");
        }
    }

    #[test]
    fn an_upgrade_must_be_a_websocket_offering_duet_v1() {
        let status = |upgrade, protocols| check_upgrade(upgrade, protocols).map_err(|e| e.status());
        assert_eq!(status(Some("websocket"), Some("duet.v1")), Ok(()));
        assert_eq!(status(Some("WebSocket"), Some("chat, duet.v1")), Ok(()));
        assert_eq!(status(None, Some("duet.v1")), Err(426));
        assert_eq!(status(Some("h2c"), Some("duet.v1")), Err(426));
        assert_eq!(status(Some("websocket"), None), Err(400));
        assert_eq!(status(Some("websocket"), Some("chat")), Err(400));
        assert_eq!(
            status(Some("websocket"), Some("duet.v2, duet.v1x")),
            Err(400)
        );
    }

    #[test]
    fn the_feed_is_offered_by_its_subprotocol() {
        assert!(check_upgrade(Some("websocket"), Some("duet.v1, duet.auth.czNjcmV0")).is_ok());
        assert!(check_upgrade(Some("websocket"), Some("chat, superchat")).is_err());
        assert!(check_upgrade_to("duet.term.v1", Some("websocket"), Some("duet.term.v1")).is_ok());
    }

    #[test]
    fn watchers_may_only_acknowledge() {
        assert_eq!(FromWatcher::Ack { seq: 1 }.needed(), RoomRole::Watcher);
        let name = FromWatcher::Name { name: "ana".into() };
        assert_eq!(name.needed(), RoomRole::Writer);
    }
}
