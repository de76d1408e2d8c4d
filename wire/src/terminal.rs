//! The room's shared terminal: one interactive login bash per sandbox under
//! a pseudo-terminal (`TERM=xterm-256color`), beside the command shell and
//! in the same workspace, as the same user. sandboxd starts it on first use
//! and again whenever it exits, keeps what it printed in a terminal
//! emulator (so a late joiner gets the screen as it is, a full-screen
//! program included, not a replay of bytes), and numbers everything it
//! printed, across restarts, by byte offset.
//!
//! ```text
//! GET  /v1/sandboxes/{name}/terminal                  -> Screen
//! GET  /v1/sandboxes/{name}/terminal/output?from=N    -> NDJSON of TerminalEvent
//! POST /v1/sandboxes/{name}/terminal/input            the bytes typed -> Typed
//! PUT  /v1/sandboxes/{name}/terminal/size             TerminalSize -> TerminalSize
//! ```
//!
//! A screen is taken at a byte offset of the output, between two output
//! events: a reader that starts there (`from = screen.offset`) gets every
//! byte printed after it exactly once. The output route streams from byte
//! `from`: what is kept of it at once (the newest
//! [`TERMINAL_OUTPUT_KEPT_BYTES`]; older is skipped, a `from` past the end
//! starts at the end, and the first event's `offset` says where it
//! starts), then as it is printed, for as long as the connection lasts.
//! The body ends, with no last line, only when the terminal does (its
//! sandbox destroyed, sandboxd shutting down).

use serde::{Deserialize, Serialize};

/// The newest output sandboxd keeps for readers that start behind.
pub const TERMINAL_OUTPUT_KEPT_BYTES: usize = 256 * 1024;
/// Lines of scrollback a [`Screen`] carries above the visible screen.
pub const SCROLLBACK_LINES: usize = 1_000;
/// The most one input request may carry.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The size a new terminal starts at, and the bounds of a size.
pub const DEFAULT_COLS: u16 = 80;
pub const DEFAULT_ROWS: u16 = 24;
pub const MAX_COLS: u16 = 500;
pub const MAX_ROWS: u16 = 200;

/// The terminal as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screen {
    pub cols: u16,
    pub rows: u16,
    /// Text with escape sequences that draws, on a terminal of this size
    /// just reset, the scrollback (at most [`SCROLLBACK_LINES`]), then the
    /// visible screen with its colours and attributes, and puts the cursor
    /// where it is.
    pub data: String,
    /// The visible screen as plain text, a line each, trailing blanks cut.
    pub text: String,
    /// The output offset the screen reflects: all printed before it.
    pub offset: u64,
}

/// One line of the output stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TerminalEvent {
    /// The `bytes` bytes printed from byte `offset`, as text of at most
    /// [`crate::stream::OUTPUT_EVENT_BYTES`]: bytes that are not UTF-8
    /// come as U+FFFD, and a character is never cut between two events.
    Output {
        offset: u64,
        bytes: u64,
        data: String,
    },
    /// The shell exited with `code` and a new one was started.
    Restarted { offset: u64, code: Option<i32> },
}

/// What an input request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Typed {
    pub bytes: u64,
    /// Whether what was typed shows, as the terminal stood when it was
    /// written: on at the shell's prompt and for a program the terminal
    /// echoes for; off at a password prompt (echo off for a reader of
    /// whole lines) and while another program reads keys one by one (an
    /// editor, a REPL, `ssh`), whether it shows them or not. What is typed
    /// unechoed is not to be recorded.
    pub echo: bool,
}

/// A terminal's size, in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    pub cols: u16,
    pub rows: u16,
}

impl TerminalSize {
    /// Whether it is one a terminal may take.
    pub fn fits(self) -> bool {
        (1..=MAX_COLS).contains(&self.cols) && (1..=MAX_ROWS).contains(&self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_sizes_read_as_written() {
        let output = TerminalEvent::Output {
            offset: 7,
            bytes: 2,
            data: "hi".into(),
        };
        assert_eq!(
            serde_json::to_string(&output).unwrap(),
            r#"{"type":"output","offset":7,"bytes":2,"data":"hi"}"#
        );
        let restarted: TerminalEvent =
            serde_json::from_str(r#"{"type":"restarted","offset":9,"code":0}"#).unwrap();
        assert_eq!(
            restarted,
            TerminalEvent::Restarted {
                offset: 9,
                code: Some(0)
            }
        );
        assert!(TerminalSize { cols: 80, rows: 24 }.fits());
        assert!(!TerminalSize { cols: 0, rows: 24 }.fits());
        assert!(!TerminalSize {
            cols: 80,
            rows: MAX_ROWS + 1
        }
        .fits());
    }
}
