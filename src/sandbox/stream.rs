//! Reading sandboxd's streamed exec (`POST /v1/sandboxes/{name}/exec/stream`)
//! as it arrives: its body cut into lines, each read as the `duet_wire`
//! crate says (`start`, `output`, and the `end`, which is exactly the `/exec`
//! answer with a `type` in front). The Sandbox object uses it while the room
//! has watchers, so they see output as it is printed; the exec answer it
//! gives back stays what `/exec` would give.

use duet_wire::stream::{self, Line};

/// Reads one line (without its newline).
pub fn parse(line: &str) -> Result<Line, String> {
    stream::read(line, |line| serde_json::from_str(line))
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
    fn lines_are_read_with_json() {
        assert_eq!(
            parse(r#"{"type":"output","stream":"stderr","data":"é\n"}"#),
            Ok(Line::Output {
                stream: duet_wire::Stream::Stderr,
                data: "é\n".into()
            })
        );
        assert!(parse("not json").is_err());
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
