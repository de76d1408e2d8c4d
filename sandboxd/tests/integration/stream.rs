//! Streamed commands: NDJSON events as output is produced, ending with the
//! `/exec` answer.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use duet_wire::ExecResult;
use serde_json::{json, Value};

use crate::harness::{read_chunk, read_head, read_ndjson, Server};

/// A streamed answer: status, head, and each event with when it arrived
/// (counted from sending the request).
struct Streamed {
    status: u16,
    head: String,
    events: Vec<(Duration, Value)>,
}

impl Streamed {
    fn outputs(&self, stream: &str) -> Vec<(Duration, String)> {
        self.events
            .iter()
            .filter(|(_, e)| e["type"] == "output" && e["stream"] == stream)
            .map(|(at, e)| (*at, e["data"].as_str().expect("data").to_string()))
            .collect()
    }

    fn text(&self, stream: &str) -> String {
        self.outputs(stream).into_iter().map(|(_, d)| d).collect()
    }

    /// The end event as the `/exec` answer (unknown fields fail), and when
    /// it arrived.
    fn end(&self) -> (Duration, ExecResult) {
        let (at, end) = self.events.last().expect("events");
        assert_eq!(end["type"], "end", "{end}");
        let mut fields = end.as_object().expect("object").clone();
        fields.remove("type");
        (
            *at,
            serde_json::from_value(Value::Object(fields)).expect("end"),
        )
    }
}

fn connect(server: &Server, name: &str, body: &Value) -> (TcpStream, Instant) {
    let body = body.to_string();
    let request = format!(
        "POST /v1/sandboxes/{name}/exec/stream HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream.write_all(request.as_bytes()).expect("send");
    (stream, Instant::now())
}

fn stream(server: &Server, name: &str, body: Value) -> Streamed {
    let (socket, sent) = connect(server, name, &body);
    let mut reader = BufReader::new(socket);
    let (status, head) = read_head(&mut reader);
    let mut events = Vec::new();
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut body = Vec::new();
        reader.read_to_end(&mut body).expect("body");
        let value = serde_json::from_slice(&body).expect("JSON error");
        events.push((sent.elapsed(), value));
        return Streamed {
            status,
            head,
            events,
        };
    }
    read_ndjson(&mut reader, |event| {
        events.push((sent.elapsed(), event));
        true
    });
    Streamed {
        status,
        head,
        events,
    }
}

fn stream_cmd(server: &Server, name: &str, cmd: &str) -> Streamed {
    stream(server, name, json!({ "cmd": cmd }))
}

#[test]
fn events_come_in_order_and_add_up_to_the_exec_answer() {
    let server = Server::start();
    let cmd = "echo out; echo err >&2; printf 'no newline'; exit 3";
    let s = stream_cmd(&server, "order", cmd);
    assert_eq!(s.status, 200);
    let head = s.head.to_ascii_lowercase();
    assert!(
        head.contains("content-type: application/x-ndjson"),
        "{head}"
    );
    assert!(head.contains("transfer-encoding: chunked"), "{head}");

    let (_, start) = &s.events[0];
    assert_eq!(start["type"], "start");
    assert_eq!(start["command"], cmd);
    assert_eq!(start.as_object().unwrap().len(), 3, "{start}");
    for (_, event) in &s.events[1..s.events.len() - 1] {
        assert_eq!(event["type"], "output", "{event}");
        assert_eq!(event.as_object().unwrap().len(), 3, "{event}");
    }
    let (_, end) = s.end();
    assert_eq!(start["timestamp"], end.timestamp.as_str());
    assert_eq!(end.command, cmd);
    assert_eq!(
        (end.exit_code, end.success, end.timed_out),
        (3, false, false)
    );
    assert_eq!(end.stdout, "out\nno newline");
    assert!(end
        .stderr
        .starts_with("err\nsandboxd: the shell ended (it exited with code 3)"));
    assert_eq!(s.text("stdout"), end.stdout);
    assert_eq!(s.text("stderr"), end.stderr, "notes are output events too");
}

#[test]
fn output_is_sent_as_it_is_produced() {
    let server = Server::start();
    server.exec("live", "true");
    let s = stream_cmd(
        &server,
        "live",
        "for i in 1 2 3; do echo $i; sleep 0.3; done",
    );
    let outputs = s.outputs("stdout");
    let (end_at, end) = s.end();
    assert_eq!(end.stdout, "1\n2\n3\n");
    assert_eq!(s.text("stdout"), end.stdout);
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    // Each line about 0.3 s after the one before, the first well before the
    // end.
    assert!(outputs[0].0 < Duration::from_millis(250), "{outputs:?}");
    assert!(
        end_at - outputs[0].0 > Duration::from_millis(600),
        "{end_at:?} {outputs:?}"
    );
    for pair in outputs.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(gap > Duration::from_millis(200), "{outputs:?}");
    }
}

#[test]
fn a_character_split_across_reads_arrives_whole() {
    let server = Server::start();
    let s = stream_cmd(
        &server,
        "utf8",
        r"printf 'a\xf0\x9f'; sleep 0.3; printf '\x8c\x8d b\xff\n'; printf '\xe2\x82' >&2",
    );
    let (_, end) = s.end();
    assert_eq!(end.stdout, "a🌍 b\u{FFFD}\n");
    assert_eq!(end.stderr, "\u{FFFD}");
    let outputs = s.outputs("stdout");
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert_eq!(outputs[0].1, "a");
    assert_eq!(outputs[1].1, "🌍 b\u{FFFD}\n");
    assert_eq!(s.text("stderr"), "\u{FFFD}");
}

#[test]
fn a_flood_stops_at_the_output_cap() {
    let server = Server::start_with(&["--output-limit", "100000"], &[]);
    let s = stream_cmd(
        &server,
        "flood",
        "head -c 5000000 /dev/zero | tr '\\0' a; echo done >&2; FLOOD=over",
    );
    let (_, end) = s.end();
    assert!(end.truncated);
    assert_eq!(end.stdout.len(), 100_000);
    let outputs = s.outputs("stdout");
    assert!(
        outputs.iter().all(|(_, d)| d.len() <= 16 * 1024),
        "an event over 16 KiB"
    );
    assert_eq!(s.text("stdout"), end.stdout);
    assert_eq!(s.text("stderr"), "done\n");
    assert_eq!(server.exec("flood", "echo $FLOOD").stdout, "over\n");
}

#[test]
fn a_timeout_ends_the_stream_with_the_timeout() {
    let server = Server::start();
    let s = stream(
        &server,
        "slow",
        json!({ "cmd": "echo before; sleep 5", "timeoutMs": 300 }),
    );
    let (end_at, end) = s.end();
    assert!(end_at < Duration::from_secs(3), "{end_at:?}");
    assert_eq!(
        (end.exit_code, end.timed_out, end.success),
        (124, true, false)
    );
    assert_eq!(s.text("stdout"), "before\n");
    assert!(end
        .stderr
        .ends_with("sandboxd: command timed out after 300 ms\n"));
    assert_eq!(s.text("stderr"), end.stderr);
}

#[test]
fn a_client_going_away_leaves_the_command_running() {
    let server = Server::start();
    server.exec("gone", "X=kept");
    let pid = server.shell_pid("gone");
    for cmd in [
        "sleep 0.5; echo done > finished",
        "head -c 3000000 /dev/zero | tr '\\0' a; echo flooded > finished",
    ] {
        let (socket, _) = connect(&server, "gone", &json!({ "cmd": cmd }));
        let mut reader = BufReader::new(socket);
        assert_eq!(read_head(&mut reader).0, 200);
        assert!(read_chunk(&mut reader).is_some(), "the start event");
        drop(reader);
        // Queued behind the abandoned command, which runs to its end.
        let r = server.exec("gone", "cat finished; rm finished; echo $X");
        assert_eq!(r.stdout.lines().last(), Some("kept"), "{r:?}");
        assert_eq!(r.stderr, "");
    }
    assert_eq!(server.shell_pid("gone"), pid);
}

#[test]
fn refusals_before_the_start_are_ordinary_errors() {
    let server = Server::start_with(&["--max-sessions", "1"], &[]);
    server.exec("first", "true");
    let s = stream_cmd(&server, "second", "echo never");
    assert_eq!(s.status, 503);
    assert!(s.events[0].1["error"]
        .as_str()
        .unwrap()
        .contains("--max-sessions"));
    let s = stream(&server, "first", json!({ "cmd": "  " }));
    assert_eq!(s.status, 400);
    let s = stream_cmd(&server, "a%2Fb", "true");
    assert_eq!(s.status, 400);
    let (status, _) = server.json("GET", "/v1/sandboxes/first/exec/stream", "");
    assert_eq!(status, 405);
}

#[test]
fn the_exec_answer_is_unchanged() {
    let server = Server::start();
    let (status, body) = server.raw(
        "POST",
        "/v1/sandboxes/same/exec",
        br#"{"cmd":"echo hi; echo oops >&2"}"#,
    );
    assert_eq!(status, 200);
    let value: Value = serde_json::from_slice(&body).unwrap();
    let expected = format!(
        r#"{{"stdout":"hi\n","stderr":"oops\n","exitCode":0,"success":true,"command":"echo hi; echo oops >&2","duration":{},"timestamp":"{}","truncated":false,"timedOut":false}}"#,
        value["duration"],
        value["timestamp"].as_str().unwrap()
    );
    assert_eq!(String::from_utf8(body).unwrap(), expected);
}
