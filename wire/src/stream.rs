//! A streamed command's body (`POST …/exec/stream`): one JSON object per
//! line, a `start`, `output` events as output comes, and an `end`, which is
//! exactly the `/exec` answer with a `type` in front. The output events of a
//! stream add up to the end's stdout and stderr.
//!
//! sandboxd writes [`Event`]s, borrowing what they carry; the worker
//! [`read`]s each line as a [`Line`]. It knows the end by its first bytes,
//! [`END_PREFIX`], and hands its result on as JSON without parsing it (it
//! may carry megabytes of output), so that the `type` comes first is part
//! of the format.

use std::fmt::Display;

use serde::{Deserialize, Serialize};

use crate::ExecResult;

/// The most text one output event carries: sandboxd cuts output into events
/// of at most this many bytes (between characters), and the worker passes
/// them on to the room's watchers as they are.
pub const OUTPUT_EVENT_BYTES: usize = 16 * 1024;

/// `text` in the pieces of at most [`OUTPUT_EVENT_BYTES`] that its output
/// events carry, cut between characters.
pub fn pieces(mut text: &str) -> impl Iterator<Item = &str> {
    std::iter::from_fn(move || {
        (!text.is_empty()).then(|| {
            let (piece, rest) = text.split_at(text.floor_char_boundary(OUTPUT_EVENT_BYTES));
            text = rest;
            piece
        })
    })
}

/// One line as sandboxd writes it.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event<'a> {
    Start {
        command: &'a str,
        /// When it started, as in [`ExecResult::timestamp`].
        timestamp: &'a str,
    },
    Output {
        stream: Stream,
        data: &'a str,
    },
    /// Exactly the answer `/exec` gives.
    End(&'a ExecResult),
}

/// Which of a command's outputs a piece of text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The name it has on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// How every end line starts.
pub const END_PREFIX: &str = r#"{"type":"end","#;

/// One line as the worker reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Start,
    Output {
        stream: Stream,
        data: String,
    },
    /// The command's result, as `/exec` answers it.
    End(String),
}

/// What a line other than the end holds, as parsed: a plain struct, not a
/// tagged enum, which would buffer what it reads.
#[derive(Deserialize)]
pub struct Fields {
    #[serde(rename = "type")]
    kind: String,
    stream: Option<Stream>,
    data: Option<String>,
}

/// Reads one line (without its newline); `parse` is the reader's JSON
/// parser, used for every line but the end.
pub fn read<E: Display>(
    line: &str,
    parse: impl FnOnce(&str) -> Result<Fields, E>,
) -> Result<Line, String> {
    if let Some(rest) = line.strip_prefix(END_PREFIX) {
        return Ok(Line::End(format!("{{{rest}")));
    }
    let fields = parse(line).map_err(|e| format!("unexpected line from sandboxd: {e}"))?;
    match (fields.kind.as_str(), fields.stream, fields.data) {
        ("start", _, _) => Ok(Line::Start),
        ("output", Some(stream), Some(data)) => Ok(Line::Output { stream, data }),
        (kind, _, _) => Err(format!("unexpected line from sandboxd: a {kind:?} event")),
    }
}
