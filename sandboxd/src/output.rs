//! Capture of one command's stdout or stderr.
//!
//! The shell's pipes are shared by every command of a session, so the end of
//! one command's output is recognised by a marker the wrapper script prints
//! after it (see `session`). A [`Capture`] scans the bytes for that marker,
//! keeps at most `limit` bytes of what came before it, and counts everything
//! past the limit as truncated while still consuming it, so a flood never
//! blocks the command and never grows memory.
//!
//! What it keeps becomes text as it arrives: valid UTF-8 as is, invalid
//! bytes as U+FFFD, a character split across reads once its last byte
//! comes, and the text is capped at `limit` bytes too (replacements are
//! longer than the bytes they replace). A tap, if given, is handed each
//! piece of text as it is added, so pieces handed out add up to exactly the
//! final text, with no marker ever among them.

/// Output of one stream, ready for the response.
#[derive(Debug, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    pub truncated: bool,
    /// What followed the marker on its line (the exit status on stdout);
    /// `None` when the marker never came.
    pub trailer: Option<String>,
}

/// Receives each piece of text a capture adds, as it is added.
pub type Tap = Box<dyn FnMut(&str) + Send>;

#[derive(Debug)]
enum Scan {
    /// Looking for the marker.
    Searching,
    /// Marker seen; collecting the rest of its line.
    Trailer(Vec<u8>),
    /// Marker line complete; anything after it is not this command's.
    Done(Vec<u8>),
}

pub struct Capture {
    marker: Vec<u8>,
    limit: usize,
    /// Output bytes kept so far.
    kept: usize,
    /// The kept bytes as text, apart from `partial`.
    text: String,
    /// Kept bytes ending in a character whose remaining bytes have not come
    /// yet.
    partial: Vec<u8>,
    /// Tail bytes that might be the start of a marker split across reads.
    held: Vec<u8>,
    truncated: bool,
    scan: Scan,
    tap: Option<Tap>,
}

/// A trailer longer than this cannot be ours; stop collecting it.
const MAX_TRAILER: usize = 32;

impl Capture {
    pub fn new(marker: &[u8], limit: usize) -> Self {
        assert!(!marker.is_empty(), "marker must not be empty");
        Capture {
            marker: marker.to_vec(),
            limit,
            kept: 0,
            text: String::new(),
            partial: Vec::new(),
            held: Vec::new(),
            truncated: false,
            scan: Scan::Searching,
            tap: None,
        }
    }

    /// Hands every piece of text this capture adds to `tap` as well.
    pub fn tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// True once the marker and the rest of its line have been seen.
    pub fn is_done(&self) -> bool {
        matches!(self.scan, Scan::Done(_))
    }

    pub fn feed(&mut self, data: &[u8]) {
        match &mut self.scan {
            Scan::Done(_) => {}
            Scan::Trailer(trailer) => match data.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    trailer.extend_from_slice(&data[..end]);
                    self.scan = Scan::Done(std::mem::take(trailer));
                }
                None if trailer.len() + data.len() > MAX_TRAILER => {
                    self.scan = Scan::Done(std::mem::take(trailer));
                }
                None => trailer.extend_from_slice(data),
            },
            Scan::Searching => {
                let mut held = std::mem::take(&mut self.held);
                held.extend_from_slice(data);
                if let Some(at) = find(&held, &self.marker) {
                    self.keep(&held[..at]);
                    self.scan = Scan::Trailer(Vec::new());
                    self.feed(&held[at + self.marker.len()..]);
                } else {
                    // Only an end that begins the marker can still turn
                    // out to be one; the rest is output now, so a watcher
                    // sees it while the command runs.
                    let safe = held.len() - marker_start_at_end(&held, &self.marker);
                    self.keep(&held[..safe]);
                    held.drain(..safe);
                    self.held = held;
                }
            }
        }
    }

    /// Keeps what fits of `bytes` and turns it into text, all but a
    /// character still incomplete at the end.
    fn keep(&mut self, bytes: &[u8]) {
        let room = self.limit - self.kept;
        let cut = bytes.len() > room;
        let bytes = &bytes[..bytes.len().min(room)];
        self.kept += bytes.len();
        let mut partial = std::mem::take(&mut self.partial);
        partial.extend_from_slice(bytes);
        let complete = partial.len() - incomplete_utf8_tail(&partial);
        self.add_text(&String::from_utf8_lossy(&partial[..complete]));
        partial.drain(..complete);
        self.partial = partial;
        if cut {
            self.truncated = true;
        }
    }

    /// Appends what fits of `text` and hands it to the tap. Nothing is
    /// added once the output was cut, so the text never skips a part.
    fn add_text(&mut self, text: &str) {
        if self.truncated {
            return;
        }
        let room = self.limit - self.text.len();
        let text = if text.len() > room {
            self.truncated = true;
            &text[..text.floor_char_boundary(room)]
        } else {
            text
        };
        if text.is_empty() {
            return;
        }
        self.text.push_str(text);
        if let Some(tap) = &mut self.tap {
            tap(text);
        }
    }

    pub fn finish(mut self) -> Captured {
        let trailer = match std::mem::replace(&mut self.scan, Scan::Searching) {
            Scan::Done(t) | Scan::Trailer(t) => Some(String::from_utf8_lossy(&t).into_owned()),
            Scan::Searching => {
                // No marker came (the shell died): what is held is output.
                let held = std::mem::take(&mut self.held);
                self.keep(&held);
                None
            }
        };
        // A character left incomplete by the cut is not bad input; one left
        // incomplete by the output itself is.
        let partial = std::mem::take(&mut self.partial);
        self.add_text(&String::from_utf8_lossy(&partial));
        Captured {
            text: self.text,
            truncated: self.truncated,
            trailer,
        }
    }
}

/// First occurrence of `needle`; a quick scan for its first byte keeps this
/// fast on floods.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(offset) = haystack[from..].iter().position(|&b| b == first) {
        let at = from + offset;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Length of the longest end of `bytes` that is the start of `marker`
/// (shorter than the marker: a whole one would have been found).
fn marker_start_at_end(bytes: &[u8], marker: &[u8]) -> usize {
    (1..marker.len().min(bytes.len() + 1))
        .rev()
        .find(|&n| bytes.ends_with(&marker[..n]))
        .unwrap_or(0)
}

/// Length of an incomplete UTF-8 sequence at the end of `bytes` (0 if none).
pub fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKER: &[u8] = b"@@END@@";

    fn capture_chunks(chunks: &[&[u8]], limit: usize) -> (Captured, bool) {
        let mut c = Capture::new(MARKER, limit);
        for chunk in chunks {
            c.feed(chunk);
        }
        let done = c.is_done();
        (c.finish(), done)
    }

    #[test]
    fn marker_after_output_without_newline() {
        let (out, done) = capture_chunks(&[b"abc@@END@@0\n"], 100);
        assert!(done);
        assert_eq!(out.text, "abc");
        assert_eq!(out.trailer.as_deref(), Some("0"));
        assert!(!out.truncated);
    }

    #[test]
    fn marker_split_across_every_byte_boundary() {
        let stream = b"hello\nworld@@END@@127\nleftover";
        for split in 0..stream.len() {
            let (out, done) = capture_chunks(&[&stream[..split], &stream[split..]], 100);
            assert!(done, "split at {split}");
            assert_eq!(out.text, "hello\nworld", "split at {split}");
            assert_eq!(out.trailer.as_deref(), Some("127"), "split at {split}");
        }
    }

    #[test]
    fn byte_at_a_time() {
        let stream = b"x@@END@@@@END@@42\n";
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        let (out, done) = capture_chunks(&chunks, 100);
        assert!(done);
        assert_eq!(out.text, "x");
        assert_eq!(out.trailer.as_deref(), Some("@@END@@42"));
    }

    #[test]
    fn partial_marker_is_output_when_no_marker_comes() {
        let (out, done) = capture_chunks(&[b"data @@END"], 100);
        assert!(!done);
        assert_eq!(out.text, "data @@END");
        assert_eq!(out.trailer, None);
    }

    #[test]
    fn bytes_after_the_marker_line_are_dropped() {
        let (out, _) = capture_chunks(&[b"a@@END@@1\n", b"late"], 100);
        assert_eq!(out.text, "a");
        assert_eq!(out.trailer.as_deref(), Some("1"));
    }

    #[test]
    fn output_past_the_limit_is_counted_but_not_kept() {
        let big = vec![b'z'; 10_000];
        let (out, done) = capture_chunks(&[&big, &big, b"@@END@@0\n"], 1000);
        assert!(done);
        assert_eq!(out.text.len(), 1000);
        assert!(out.truncated);
    }

    #[test]
    fn output_exactly_at_the_limit_is_not_truncated() {
        let (out, _) = capture_chunks(&[b"12345@@END@@0\n"], 5);
        assert_eq!(out.text, "12345");
        assert!(!out.truncated);
    }

    #[test]
    fn cut_never_splits_a_character() {
        // "aé€🌍" is 1 + 2 + 3 + 4 = 10 bytes.
        for limit in 0..=10 {
            let (out, _) = capture_chunks(&["aé€🌍b".as_bytes(), b"@@END@@0\n"], limit);
            let expected = match limit {
                0 => "",
                1..=2 => "a",
                3..=5 => "aé",
                6..=9 => "aé€",
                _ => "aé€🌍",
            };
            assert_eq!(out.text, expected, "limit {limit}");
            assert!(out.truncated, "limit {limit}");
        }
    }

    #[test]
    fn invalid_bytes_are_replaced_and_still_capped() {
        let (out, _) = capture_chunks(&[b"ok\xff@@END@@0\n"], 100);
        assert_eq!(out.text, "ok\u{FFFD}");
        assert!(!out.truncated);
        // Three invalid bytes become nine bytes of U+FFFD; cap at 4.
        let (out, _) = capture_chunks(&[b"\xff\xfe\xfd@@END@@0\n"], 4);
        assert_eq!(out.text, "\u{FFFD}");
        assert!(out.truncated);
    }

    /// Feeds `chunks` to a tapped capture; returns the pieces the tap got
    /// and the final result.
    fn tapped(chunks: &[&[u8]], limit: usize) -> (Vec<String>, Captured) {
        let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&pieces);
        let mut c = Capture::new(MARKER, limit);
        c.tap(Box::new(move |text: &str| {
            sink.lock().unwrap().push(text.to_string());
        }));
        for chunk in chunks {
            c.feed(chunk);
        }
        let out = c.finish();
        let pieces = pieces.lock().unwrap().clone();
        (pieces, out)
    }

    #[test]
    fn tapped_pieces_add_up_to_the_text_at_every_split_and_limit() {
        // 2-, 3- and 4-byte characters, an invalid byte, a truncated
        // sequence, and marker look-alikes before the marker.
        let stream = ["aé€🌍 @@EN x".as_bytes(), b"\xff \xe2\x82 @@END@@0\nlate"].concat();
        for limit in [0, 1, 3, 7, 12, 100] {
            for split in 0..stream.len() {
                let (pieces, out) = tapped(&[&stream[..split], &stream[split..]], limit);
                let (whole, _) = capture_chunks(&[&stream], limit);
                assert_eq!(out, whole, "split {split} limit {limit}");
                assert_eq!(pieces.concat(), out.text, "split {split} limit {limit}");
                assert!(pieces
                    .iter()
                    .all(|p| !p.is_empty() && !p.contains("@@END@@")));
            }
        }
    }

    #[test]
    fn a_character_split_across_reads_is_handed_out_whole() {
        let globe = "🌍".as_bytes();
        let mut chunks: Vec<&[u8]> = vec![b"0123456789"];
        chunks.extend(globe.chunks(1));
        chunks.push(b"0123456789@@END@@0\n");
        let (pieces, out) = tapped(&chunks, 100);
        assert_eq!(out.text, "0123456789🌍0123456789");
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), out.text);
        // Never completed: replaced at the end.
        let (pieces, _) = tapped(&[b"x", &globe[..2], b"@@END@@0\n"], 100);
        assert_eq!(pieces.concat(), "x\u{FFFD}");
    }

    #[test]
    fn the_tap_stops_at_the_limit() {
        let big = vec![b'z'; 10_000];
        let (pieces, out) = tapped(&[&big, &big, b"@@END@@0\n"], 1000);
        assert!(out.truncated);
        assert_eq!(pieces.concat().len(), 1000);
    }

    #[test]
    fn find_locates_first_occurrence() {
        assert_eq!(find(b"xx@@END@@", MARKER), Some(2));
        assert_eq!(find(b"@@EN@@END@@@@END@@", MARKER), Some(4));
        assert_eq!(find(b"@@END@", MARKER), None);
        assert_eq!(find(b"", MARKER), None);
        assert_eq!(find(b"abc", b""), None);
    }

    #[test]
    fn only_a_possible_marker_start_is_held_back() {
        assert_eq!(marker_start_at_end(b"1\n", MARKER), 0);
        assert_eq!(marker_start_at_end(b"x@", MARKER), 1);
        assert_eq!(marker_start_at_end(b"x@@EN", MARKER), 4);
        assert_eq!(marker_start_at_end(b"@@END@", MARKER), 6);
        assert_eq!(marker_start_at_end(b"@@E@", MARKER), 1);
        assert_eq!(marker_start_at_end(b"", MARKER), 0);
        let mut c = Capture::new(MARKER, 100);
        c.feed(b"1\n@@E");
        assert_eq!(c.text, "1\n");
    }

    #[test]
    fn incomplete_tail_lengths() {
        assert_eq!(incomplete_utf8_tail(b""), 0);
        assert_eq!(incomplete_utf8_tail(b"abc"), 0);
        assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_tail(&"é".as_bytes()[..1]), 1);
        assert_eq!(incomplete_utf8_tail(&"🌍".as_bytes()[..3]), 3);
        assert_eq!(incomplete_utf8_tail(&"a€".as_bytes()[..3]), 2);
        assert_eq!(incomplete_utf8_tail("🌍".as_bytes()), 0);
    }
}
