//! The room's shared terminal: one interactive shell under a PTY, which
//! sandboxd runs and keeps the screen of (`duet_wire::terminal`), and which
//! every watcher of the room sees over a WebSocket of its own (`GET
//! …/terminal`, subprotocol [`PROTOCOL`]); writers type into it. The
//! Sandbox object holds the sockets and follows the terminal's output onto
//! them (`sandbox::terminal`). This is the pure core: the frames, what each
//! needs, and what of a writer's typing goes on record.
//!
//! What typing leaves on record: at most once a second per writer, a
//! `typing` frame to everyone on the terminal and a `terminal_input` event
//! in the room's log (who, how many bytes), and at each Enter the line
//! typed since the last one, as far as it can be told from the keys (the
//! shell's own editing, history and completion are not replayed). A line
//! typed while the terminal does not echo (a password prompt) is not
//! recorded, nor its bytes' text: only that something was typed.

use serde::Serialize;
use serde_json::Value;

use crate::api::role::RoomRole;

/// The audit's and MCP's name for typing into the terminal.
pub const WRITE_TERMINAL: &str = "write_terminal";
/// The terminal's subprotocol.
pub const PROTOCOL: &str = "duet.term.v1";
/// The largest frame a client may send: a paste of this size at most.
pub const MAX_FRAME_BYTES: usize = 16 * 1024;
/// How often a writer's typing is told, at most.
pub const TYPING_EVERY_MS: u64 = 1_000;
/// Characters of a typed line kept on record.
pub const LINE_CHARS: usize = 500;

/// What a client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromClient {
    /// Keys typed, as the terminal takes them (`\r` for Enter).
    Input(String),
    /// The size of the client's terminal, in cells.
    Resize { cols: u16, rows: u16 },
}

impl FromClient {
    /// A text frame, read; `None` for one the protocol does not know.
    pub fn parse(text: &str) -> Option<Self> {
        let frame: Value = serde_json::from_str(text).ok()?;
        match frame["type"].as_str()? {
            "input" => Some(Self::Input(frame["data"].as_str()?.to_owned())),
            "resize" => {
                let cell = |key: &str| u16::try_from(frame[key].as_u64()?).ok();
                Some(Self::Resize {
                    cols: cell("cols")?,
                    rows: cell("rows")?,
                })
            }
            _ => None,
        }
    }

    /// The role it takes: typing, and sizing the terminal everyone sees,
    /// are a writer's.
    pub fn needed(&self) -> RoomRole {
        RoomRole::Writer
    }
}

/// What a client is sent.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToClient<'a> {
    /// First: the terminal as it is now (see `duet_wire::terminal::Screen`).
    Screen { cols: u16, rows: u16, data: &'a str },
    /// What the terminal printed next.
    Output { data: &'a str },
    /// Someone types.
    Typing { name: &'a str, role: RoomRole },
    /// Last, before the socket is closed: why (`deleted`, `expired`,
    /// `revoked`, `asleep`).
    Closed { reason: &'a str },
}

impl ToClient<'_> {
    pub fn text(&self) -> String {
        serde_json::to_string(self).expect("frames serialize")
    }
}

/// One writer's typing, as far as the record goes: the bytes since it was
/// last told, and the line being typed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Typist {
    told_at: u64,
    bytes: u64,
    line: String,
}

/// What a writer's keys come to on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    /// Bytes typed since the last time.
    pub bytes: u64,
    /// The lines entered (an Enter each), if the terminal echoed them;
    /// `None` for one typed unechoed.
    pub lines: Vec<Option<String>>,
}

impl Typist {
    /// Takes `keys` typed at `now`, into a terminal that echoed them or not;
    /// answers what to tell, at most every [`TYPING_EVERY_MS`], or at once
    /// when a line was entered.
    pub fn typed(&mut self, keys: &str, echo: bool, now: u64) -> Option<Told> {
        self.bytes += keys.len() as u64;
        let mut lines = vec![];
        for c in keys.chars() {
            match c {
                '\r' | '\n' => lines.push(echo.then(|| std::mem::take(&mut self.line))),
                // Backspace and DEL erase; ^U the line.
                '\u{8}' | '\u{7f}' => _ = self.line.pop(),
                '\u{15}' | '\u{3}' => self.line.clear(),
                c if c.is_control() => {}
                c if self.line.chars().count() < LINE_CHARS => self.line.push(c),
                _ => {}
            }
        }
        if !echo {
            self.line.clear();
        }
        if lines.is_empty() && now < self.told_at + TYPING_EVERY_MS {
            return None;
        }
        self.told_at = now;
        Some(Told {
            bytes: std::mem::take(&mut self.bytes),
            lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_and_write_as_the_protocol_says() {
        assert_eq!(
            FromClient::parse(r#"{"type":"input","data":"ls\r"}"#),
            Some(FromClient::Input("ls\r".into()))
        );
        assert_eq!(
            FromClient::parse(r#"{"type":"resize","cols":120,"rows":40}"#),
            Some(FromClient::Resize {
                cols: 120,
                rows: 40
            })
        );
        for unknown in [
            r#"{"type":"resize","cols":70000,"rows":1}"#,
            r#"{"type":"input"}"#,
            r#"{"type":"ack"}"#,
            "not json",
        ] {
            assert_eq!(FromClient::parse(unknown), None, "{unknown}");
        }
        assert_eq!(
            ToClient::Typing {
                name: "ana",
                role: RoomRole::Writer
            }
            .text(),
            r#"{"type":"typing","name":"ana","role":"writer"}"#
        );
        assert_eq!(
            ToClient::Screen {
                cols: 80,
                rows: 24,
                data: "$ "
            }
            .text(),
            r#"{"type":"screen","cols":80,"rows":24,"data":"$ "}"#
        );
    }

    #[test]
    fn typing_is_told_once_a_second_and_at_each_line() {
        let mut ana = Typist::default();
        let told = ana.typed("e", true, 10_000).unwrap();
        assert_eq!(
            told,
            Told {
                bytes: 1,
                lines: vec![]
            }
        );
        assert_eq!(ana.typed("cho hix", true, 10_200), None);
        let told = ana.typed("\u{7f} there\r", true, 10_400).unwrap();
        assert_eq!(
            told,
            Told {
                bytes: 15,
                lines: vec![Some("echo hi there".into())]
            }
        );
        assert_eq!(ana.typed("l", true, 10_500), None);
        assert_eq!(ana.typed("s", true, 11_500).unwrap().bytes, 2);
    }

    #[test]
    fn a_line_typed_unechoed_is_not_kept() {
        let mut bo = Typist::default();
        let told = bo.typed("s3cret\r", false, 1_000).unwrap();
        assert_eq!(
            told,
            Told {
                bytes: 7,
                lines: vec![None]
            }
        );
        let told = bo.typed("ls\r", true, 1_100).unwrap();
        assert_eq!(
            told.lines,
            vec![Some("ls".into())],
            "nothing of the secret is left"
        );
        assert_eq!(
            bo.typed("x\u{3}y\r", true, 1_200).unwrap().lines,
            vec![Some("y".into())]
        );
    }
}
