//! sandboxd's streamed exec (`POST /v1/sandboxes/{name}/exec/stream`), as
//! plain data: NDJSON lines of `start`, `output` and `end` events, the last
//! being exactly the `/exec` answer with a `type` in front. The Sandbox
//! object uses it while the room has watchers, so they see output as it is
//! printed; the exec answer it gives back stays what `/exec` would give.

use serde::Deserialize;

/// One line of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Start,
    Output {
        stream: String,
        data: String,
    },
    /// The command's result, as `/exec` answers it.
    End(String),
}

const END_PREFIX: &str = r#"{"type":"end","#;

/// Parses one line (without its newline).
pub fn parse(line: &str) -> Result<Line, String> {
    if let Some(rest) = line.strip_prefix(END_PREFIX) {
        return Ok(Line::End(format!("{{{rest}")));
    }
    // A plain struct, not a tagged enum, which would buffer what it reads.
    #[derive(Deserialize)]
    struct Event {
        #[serde(rename = "type")]
        kind: String,
        stream: Option<String>,
        data: Option<String>,
    }
    let event: Event =
        serde_json::from_str(line).map_err(|e| format!("unexpected line from sandboxd: {e}"))?;
    match (event.kind.as_str(), event.stream, event.data) {
        ("start", _, _) => Ok(Line::Start),
        ("output", Some(stream), Some(data)) => Ok(Line::Output { stream, data }),
        (kind, _, _) => Err(format!("unexpected line from sandboxd: a {kind:?} event")),
    }
}

/// Splits a byte stream into lines as chunks arrive.
#[derive(Default)]
pub struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// Feeds a chunk; answers the lines it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut lines = vec![];
        while let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=at).collect();
            lines.push(String::from_utf8_lossy(&line[..at]).into_owned());
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_the_end_as_the_exec_answer() {
        assert_eq!(
            parse(r#"{"type":"start","command":"ls","timestamp":"t"}"#),
            Ok(Line::Start)
        );
        assert_eq!(
            parse(r#"{"type":"output","stream":"stderr","data":"é\n"}"#),
            Ok(Line::Output {
                stream: "stderr".into(),
                data: "é\n".into()
            })
        );
        assert_eq!(
            parse(r#"{"type":"end","stdout":"1\n","exitCode":0}"#),
            Ok(Line::End(r#"{"stdout":"1\n","exitCode":0}"#.into()))
        );
        assert!(parse("not json").is_err());
        assert!(parse(r#"{"type":"other"}"#).is_err());
    }

    #[test]
    fn lines_are_split_whatever_the_chunks() {
        let mut lines = Lines::default();
        assert!(lines.feed(b"{\"a\":").is_empty());
        assert_eq!(lines.feed(b"1}\n{\"b\""), ["{\"a\":1}"]);
        assert_eq!(lines.feed(b":2}\n\n"), ["{\"b\":2}", ""]);
        let text = "é".as_bytes();
        assert!(lines.feed(&text[..1]).is_empty());
        assert_eq!(lines.feed(&[&text[1..], b"\n"].concat()), ["é"]);
    }
}
