//! Jobs: commands beside the shell, their output streams, stops and bounds,
//! and that none outlives its sandbox or its sandboxd.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use duet_wire::job::{JobEvent, JobInfo, JobState, JOB_OUTPUT_KEPT_BYTES, MAX_RUNNING_JOBS};
use duet_wire::stream::OUTPUT_EVENT_BYTES;
use serde_json::{json, Value};

use crate::harness::{live_session_members, read_head, read_ndjson, timed, Server, SLACK};

fn start(server: &Server, name: &str, id: &str, cmd: &str, max_ms: u64) -> JobInfo {
    let (status, body) = post(
        server,
        name,
        json!({ "id": id, "cmd": cmd, "maxMs": max_ms }),
    );
    assert_eq!(status, 201, "{body}");
    serde_json::from_value(body).expect("job")
}

fn post(server: &Server, name: &str, body: Value) -> (u16, Value) {
    let path = format!("/v1/sandboxes/{name}/jobs");
    server.json("POST", &path, &body.to_string())
}

fn info(server: &Server, method: &str, name: &str, id: &str) -> JobInfo {
    let (status, body) = server.json(method, &format!("/v1/sandboxes/{name}/jobs/{id}"), "");
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).expect("job")
}

/// A job's output stream from `from`, each event with when it came (from
/// the request); after `most` events the reader goes away.
fn events(
    server: &Server,
    name: &str,
    id: &str,
    from: u64,
    most: usize,
) -> Vec<(Duration, JobEvent)> {
    let mut socket = TcpStream::connect(server.addr).expect("connect");
    let request = format!(
        "GET /v1/sandboxes/{name}/jobs/{id}/output?from={from} HTTP/1.1\r\nHost: s\r\n\
         Connection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).expect("send");
    let sent = Instant::now();
    let mut reader = BufReader::new(socket);
    let (status, head) = read_head(&mut reader);
    assert_eq!(status, 200, "{head}");
    let mut events = Vec::new();
    read_ndjson(&mut reader, |event| {
        events.push((
            sent.elapsed(),
            serde_json::from_value(event).expect("event"),
        ));
        events.len() < most
    });
    events
}

/// Every event from `from` to the job's end.
fn all_events(server: &Server, name: &str, id: &str, from: u64) -> Vec<JobEvent> {
    let events = events(server, name, id, from, usize::MAX);
    events.into_iter().map(|(_, event)| event).collect()
}

/// The text of output events, checking that each follows the one before.
fn text(events: &[JobEvent]) -> String {
    let mut next = None;
    let mut text = String::new();
    for event in events {
        if let JobEvent::Output {
            offset,
            bytes,
            data,
        } = event
        {
            assert!(next.is_none_or(|next| next == *offset), "a gap at {offset}");
            assert!(data.len() <= OUTPUT_EVENT_BYTES);
            next = Some(offset + bytes);
            text.push_str(data);
        }
    }
    text
}

fn end(events: &[JobEvent]) -> (JobState, Option<i32>) {
    match events.last() {
        Some(JobEvent::End {
            state, exit_code, ..
        }) => (*state, *exit_code),
        other => panic!("no end: {other:?}"),
    }
}

/// The first line of the job's output: the pid its command printed.
fn printed_pid(server: &Server, name: &str, id: &str) -> i32 {
    let first = events(server, name, id, 0, 1);
    let Some((_, JobEvent::Output { data, .. })) = first.first() else {
        panic!("no output: {first:?}");
    };
    data.lines()
        .next()
        .and_then(|l| l.parse().ok())
        .expect("pid")
}

/// Waits (up to 5 s) until session `sid` has `count` live processes.
fn wait_for_members(sid: i32, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while live_session_members(sid).len() != count {
        assert!(Instant::now() < deadline, "{:?}", live_session_members(sid));
        thread::sleep(Duration::from_millis(10));
    }
}

/// Live processes of session `sid`, polled for up to 2 s until there are none.
fn members_left(sid: i32) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let members = live_session_members(sid);
        if members.is_empty() || Instant::now() >= deadline {
            return members;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_job_streams_its_output_as_it_runs_beside_the_shell() {
    let server = Server::start();
    let cmd = "for i in 1 2 3; do echo line $i; sleep 0.5; done";
    let job = start(&server, "run", "j1", cmd, 10_000);
    assert_eq!(
        (job.state, job.exit_code, job.output_bytes),
        (JobState::Running, None, 0)
    );
    assert_eq!((job.id.as_str(), job.cmd.as_str()), ("j1", cmd));
    // The shell answers meanwhile.
    let (r, took) = timed(|| server.exec("run", "echo shell"));
    assert_eq!(r.stdout, "shell\n");
    assert!(took < Duration::from_millis(900), "{took:?}");

    let events = events(&server, "run", "j1", 0, usize::MAX);
    let (first_at, _) = events[0];
    let (end_at, _) = events[events.len() - 1];
    assert!(
        end_at - first_at > Duration::from_millis(600),
        "streamed as printed"
    );
    let events: Vec<JobEvent> = events.into_iter().map(|(_, e)| e).collect();
    assert_eq!(text(&events), "line 1\nline 2\nline 3\n");
    assert_eq!(end(&events), (JobState::Exited, Some(0)));

    let job = info(&server, "GET", "run", "j1");
    assert_eq!(
        (job.state, job.exit_code, job.output_bytes),
        (JobState::Exited, Some(0), 21)
    );
    assert!(job.ended_at.is_some());
    let (status, list) = server.json("GET", "/v1/sandboxes/run/jobs", "");
    assert_eq!((status, list[0]["id"].as_str()), (200, Some("j1")));
}

#[test]
fn a_job_starts_where_the_shell_is_and_leaves_it_alone() {
    let server = Server::start();
    let r = server.exec("ctx", "mkdir -p sub && cd sub && export X=1 && Y=2 && true");
    assert_eq!(r.exit_code, 0, "{r:?}");
    start(
        &server,
        "ctx",
        "env",
        "pwd; echo \"x=$X y=$Y home=$HOME\"",
        5_000,
    );
    let events = all_events(&server, "ctx", "env", 0);
    let ws = server.workspace("ctx");
    let expected = format!("{}/sub\nx=1 y= home={}\n", ws.display(), ws.display());
    assert_eq!(text(&events), expected);
    // Asking the shell left nothing in it, not even `$?`.
    let r = server.exec("ctx", "echo \"$? [${n-unset}] $PWD $X $Y\"");
    assert_eq!(r.stdout, format!("0 [unset] {}/sub 1 2\n", ws.display()));
}

#[test]
fn stdout_and_stderr_are_one_stream_as_printed() {
    let server = Server::start();
    let cmd = "echo a; echo b >&2; echo c; sleep 0.1; echo d >&2; exit 3";
    start(&server, "mix", "m", cmd, 5_000);
    let events = all_events(&server, "mix", "m", 0);
    assert_eq!(text(&events), "a\nb\nc\nd\n");
    assert_eq!(end(&events), (JobState::Exited, Some(3)));
}

#[test]
fn a_stop_terms_the_job_and_kills_it_after_the_grace() {
    let server = Server::start();
    start(&server, "stop", "plain", "echo $$; sleep 30", 60_000);
    printed_pid(&server, "stop", "plain");
    let (job, took) = timed(|| info(&server, "DELETE", "stop", "plain"));
    assert_eq!((job.state, job.exit_code), (JobState::Stopped, Some(143)));
    assert!(took < SLACK, "{took:?}");

    start(
        &server,
        "stop",
        "stubborn",
        "trap '' TERM; echo $$; sleep 30",
        60_000,
    );
    let sid = printed_pid(&server, "stop", "stubborn");
    let (job, took) = timed(|| info(&server, "DELETE", "stop", "stubborn"));
    assert_eq!((job.state, job.exit_code), (JobState::Stopped, Some(137)));
    assert!(job.ended_at.is_some());
    assert!(took >= Duration::from_millis(4900), "{took:?}");
    assert!(took < Duration::from_secs(5) + SLACK, "{took:?}");
    assert_eq!(members_left(sid), Vec::<i32>::new());
    // Stopping an ended job tells how it ended.
    assert_eq!(info(&server, "DELETE", "stop", "stubborn"), job);
}

#[test]
fn a_job_is_stopped_at_its_longest_life() {
    let server = Server::start();
    let (_, took) = timed(|| {
        start(&server, "life", "short", "echo hi; sleep 30", 300);
        all_events(&server, "life", "short", 0)
    });
    assert!(took < SLACK, "{took:?}");
    let job = info(&server, "GET", "life", "short");
    assert_eq!((job.state, job.exit_code), (JobState::Stopped, Some(143)));
}

#[test]
fn running_jobs_are_bounded_and_ids_unique() {
    let server = Server::start();
    for i in 0..MAX_RUNNING_JOBS {
        start(&server, "many", &format!("j{i}"), "sleep 30", 20_000);
    }
    let (status, body) = post(
        &server,
        "many",
        json!({ "id": "one-more", "cmd": "true", "maxMs": 1000 }),
    );
    assert_eq!(status, 429, "{body}");
    let error = body["error"].as_str().expect("error");
    assert!(
        error.contains(&format!("at most {MAX_RUNNING_JOBS}")),
        "{error}"
    );
    let (status, body) = post(
        &server,
        "many",
        json!({ "id": "j0", "cmd": "true", "maxMs": 1000 }),
    );
    assert_eq!(status, 409, "{body}");
    // Once one ended, there is room again.
    info(&server, "DELETE", "many", "j3");
    start(&server, "many", "one-more", "sleep 30", 20_000);
    let (_, list) = server.json("GET", "/v1/sandboxes/many/jobs", "");
    let states: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .map(|job| job["state"].as_str().expect("state"))
        .collect();
    assert_eq!(states.len(), MAX_RUNNING_JOBS + 1);
    assert_eq!(states.last(), Some(&"stopped"), "running first: {states:?}");
    server.destroy("many");
}

#[test]
fn the_newest_output_is_kept_and_a_reader_says_where_it_starts() {
    let server = Server::start();
    start(
        &server,
        "big",
        "b",
        "yes 0123456789 | head -c 3000000; echo END",
        20_000,
    );
    // Read once to its end; then what is left is what is kept.
    all_events(&server, "big", "b", 0);
    let events = all_events(&server, "big", "b", 0);
    assert_eq!(end(&events), (JobState::Exited, Some(0)));
    let total = 3_000_004;
    assert_eq!(info(&server, "GET", "big", "b").output_bytes, total);
    let Some(JobEvent::Output { offset, .. }) = events.first() else {
        panic!("no output")
    };
    assert_eq!(*offset, total - JOB_OUTPUT_KEPT_BYTES as u64);
    let text = text(&events);
    assert_eq!(text.len(), JOB_OUTPUT_KEPT_BYTES);
    assert!(
        text.ends_with("0123456789\n012END\n"),
        "{}",
        &text[text.len() - 30..]
    );
}

#[test]
fn readers_read_at_once_and_one_reconnecting_goes_on_exactly() {
    let server = Server::start();
    let cmd = "for i in $(seq 1 20); do echo line $i; sleep 0.05; done";
    start(&server, "read", "r", cmd, 10_000);
    let whole = thread::scope(|s| {
        let whole = s.spawn(|| all_events(&server, "read", "r", 0));
        // This reader goes away after two events; the job runs on.
        let first = events(&server, "read", "r", 0, 2);
        let first: Vec<JobEvent> = first.into_iter().map(|(_, e)| e).collect();
        let Some(JobEvent::Output { offset, bytes, .. }) = first.last() else {
            panic!("{first:?}")
        };
        let rest = all_events(&server, "read", "r", offset + bytes);
        assert!(
            matches!(rest.first(), Some(JobEvent::Output { offset: o, .. }) if *o == offset + bytes)
        );
        let expected: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text(&first) + &text(&rest), expected);
        whole.join().expect("reader")
    });
    let expected: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    assert_eq!(text(&whole), expected);
    assert_eq!(end(&whole), (JobState::Exited, Some(0)));
}

#[test]
fn destroying_the_sandbox_leaves_no_job_process() {
    let server = Server::start();
    start(&server, "gone", "g", "echo $$; sleep 30 & sleep 30", 60_000);
    let sid = printed_pid(&server, "gone", "g");
    wait_for_members(sid, 3);
    let (_, took) = timed(|| server.destroy("gone"));
    assert!(took < SLACK, "{took:?}");
    assert_eq!(members_left(sid), Vec::<i32>::new());
    let (status, list) = server.json("GET", "/v1/sandboxes/gone/jobs", "");
    assert_eq!((status, list), (200, json!([])));
}

#[test]
fn shutdown_leaves_no_job_process() {
    let mut server = Server::start();
    start(
        &server,
        "down",
        "d",
        "trap '' TERM; echo $$; sleep 30",
        60_000,
    );
    let sid = printed_pid(&server, "down", "d");
    let (status, took) = timed(|| server.terminate());
    assert!(status.success(), "{status:?}");
    assert!(took < SLACK, "{took:?}");
    assert_eq!(members_left(sid), Vec::<i32>::new());
}

#[test]
fn a_restarted_sandboxd_kills_what_the_previous_ones_jobs_left() {
    let server = Server::start();
    start(
        &server,
        "crash",
        "c",
        "echo $$; sleep 30 & sleep 30",
        60_000,
    );
    let sid = printed_pid(&server, "crash", "c");
    wait_for_members(sid, 3);
    let server = server.crash_and_restart();
    assert_eq!(members_left(sid), Vec::<i32>::new());
    assert!(!server.root().join("~jobs").exists());
    let (status, body) = server.json("GET", "/v1/sandboxes/crash/jobs/c", "");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().is_some());
}

#[test]
fn bad_requests_are_refused_with_json() {
    let server = Server::start();
    for (body, needle) in [
        (
            json!({ "id": "a", "cmd": "ls", "maxMs": 5, "cwd": "/" }),
            "unknown field",
        ),
        (
            json!({ "id": "a/b", "cmd": "ls", "maxMs": 5 }),
            "invalid job id",
        ),
        (json!({ "id": "a", "cmd": " ", "maxMs": 5 }), "blank"),
        (json!({ "id": "a", "cmd": "ls", "maxMs": 0 }), "maxMs"),
        (
            json!({ "id": "a", "cmd": "ls", "maxMs": "5" }),
            "invalid job request",
        ),
    ] {
        let (status, answer) = post(&server, "bad", body);
        assert_eq!(status, 400, "{answer}");
        let error = answer["error"].as_str().expect("error");
        assert!(error.contains(needle), "{error}");
    }
    let (status, _) = server.json("GET", "/v1/sandboxes/bad/jobs/nope", "");
    assert_eq!(status, 404);
    let (status, _) = server.json("GET", "/v1/sandboxes/bad/jobs/no.pe", "");
    assert_eq!(status, 400);
    let (status, _) = server.json("PUT", "/v1/sandboxes/bad/jobs", "");
    assert_eq!(status, 405);
    start(&server, "bad", "short", "echo hi", 5_000);
    all_events(&server, "bad", "short", 0);
    let (status, answer) = server.json("GET", "/v1/sandboxes/bad/jobs/short/output?from=4", "");
    assert_eq!(status, 400, "{answer}");
}
