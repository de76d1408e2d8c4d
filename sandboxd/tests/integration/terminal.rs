//! The shared terminal: a login bash under a real pseudo-terminal, its
//! output stream and screen, what is typed into it, its size, its restarts,
//! and that nothing of it outlives its sandbox.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::num::NonZeroU16;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use duet_wire::stream::OUTPUT_EVENT_BYTES;
use duet_wire::terminal::{
    Screen, TerminalEvent, TerminalSize, Typed, MAX_INPUT_BYTES, SCROLLBACK_LINES,
    TERMINAL_OUTPUT_KEPT_BYTES,
};
use serde_json::{json, Value};

use crate::archive::{file, gzip, put, tar_of};
use crate::harness::{live_session_members, read_head, timed, Server, SLACK};

/// How long any one thing the shell is asked to do may take to show.
const WAIT: Duration = Duration::from_secs(10);

fn path(name: &str, rest: &str) -> String {
    format!("/v1/sandboxes/{name}/terminal{rest}")
}

/// Types `bytes` as one input request, on a connection of its own.
fn type_in(server: &Server, name: &str, bytes: &str) -> Typed {
    let (status, body) = server.raw("POST", &path(name, "/input"), bytes.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("typed")
}

fn screen(server: &Server, name: &str) -> Screen {
    let (status, body) = server.json("GET", &path(name, ""), "");
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).expect("screen")
}

/// Polls the screen until `ready` holds for it (at most [`WAIT`]).
fn screen_when(server: &Server, name: &str, ready: impl Fn(&Screen) -> bool) -> Screen {
    let deadline = Instant::now() + WAIT;
    loop {
        let screen = screen(server, name);
        if ready(&screen) {
            return screen;
        }
        assert!(Instant::now() < deadline, "never came: {}", screen.text);
        thread::sleep(Duration::from_millis(20));
    }
}

/// A reader of the output stream, reading it in a thread of its own.
struct Watcher {
    seen: Arc<(Mutex<Seen>, Condvar)>,
    socket: TcpStream,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Seen {
    events: Vec<TerminalEvent>,
    /// The body ended.
    ended: bool,
}

impl Watcher {
    fn start(server: &Server, name: &str, from: u64) -> Watcher {
        let mut socket = TcpStream::connect(server.addr).expect("connect");
        let request = format!(
            "GET {}?from={from} HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n",
            path(name, "/output")
        );
        socket.write_all(request.as_bytes()).expect("send");
        let mut reader = BufReader::new(socket.try_clone().expect("clone"));
        let (status, head) = read_head(&mut reader);
        assert_eq!(status, 200, "{head}");
        assert!(head.contains("application/x-ndjson"), "{head}");
        let seen = Arc::new((Mutex::new(Seen::default()), Condvar::new()));
        let thread = thread::spawn({
            let seen = Arc::clone(&seen);
            move || read_events(reader, &seen)
        });
        Watcher {
            seen,
            socket,
            thread: Some(thread),
        }
    }

    /// Waits (at most [`WAIT`]) until `ready` holds for the events so far,
    /// and returns them.
    fn until(&self, ready: impl Fn(&[TerminalEvent]) -> bool) -> Vec<TerminalEvent> {
        let (seen, more) = &*self.seen;
        let deadline = Instant::now() + WAIT;
        let mut guard = seen.lock().unwrap();
        while !ready(&guard.events) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero() && !guard.ended,
                "never came; the output was: {:?}",
                text(&guard.events)
            );
            guard = more.wait_timeout(guard, left).unwrap().0;
        }
        guard.events.clone()
    }

    /// Waits until the output holds `needle`; returns all of it.
    fn text_with(&self, needle: &str) -> String {
        text(&self.until(|events| text(events).contains(needle)))
    }

    /// Whether the body ends within [`WAIT`].
    fn ends(&self) -> bool {
        let (seen, more) = &*self.seen;
        let guard = seen.lock().unwrap();
        let (guard, _) = more
            .wait_timeout_while(guard, WAIT, |seen| !seen.ended)
            .unwrap();
        guard.ended
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(Shutdown::Both);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads the chunked NDJSON body into `seen` until it ends or breaks.
fn read_events(mut reader: BufReader<TcpStream>, seen: &(Mutex<Seen>, Condvar)) {
    let mut pending = Vec::new();
    loop {
        let mut size = String::new();
        let size = match reader.read_line(&mut size) {
            Ok(1..) => usize::from_str_radix(size.trim(), 16).unwrap_or(0),
            _ => 0,
        };
        let mut chunk = vec![0; size + 2];
        if size == 0 || reader.read_exact(&mut chunk).is_err() {
            break;
        }
        pending.extend_from_slice(&chunk[..size]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event = serde_json::from_slice(&line[..end]).expect("an event a line");
            seen.0.lock().unwrap().events.push(event);
            seen.1.notify_all();
        }
    }
    seen.0.lock().unwrap().ended = true;
    seen.1.notify_all();
}

/// The text of the output events, checking that each follows the one
/// before and fits an event.
fn text(events: &[TerminalEvent]) -> String {
    let mut next = None;
    let mut text = String::new();
    for event in events {
        match event {
            TerminalEvent::Output {
                offset,
                bytes,
                data,
            } => {
                assert!(next.is_none_or(|next| next == *offset), "a gap at {offset}");
                assert!(data.len() <= OUTPUT_EVENT_BYTES);
                next = Some(offset + bytes);
                text.push_str(data);
            }
            TerminalEvent::Restarted { offset, .. } => {
                assert!(next.is_none_or(|next| next == *offset), "a gap at {offset}");
            }
        }
    }
    text
}

/// The number printed after `tag` (and before a `.`), if printed yet.
fn number_after(text: &str, tag: &str) -> Option<i32> {
    text.match_indices(tag).find_map(|(at, _)| {
        let (digits, rest) = text[at + tag.len()..].split_once('.')?;
        rest.starts_with("\r\n").then(|| digits.parse().ok())?
    })
}

/// Live processes of session `sid`, polled (at most 2 s) until there are
/// `count`.
fn members(sid: i32, count: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let members = live_session_members(sid);
        if members.len() == count || Instant::now() >= deadline {
            return members;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The shell's pid, as it prints it (its session's id too).
fn shell_pid(server: &Server, name: &str, watcher: &Watcher, tag: &str) -> i32 {
    type_in(server, name, &format!("echo {tag}$$.\r"));
    let events = watcher.until(|events| number_after(&text(events), tag).is_some());
    number_after(&text(&events), tag).expect("the pid")
}

#[test]
fn what_is_typed_runs_and_shows_in_the_stream_and_on_the_screen() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "t", 0);
    let typed = type_in(&server, "t", "echo term-$((6*7))\r");
    assert_eq!(typed.bytes, 19);
    watcher.text_with("term-42\r\n");
    let screen = screen_when(&server, "t", |s| s.text.lines().any(|l| l == "term-42"));
    assert_eq!((screen.cols, screen.rows), (80, 24));

    type_in(&server, "t", "tty; echo tty-$((1+1))\r");
    let text = watcher.text_with("tty-2\r\n");
    let tty = &text[text.find("/dev/pts/").expect("a pts") + "/dev/pts/".len()..];
    let (number, _) = tty.split_once("\r\n").expect("a line");
    assert!(number.parse::<u32>().is_ok(), "{tty:?}");
    // Its environment: a real terminal type, the workspace as home.
    type_in(&server, "t", "echo \"$TERM:$HOME:$PWD:\"${0#-}\r");
    let ws = server.workspace("t").display().to_string();
    watcher.text_with(&format!("xterm-256color:{ws}:{ws}:bash"));
}

#[test]
fn input_from_different_clients_reaches_the_shell_in_order() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "order", 0);
    // Each request on a connection of its own, as from two watchers.
    type_in(&server, "order", "echo first-");
    type_in(&server, "order", "$((1+1))-second\r");
    watcher.text_with("first-2-second\r\n");
    // Requests at once each arrive whole.
    thread::scope(|s| {
        for (a, b) in [(3, 4), (5, 6)] {
            let server = &server;
            s.spawn(move || type_in(server, "order", &format!("echo at-once-$(({a}*{b}))\r")));
        }
    });
    watcher.text_with("at-once-12\r\n");
    watcher.text_with("at-once-30\r\n");
}

#[test]
fn ctrl_c_stops_what_runs_and_the_prompt_comes_back() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "int", 0);
    let sid = shell_pid(&server, "int", &watcher, "sid-");
    // A prompt to know it by (split in two, so that its echo is not it).
    type_in(&server, "int", "PS1='ps1''> '\r");
    watcher.until(|events| text(events).ends_with("ps1> "));
    type_in(&server, "int", "sleep 100\r");
    // Once sleep runs in the terminal's foreground, Ctrl-C is its (before
    // the shell's child is sleep, it may be the shell's).
    let deadline = Instant::now() + WAIT;
    while !foreground_group(sid).is_some_and(|group| {
        std::fs::read_to_string(format!("/proc/{group}/comm")).is_ok_and(|c| c == "sleep\n")
    }) {
        assert!(Instant::now() < deadline, "sleep never in the foreground");
        thread::sleep(Duration::from_millis(10));
    }
    let (_, took) = timed(|| {
        type_in(&server, "int", "\x03");
        watcher.until(|events| {
            let text = text(events);
            text.rsplit_once("^C")
                .is_some_and(|(_, after)| after.ends_with("ps1> "))
        });
    });
    assert!(took < SLACK, "{took:?}");
    assert_eq!(members(sid, 1), vec![sid]);
    type_in(&server, "int", "echo back-$((2+2))\r");
    watcher.text_with("back-4\r\n");
}

/// The process group in the foreground of `pid`'s terminal.
fn foreground_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = &stat[stat.rfind(')')? + 1..];
    // After the state: ppid, pgrp, session, tty_nr, then tpgid.
    fields.split_whitespace().nth(5)?.parse().ok()
}

#[test]
fn a_program_reads_what_is_typed() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "read", 0);
    type_in(&server, "read", "read -p \"ask-$((3+4))> \" x\r");
    watcher.text_with("ask-7> ");
    type_in(&server, "read", "hello\r");
    type_in(&server, "read", "echo got-$x\r");
    watcher.text_with("got-hello\r\n");
}

#[test]
fn a_full_screen_program_shows_from_its_top_to_a_late_joiner() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "full", 0);
    // Enough lines that the screen scrolled, and scrollback to draw.
    type_in(&server, "full", "seq 1 60\r");
    watcher.text_with("\r\n60\r\n");
    type_in(&server, "full", "printf '\\e[2J\\e[H'; echo top-line\r");
    let first = screen_when(&server, "full", |s| {
        s.text.lines().next() == Some("top-line") && s.text.lines().count() == 2
    });
    // A late joiner gets the same screen, and its data draws it.
    let again = screen(&server, "full");
    assert_eq!(again, first);
    let mut fresh = vt100::Parser::new(
        NonZeroU16::new(first.rows).unwrap(),
        NonZeroU16::new(first.cols).unwrap(),
        SCROLLBACK_LINES,
    );
    fresh.process(first.data.as_bytes());
    let drawn: Vec<String> = fresh
        .screen()
        .rows(0, first.cols)
        .map(|row| row.trim_end().to_string())
        .collect();
    assert_eq!(drawn[0], "top-line");
    assert_eq!(drawn.join("\n").trim_end(), first.text);
    assert!(
        fresh.screen().scrollback_len() >= 60 - 24,
        "the scrollback came too"
    );
    // The screen is at an offset between two events: a reader from there
    // starts exactly there.
    let later = Watcher::start(&server, "full", first.offset);
    type_in(&server, "full", "echo after-$((8*8))\r");
    let events = later.until(|events| text(events).contains("after-64"));
    let Some(TerminalEvent::Output { offset, .. }) = events.first() else {
        panic!("{events:?}")
    };
    assert_eq!(*offset, first.offset);
}

#[test]
fn a_resize_reaches_the_shell_and_the_screen() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "size", 0);
    let (status, body) = server.json("PUT", &path("size", "/size"), r#"{"cols":100,"rows":30}"#);
    assert_eq!(status, 200, "{body}");
    let size: TerminalSize = serde_json::from_value(body).expect("size");
    assert_eq!(
        size,
        TerminalSize {
            cols: 100,
            rows: 30
        }
    );
    type_in(&server, "size", "stty size\r");
    watcher.text_with("30 100\r\n");
    let screen = screen(&server, "size");
    assert_eq!((screen.cols, screen.rows), (100, 30));
}

#[test]
fn exit_starts_a_new_shell_and_says_so() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "again", 0);
    let first = shell_pid(&server, "again", &watcher, "pid-");
    type_in(&server, "again", "exit 3\r");
    let events = watcher.until(|events| {
        events
            .iter()
            .any(|e| matches!(e, TerminalEvent::Restarted { .. }))
    });
    let Some(TerminalEvent::Restarted { offset, code }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(*code, Some(3));
    // Then the new shell's prompt, and it takes what is typed.
    watcher.until(|events| {
        events
            .iter()
            .any(|e| matches!(e, TerminalEvent::Output { offset: o, .. } if o >= offset))
    });
    let second = shell_pid(&server, "again", &watcher, "pid-again-");
    assert_ne!(first, second);
    assert_eq!(members(first, 0), Vec::<i32>::new());
}

#[test]
fn echo_is_off_at_a_prompt_that_hides_what_is_typed() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "echo", 0);
    watcher.until(|events| !events.is_empty());
    assert!(type_in(&server, "echo", "echo shown-$((1+1))\r").echo);
    watcher.text_with("shown-2\r\n");
    type_in(
        &server,
        "echo",
        "stty -echo; read -rp \"pw-$((1+2))> \" x\r",
    );
    watcher.text_with("pw-3> ");
    let typed = type_in(&server, "echo", "hidden\r");
    assert_eq!((typed.bytes, typed.echo), (7, false));
    type_in(
        &server,
        "echo",
        "stty echo; read -rsp \"pin-$((2+2))> \" y\r",
    );
    watcher.text_with("pin-4> ");
    assert!(!type_in(&server, "echo", "1234\r").echo);
    // The prompt again.
    watcher.until(|events| text(events).rsplit("pin-4> ").next() != Some(""));
    assert!(type_in(&server, "echo", "echo \"got-$x-$y\"\r").echo);
    let text = watcher.text_with("got-hidden-1234\r\n");
    assert!(!text.contains("hidden\r\n"), "{text:?}");
}

#[test]
fn a_reader_from_an_old_offset_gets_what_is_kept() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "kept", 0);
    type_in(&server, "kept", "echo one-$((0+1)); echo two-$((1+1))\r");
    let whole = watcher.text_with("two-2\r\n");
    // From the start, and from the middle: exactly what was printed.
    let again = Watcher::start(&server, "kept", 0).text_with("two-2\r\n");
    assert!(again.starts_with(&whole), "{again:?}");
    let middle = whole.find("one-1").expect("one") as u64;
    let from_middle = Watcher::start(&server, "kept", middle).text_with("two-2\r\n");
    assert!(
        from_middle.starts_with(&whole[middle as usize..]),
        "{from_middle:?}"
    );

    // More than is kept (with no reader that could fall behind): a
    // reader from 0 starts at the oldest byte kept.
    drop(watcher);
    type_in(
        &server,
        "kept",
        "head -c 300000 /dev/zero | tr '\\0' x; echo; echo end-$((9*9))\r",
    );
    // Once the prompt is back, nothing more is printed.
    let idle = screen_when(&server, "kept", |s| {
        s.text.lines().any(|l| l == "end-81") && !s.text.ends_with("end-81")
    });
    let total = idle.offset;
    let late = Watcher::start(&server, "kept", 0);
    let events = late.until(|events| text(events).contains("end-81"));
    let Some(TerminalEvent::Output { offset, .. }) = events.first() else {
        panic!("{events:?}")
    };
    assert_eq!(*offset, total - TERMINAL_OUTPUT_KEPT_BYTES as u64);
    // From past the end: what is printed from now on.
    let ahead = Watcher::start(&server, "kept", total + 1000);
    type_in(&server, "kept", "echo new-$((7*6))\r");
    let events = ahead.until(|events| text(events).contains("new-42"));
    let Some(TerminalEvent::Output { offset, .. }) = events.first() else {
        panic!("{events:?}")
    };
    assert_eq!(*offset, total);
}

#[test]
fn destroying_the_sandbox_leaves_no_terminal_process() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "gone", 0);
    let sid = shell_pid(&server, "gone", &watcher, "sid-");
    type_in(&server, "gone", "sleep 100 & sleep 100\r");
    assert_eq!(members(sid, 3).len(), 3, "bash and two sleeps");
    let (_, took) = timed(|| server.destroy("gone"));
    assert!(took < SLACK, "{took:?}");
    assert_eq!(members(sid, 0), Vec::<i32>::new());
    // Its readers' streams end.
    assert!(watcher.ends());
    // The next request starts a new terminal in a new workspace.
    let watcher = Watcher::start(&server, "gone", 0);
    assert_ne!(shell_pid(&server, "gone", &watcher, "sid-"), sid);
    assert!(server.workspace("gone").is_dir());
}

#[test]
fn shutdown_leaves_no_terminal_process() {
    let mut server = Server::start();
    let watcher = Watcher::start(&server, "down", 0);
    let sid = shell_pid(&server, "down", &watcher, "sid-");
    type_in(&server, "down", "trap '' HUP TERM; sleep 100 & sleep 100\r");
    assert_eq!(members(sid, 3).len(), 3, "bash and two sleeps");
    let (status, took) = timed(|| server.terminate());
    assert!(status.success(), "{status:?}");
    assert!(took < SLACK, "{took:?}");
    assert_eq!(members(sid, 0), Vec::<i32>::new());
}

#[test]
fn a_restore_starts_the_shell_again_in_the_new_workspace() {
    let server = Server::start();
    let watcher = Watcher::start(&server, "restore", 0);
    let sid = shell_pid(&server, "restore", &watcher, "sid-");
    let archive = gzip(&tar_of(&[file("restored.txt", b"from-archive")]));
    let (status, body) = put(&server, "restore", &archive);
    assert_eq!(status, 200, "{body}");
    watcher.until(|events| {
        events
            .iter()
            .any(|e| matches!(e, TerminalEvent::Restarted { .. }))
    });
    assert_eq!(members(sid, 0), Vec::<i32>::new());
    type_in(&server, "restore", "cat restored.txt; echo\r");
    watcher.text_with("from-archive\r\n");
}

#[test]
fn bad_requests_are_refused_with_json() {
    let server = Server::start();
    let too_much = "x".repeat(MAX_INPUT_BYTES + 1);
    let (status, body) = server.raw("POST", &path("bad", "/input"), too_much.as_bytes());
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    let error: Value = serde_json::from_slice(&body).expect("JSON");
    assert!(error["error"].as_str().is_some(), "{error}");
    for size in [
        json!({ "cols": 0, "rows": 24 }),
        json!({ "cols": 80, "rows": 201 }),
        json!({ "cols": 501, "rows": 24 }),
        json!({ "cols": 80 }),
        json!("80x24"),
    ] {
        let (status, body) = server.json("PUT", &path("bad", "/size"), &size.to_string());
        assert_eq!(status, 400, "{size}: {body}");
        assert!(body["error"].as_str().is_some(), "{body}");
    }
    let (status, body) = server.json("GET", &path("no%2Fpe", ""), "");
    assert_eq!(status, 400, "{body}");
    let (status, body) = server.json("POST", &path("bad", ""), "");
    assert_eq!((status, body["error"].is_string()), (405, true));
    let (status, body) = server.json("GET", &path("bad", "/output?from=-1"), "");
    assert_eq!(status, 400, "{body}");
    // Nothing refused started a terminal or reached one.
    assert!(!server.workspace("bad").exists());
}
