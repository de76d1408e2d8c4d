//! A terminal emulator's screen as a [`duet_wire::terminal::Screen`]
//! carries it: escape sequences that redraw it on a terminal just reset,
//! and its text.
//!
//! The scrollback is printed line after line from the top of the reset
//! terminal (vt100's "basic" capture: text and SGR sequences only), the
//! visible rows after it, so the lines a real terminal scrolls out of view
//! are exactly the scrollback; then vt100's own redraw of the visible
//! screen (home, erase, rows, cursor, input modes) paints over the visible
//! rows. A full-screen program's screen is the alternate one: it has no
//! scrollback, so only it is drawn, on the receiving terminal's alternate
//! screen too, which it leaves when the program does.

use vt100::capture::{BasicFormattedCaptureRange, BasicFormattedCaptureState};

/// What switches a terminal to its alternate screen (and clears it).
const ALTERNATE_SCREEN: &str = "\x1b[?1049h";

/// The sequences that draw `screen` on a terminal of its size just reset.
pub fn data(screen: &vt100::Screen) -> String {
    let mut data = String::new();
    if screen.alternate_screen() {
        data.push_str(ALTERNATE_SCREEN);
    } else if screen.scrollback_len() > 0 {
        let mut lines = String::new();
        let mut state = BasicFormattedCaptureState::new();
        // Writing to a String does not fail.
        let _ = screen.write_contents_formatted_basic(
            &mut lines,
            BasicFormattedCaptureRange::Full(&mut state),
        );
        data.push_str(&with_crlf(&lines));
    }
    data.push_str(&screen.state_formatted());
    data
}

/// The visible screen as text, a line a row, trailing blanks (and blank
/// rows at the bottom) cut.
pub fn text(screen: &vt100::Screen) -> String {
    let (_, cols) = screen.size();
    let rows: Vec<String> = screen
        .rows(0, cols.get())
        .map(|row| row.trim_end().to_string())
        .collect();
    let mut text = rows.join("\n");
    text.truncate(text.trim_end_matches('\n').len());
    text
}

/// `lines` (text, SGR sequences and `\n`) with each `\n` as `\r\n`, taken
/// with the default background: a terminal fills the line a newline
/// scrolls in with the background then set.
fn with_crlf(lines: &str) -> String {
    let mut out = String::with_capacity(lines.len() + lines.len() / 32);
    // The parameters of the SGR that set the background, if not default.
    let mut background: Option<String> = None;
    let mut rest = lines;
    while let Some(at) = rest.find(['\x1b', '\n']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix('\n') {
            match &background {
                Some(set) => {
                    out.push_str("\x1b[49m\r\n\x1b[");
                    out.push_str(set);
                    out.push('m');
                }
                None => out.push_str("\r\n"),
            }
            rest = after;
        } else {
            let end = rest.find('m').map_or(rest.len(), |m| m + 1);
            let params = rest[..end]
                .trim_start_matches("\x1b[")
                .trim_end_matches('m');
            background = background_after(params, background);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// The background set after an SGR with `params`, from `background`.
fn background_after(params: &str, mut background: Option<String>) -> Option<String> {
    let params: Vec<&str> = params.split(';').collect();
    let mut i = 0;
    while i < params.len() {
        // An extended colour takes the parameters after it.
        let len = match (params[i], params.get(i + 1)) {
            ("38" | "48", Some(&"5")) => 3,
            ("38" | "48", Some(&"2")) => 5,
            _ => 1,
        };
        let param = &params[i..(i + len).min(params.len())];
        match param[0] {
            "" | "0" | "49" => background = None,
            "48" => background = Some(param.join(";")),
            code if matches!(code.parse::<u8>(), Ok(40..=47 | 100..=107)) => {
                background = Some(code.to_string());
            }
            _ => {}
        }
        i += len;
    }
    background
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU16;

    use super::*;

    const SCROLLBACK: usize = 1_000;

    fn parser(rows: u16, cols: u16) -> vt100::Parser {
        let size = |n| NonZeroU16::new(n).expect("a size");
        vt100::Parser::new(size(rows), size(cols), SCROLLBACK)
    }

    /// Everything a screen holds, scrollback and attributes included.
    fn everything(screen: &vt100::Screen) -> (String, (u16, u16), bool, bool) {
        let mut all = String::new();
        let mut state = BasicFormattedCaptureState::new();
        screen
            .write_contents_formatted_basic(&mut all, BasicFormattedCaptureRange::Full(&mut state))
            .expect("capture");
        (
            all,
            screen.cursor_position(),
            screen.alternate_screen(),
            screen.application_cursor(),
        )
    }

    /// A fresh terminal of the screen's size after `data` of it.
    fn replayed(screen: &vt100::Screen) -> vt100::Parser {
        let (rows, cols) = screen.size();
        let mut fresh = parser(rows.get(), cols.get());
        fresh.process(data(screen).as_bytes());
        fresh
    }

    #[test]
    fn a_screen_and_its_scrollback_are_drawn_again_as_they_are() {
        let mut term = parser(6, 20);
        for i in 0..40 {
            let line = format!("\x1b[3{}mline {i}\x1b[m plain\r\n", i % 8);
            term.process(line.as_bytes());
        }
        term.process(b"\x1b[44ma wrapped line longer than twenty\x1b[m\r\n$ ab");
        assert!(term.screen().scrollback_len() > 0);
        let fresh = replayed(term.screen());
        assert_eq!(everything(fresh.screen()), everything(term.screen()));
        assert_eq!(text(fresh.screen()), text(term.screen()));
        assert!(text(term.screen()).ends_with("\n$ ab"));
    }

    #[test]
    fn a_cleared_screen_starts_at_its_top() {
        let mut term = parser(5, 30);
        for i in 0..12 {
            term.process(format!("old {i}\r\n").as_bytes());
        }
        term.process(b"\x1b[2J\x1b[Htop-line\r\n$ ");
        assert_eq!(text(term.screen()), "top-line\n$");
        let fresh = replayed(term.screen());
        assert_eq!(text(fresh.screen()), "top-line\n$");
        assert_eq!(fresh.screen().cursor_position(), (1, 2));
        assert_eq!(everything(fresh.screen()), everything(term.screen()));
    }

    #[test]
    fn a_full_screen_program_is_drawn_on_the_alternate_screen() {
        let mut term = parser(4, 20);
        term.process(b"before\r\n$ vi\r\n\x1b[?1049h\x1b[?1h\x1b[H\x1b[2Jediting\x1b[3;1H~");
        let fresh = replayed(term.screen());
        assert_eq!(text(fresh.screen()), "editing\n\n~");
        assert_eq!(everything(fresh.screen()), everything(term.screen()));
        assert!(fresh.screen().alternate_screen());
    }

    #[test]
    fn newlines_are_taken_with_the_default_background() {
        assert_eq!(with_crlf("a\nb"), "a\r\nb");
        assert_eq!(
            with_crlf("\x1b[1;44mx\ny\x1b[m\nz"),
            "\x1b[1;44mx\x1b[49m\r\n\x1b[44my\x1b[m\r\nz"
        );
        assert_eq!(
            with_crlf("\x1b[48;5;200mx\n"),
            "\x1b[48;5;200mx\x1b[49m\r\n\x1b[48;5;200m"
        );
        assert_eq!(
            with_crlf("\x1b[48;2;1;2;3mx\x1b[38;5;44mx\n"),
            "\x1b[48;2;1;2;3mx\x1b[38;5;44mx\x1b[49m\r\n\x1b[48;2;1;2;3m"
        );
        assert_eq!(with_crlf("\x1b[38;5;44mx\n"), "\x1b[38;5;44mx\r\n");
        assert_eq!(with_crlf("\x1b[104mx\x1b[49m\n"), "\x1b[104mx\x1b[49m\r\n");
    }
}
