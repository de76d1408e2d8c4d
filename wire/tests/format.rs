//! Pins the wire as both sides see it: the exact JSON sandboxd writes, and
//! that the worker's reading of it gives back what was written.

use duet_wire::stream::{self, Event, Line, END_PREFIX};
use duet_wire::{ExecRequest, ExecResult, RestoreResult, Stream, MAX_BYTES, TIMEOUT_MS};

fn result() -> ExecResult {
    ExecResult {
        stdout: "1\n".into(),
        stderr: "é\n".into(),
        exit_code: 2,
        success: false,
        command: "echo 1; false".into(),
        duration: 3,
        timestamp: "2026-11-29T16:00:00.000Z".into(),
        truncated: true,
        timed_out: false,
    }
}

/// A line as sandboxd writes it, without its newline.
fn written(event: &Event<'_>) -> String {
    serde_json::to_string(event).unwrap()
}

/// A line as the worker reads it.
fn read(line: &str) -> Result<Line, String> {
    stream::read(line, |line| serde_json::from_str(line))
}

#[test]
fn every_event_is_one_exact_line() {
    let start = Event::Start {
        command: "ls",
        timestamp: "2026-11-29T16:00:00.000Z",
    };
    assert_eq!(
        written(&start),
        r#"{"type":"start","command":"ls","timestamp":"2026-11-29T16:00:00.000Z"}"#
    );
    let output = Event::Output {
        stream: Stream::Stderr,
        data: "é\n",
    };
    assert_eq!(
        written(&output),
        r#"{"type":"output","stream":"stderr","data":"é\n"}"#
    );
    let result = result();
    assert_eq!(
        written(&Event::End(&result)),
        r#"{"type":"end","stdout":"1\n","stderr":"é\n","exitCode":2,"success":false,"command":"echo 1; false","duration":3,"timestamp":"2026-11-29T16:00:00.000Z","truncated":true,"timedOut":false}"#
    );
}

#[test]
fn the_end_is_the_exec_answer_with_its_type_first() {
    let result = result();
    let end = written(&Event::End(&result));
    assert!(end.starts_with(END_PREFIX), "{end}");
    let answer = serde_json::to_string(&result).unwrap();
    assert_eq!(end, format!("{END_PREFIX}{}", &answer[1..]));
    // Read by its prefix alone: the result comes back as sandboxd wrote it.
    assert_eq!(read(&end), Ok(Line::End(answer)));
}

#[test]
fn the_worker_reads_back_what_sandboxd_writes() {
    let start = Event::Start {
        command: "ls",
        timestamp: "t",
    };
    assert_eq!(read(&written(&start)), Ok(Line::Start));
    for stream in [Stream::Stdout, Stream::Stderr] {
        // Text that looks like an end line is still output.
        for data in ["é\n", "\"quoted\"\t", END_PREFIX, "\u{1b}[1m"] {
            let line = written(&Event::Output { stream, data });
            assert_eq!(
                read(&line),
                Ok(Line::Output {
                    stream,
                    data: data.into()
                }),
                "{line}"
            );
        }
    }
    let Ok(Line::End(json)) = read(&written(&Event::End(&result()))) else {
        panic!("not an end");
    };
    assert_eq!(serde_json::from_str::<ExecResult>(&json).unwrap(), result());
}

#[test]
fn stream_names_are_their_wire_names() {
    for stream in [Stream::Stdout, Stream::Stderr] {
        let json = serde_json::to_string(&stream).unwrap();
        assert_eq!(json, format!("\"{}\"", stream.name()));
    }
}

#[test]
fn lines_that_are_no_event_are_refused() {
    for line in [
        "not json",
        r#"{"type":"other"}"#,
        r#"{"type":"output","stream":"stdout"}"#,
        r#"{"type":"output","stream":"stdin","data":"x"}"#,
        // An end is known by its first bytes only.
        r#"{"stdout":"","type":"end"}"#,
    ] {
        assert!(read(line).is_err(), "{line}");
    }
}

#[test]
fn exec_requests() {
    let request = ExecRequest {
        cmd: "ls".into(),
        timeout_ms: 5,
    };
    let json = serde_json::to_string(&request).unwrap();
    assert_eq!(json, r#"{"cmd":"ls","timeoutMs":5}"#);
    let read: ExecRequest<Option<u64>> = serde_json::from_str(&json).unwrap();
    assert_eq!(read.timeout_ms, Some(5));
    let read: ExecRequest<Option<u64>> = serde_json::from_str(r#"{"cmd":"ls"}"#).unwrap();
    assert_eq!(read.timeout_ms, None);
    let unknown = serde_json::from_str::<ExecRequest<Option<u64>>>(r#"{"cmd":"ls","cwd":"/"}"#);
    assert!(unknown.unwrap_err().to_string().contains("unknown field"));
}

#[test]
fn a_result_missing_fields_reads_as_their_defaults() {
    let sparse: ExecResult = serde_json::from_str(r#"{"stderr":"boom"}"#).unwrap();
    assert_eq!(
        sparse,
        ExecResult {
            stderr: "boom".into(),
            ..ExecResult::default()
        }
    );
}

#[test]
fn archive_routes() {
    let restored = RestoreResult {
        restored: true,
        files: 4,
        bytes: 10,
    };
    assert_eq!(
        serde_json::to_string(&restored).unwrap(),
        r#"{"restored":true,"files":4,"bytes":10}"#
    );
    assert_eq!((MAX_BYTES, TIMEOUT_MS), ("maxBytes", "timeoutMs"));
}
