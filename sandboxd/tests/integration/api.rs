//! The HTTP protocol, concurrency, destroy and shutdown.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{live_session_members, pid_is_gone, timed, Server};

#[test]
fn health() {
    let server = Server::start();
    assert_eq!(server.raw("GET", "/health", b""), (200, b"ok".to_vec()));
}

#[test]
fn exec_response_has_the_documented_shape() {
    let server = Server::start();
    let cmd = "sleep 0.2; echo 'quoted \"x\"'";
    let r = server.exec("shape", cmd);
    assert_eq!(r.command, cmd);
    assert_eq!(r.stdout, "quoted \"x\"\n");
    assert!((200..2000).contains(&r.duration), "{}", r.duration);
    assert!(!r.truncated && !r.timed_out && r.success);
    // 2026-11-29T16:00:00.000Z
    let t = r.timestamp.as_bytes();
    assert_eq!(t.len(), 24, "{}", r.timestamp);
    for (i, c) in t.iter().enumerate() {
        match i {
            4 | 7 => assert_eq!(*c, b'-'),
            10 => assert_eq!(*c, b'T'),
            13 | 16 => assert_eq!(*c, b':'),
            19 => assert_eq!(*c, b'.'),
            23 => assert_eq!(*c, b'Z'),
            _ => assert!(c.is_ascii_digit(), "{}", r.timestamp),
        }
    }
    assert!(r.timestamp.as_str() > "2025");
}

#[test]
fn bad_requests_get_400_json() {
    let server = Server::start_with(
        &["--max-timeout-ms", "5000", "--default-timeout-ms", "1000"],
        &[],
    );
    let cases: Vec<(String, String, &str)> = vec![
        (
            "/v1/sandboxes/a%2Fb/exec".into(),
            r#"{"cmd":"ls"}"#.into(),
            "invalid sandbox name",
        ),
        (
            "/v1/sandboxes/../exec".into(),
            r#"{"cmd":"ls"}"#.into(),
            "invalid sandbox name",
        ),
        (
            "/v1/sandboxes/./exec".into(),
            r#"{"cmd":"ls"}"#.into(),
            "invalid sandbox name",
        ),
        (
            "/v1/sandboxes//exec".into(),
            r#"{"cmd":"ls"}"#.into(),
            "invalid sandbox name",
        ),
        (
            format!("/v1/sandboxes/{}/exec", "n".repeat(161)),
            r#"{"cmd":"ls"}"#.into(),
            "invalid sandbox name",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"   "}"#.into(),
            "blank",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":""}"#.into(),
            "blank",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"ls""#.into(),
            "invalid exec request",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            "".into(),
            "invalid exec request",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":["ls"]}"#.into(),
            "invalid exec request",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"ls","timeoutMs":"5"}"#.into(),
            "invalid exec request",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"ls","timeoutMs":0}"#.into(),
            "positive",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"ls","timeoutMs":5001}"#.into(),
            "exceeds the maximum of 5000 ms",
        ),
        (
            "/v1/sandboxes/ok/exec".into(),
            r#"{"cmd":"ls","shell":"zsh"}"#.into(),
            "unknown field",
        ),
    ];
    for (path, body, needle) in cases {
        let (status, value) = server.json("POST", &path, &body);
        assert_eq!(status, 400, "{path} {body}: {value}");
        let error = value["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{path} {body}: {error}");
    }
    let (status, value) = server.json("DELETE", "/v1/sandboxes/..", "");
    assert_eq!(status, 400, "{value}");
    // Nothing was created for the rejected requests.
    assert_eq!(std::fs::read_dir(server.root()).unwrap().count(), 0);
    // The maximum itself is accepted.
    let r = server.exec_timeout("ok", "echo fine", 5000);
    assert_eq!(r.stdout, "fine\n");
}

#[test]
fn unknown_routes_and_wrong_methods_get_json_errors() {
    let server = Server::start();
    for path in [
        "/",
        "/v1/sandboxes",
        "/v1/sandboxes/a/run",
        "/v2/sandboxes/a/exec",
    ] {
        let (status, value) = server.json("GET", path, "");
        assert_eq!(status, 404, "{path}");
        assert!(value["error"].as_str().unwrap().contains(path), "{value}");
    }
    for (method, path) in [
        ("GET", "/v1/sandboxes/a/exec"),
        ("DELETE", "/v1/sandboxes/a/exec"),
        ("POST", "/v1/sandboxes/a"),
        ("GET", "/v1/sandboxes/a"),
        ("POST", "/health"),
    ] {
        let (status, value) = server.json(method, path, "");
        assert_eq!(status, 405, "{method} {path}");
        assert!(value["error"].as_str().unwrap().contains(method), "{value}");
    }
}

#[test]
fn oversized_bodies_get_413() {
    let server = Server::start();
    // Declared too large: refused before the body is read.
    let head = "POST /v1/sandboxes/big/exec HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\
                Content-Length: 1048577\r\n\r\n";
    let (status, body) = server.send(head.as_bytes());
    assert_eq!(status, 413);
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert!(value["error"]
        .as_str()
        .unwrap()
        .contains("larger than 1048576"));

    // A body of exactly 1 MiB is still accepted.
    let filler = "#".repeat(1024 * 1024 - r#"{"cmd":"echo ok "}"#.len());
    let body = json!({ "cmd": format!("echo ok {filler}") }).to_string();
    assert_eq!(body.len(), 1024 * 1024);
    let (status, _) = server.raw("POST", "/v1/sandboxes/big/exec", body.as_bytes());
    assert_eq!(status, 200);
}

#[test]
fn commands_to_one_sandbox_run_one_at_a_time_in_arrival_order() {
    let server = Arc::new(Server::start());
    let mut handles = Vec::new();
    for (i, word) in ["first", "second", "third"].into_iter().enumerate() {
        let server = Arc::clone(&server);
        handles.push(thread::spawn(move || {
            thread::sleep(Duration::from_millis(150 * i as u64));
            let cmd = format!("echo start-{word} >> order; sleep 0.3; echo end-{word} >> order");
            server.exec("fifo", &cmd)
        }));
    }
    for h in handles {
        assert_eq!(h.join().unwrap().exit_code, 0);
    }
    let order = server.exec("fifo", "cat order").stdout;
    assert_eq!(
        order,
        "start-first\nend-first\nstart-second\nend-second\nstart-third\nend-third\n"
    );
}

#[test]
fn parallel_commands_to_one_sandbox_all_land() {
    let server = Arc::new(Server::start());
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let server = Arc::clone(&server);
            thread::spawn(move || server.exec("many", &format!("echo {i} >> f")))
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap().success);
    }
    let r = server.exec("many", "sort -n f");
    let expected: String = (0..10).map(|i| format!("{i}\n")).collect();
    assert_eq!(r.stdout, expected);
}

#[test]
fn different_sandboxes_run_in_parallel() {
    let server = Arc::new(Server::start());
    // Start both shells first so the timing covers only the commands.
    server.exec("par-a", "true");
    server.exec("par-b", "true");
    let ((), took) = timed(|| {
        let handles: Vec<_> = ["par-a", "par-b"]
            .into_iter()
            .map(|name| {
                let server = Arc::clone(&server);
                thread::spawn(move || assert!(server.exec(name, "sleep 1").success))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert!(took < Duration::from_millis(1700), "{took:?}");
}

#[test]
fn destroy_removes_the_workspace_and_resets_state() {
    let server = Server::start();
    let ws = server.workspace("gone");
    server.exec("gone", "mkdir -p x/y && touch x/y/f && cd x && export V=1");
    assert!(ws.join("x/y/f").exists());

    assert_eq!(server.destroy("gone"), (200, json!({ "destroyed": true })));
    assert!(!ws.exists());
    // Idempotent, and fine for names never used.
    assert_eq!(server.destroy("gone"), (200, json!({ "destroyed": true })));
    assert_eq!(
        server.destroy("never-used"),
        (200, json!({ "destroyed": true }))
    );

    let r = server.exec("gone", "pwd; ls -A; echo ${V:-unset}");
    assert_eq!(r.stdout, format!("{}\nunset\n", ws.display()));
}

#[test]
fn destroy_kills_the_running_command() {
    let server = Arc::new(Server::start());
    let ws = server.workspace("busy-destroy");
    let sid = server.shell_pid("busy-destroy");
    let runner = {
        let server = Arc::clone(&server);
        thread::spawn(move || {
            timed(|| server.exec_timeout("busy-destroy", "touch started; sleep 60", 60_000))
        })
    };
    while !ws.join("started").exists() {
        thread::sleep(Duration::from_millis(10));
    }
    let queued = {
        let server = Arc::clone(&server);
        thread::spawn(move || {
            server.json(
                "POST",
                "/v1/sandboxes/busy-destroy/exec",
                r#"{"cmd":"touch queued"}"#,
            )
        })
    };
    thread::sleep(Duration::from_millis(200));
    let ((status, _), destroy_took) = timed(|| server.destroy("busy-destroy"));
    assert_eq!(status, 200);
    // A command queued before the destroy is refused, not run.
    let (status, value) = queued.join().unwrap();
    assert_eq!(status, 409, "{value}");
    assert!(value["error"].as_str().unwrap().contains("destroyed"));
    let (r, took) = runner.join().unwrap();
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(destroy_took < Duration::from_secs(3), "{destroy_took:?}");
    assert_eq!((r.exit_code, r.success, r.timed_out), (137, false, false));
    assert!(r.stderr.contains("destroyed"), "{}", r.stderr);
    assert!(pid_is_gone(sid, Duration::from_secs(1)), "old shell lives");
    assert!(!ws.exists());

    let r = server.exec("busy-destroy", "ls -A");
    assert_eq!((r.stdout.as_str(), r.exit_code), ("", 0));
}

#[test]
fn a_client_hanging_up_does_not_disturb_the_session() {
    let server = Server::start();
    let body = r#"{"cmd":"sleep 0.5; echo late; echo done > finished"}"#;
    let request = format!(
        "POST /v1/sandboxes/hangup/exec HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    thread::sleep(Duration::from_millis(100));
    drop(stream);
    // Queued behind the abandoned command, which still runs to its end.
    let r = server.exec("hangup", "cat finished; echo next");
    assert_eq!(r.stdout, "done\nnext\n");
}

/// The JSON log lines of the commands of `sandbox`.
fn command_lines(logs: &[String], sandbox: &str) -> Vec<Value> {
    logs.iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == "command" && line["sandbox"] == sandbox)
        .collect()
}

#[test]
fn one_json_log_line_per_command_without_its_text_or_output() {
    let server = Server::start();
    let failed = server.exec("logged", "echo topsecret-output; exit 3");
    let late = server.exec_timeout("logged", "sleep 5 # topsecret-command", 100);
    let logs = server.logs_when(|logs| command_lines(logs, "logged").len() >= 2);
    assert!(logs.iter().all(|l| !l.contains("topsecret")), "{logs:?}");
    let lines = command_lines(&logs, "logged");
    assert_eq!(lines.len(), 2, "{logs:?}");
    for (line, exec) in lines.iter().zip([&failed, &late]) {
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "command",
                "durationMs",
                "event",
                "exitCode",
                "sandbox",
                "stderrBytes",
                "stdoutBytes",
                "timedOut",
                "truncated"
            ],
            "{line}"
        );
        assert_eq!(line["exitCode"], exec.exit_code, "{line}");
        assert_eq!(line["timedOut"], exec.timed_out, "{line}");
        assert_eq!(line["truncated"], exec.truncated, "{line}");
        assert_eq!(line["stdoutBytes"], exec.stdout.len(), "{line}");
        assert_eq!(line["stderrBytes"], exec.stderr.len(), "{line}");
        assert_eq!(line["durationMs"], exec.duration, "{line}");
    }
    assert_eq!(
        (lines[0]["exitCode"].as_i64(), lines[1]["exitCode"].as_i64()),
        (Some(3), Some(124))
    );
    assert_eq!(lines[0]["stdoutBytes"], "topsecret-output\n".len());
    assert_eq!(lines[1]["timedOut"], true);
    let numbers = (lines[0]["command"].as_u64(), lines[1]["command"].as_u64());
    assert!(
        matches!(numbers, (Some(a), Some(b)) if a >= 1 && b > a),
        "{numbers:?}"
    );
    // A streamed command is logged the same way.
    let (status, _) = server.raw(
        "POST",
        "/v1/sandboxes/streamed/exec/stream",
        br#"{"cmd":"echo hi"}"#,
    );
    assert_eq!(status, 200);
    let logs = server.logs_when(|logs| command_lines(logs, "streamed").len() == 1);
    let line = &command_lines(&logs, "streamed")[0];
    assert_eq!(
        (line["exitCode"].as_i64(), line["stdoutBytes"].as_u64()),
        (Some(0), Some(3))
    );
}

#[test]
fn sigterm_ends_all_sessions_and_exits() {
    let mut server = Server::start();
    let job: i32 = server
        .exec("term", "sleep 300 & echo $!")
        .stdout
        .trim()
        .parse()
        .unwrap();
    let shell = server.shell_pid("term");
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        pid_is_gone(job, Duration::from_secs(1)),
        "background job lives"
    );
    assert!(pid_is_gone(shell, Duration::from_secs(1)), "shell lives");
}

#[test]
fn a_killed_sandboxd_takes_its_shells_with_it() {
    let server = Server::start();
    let shell = server.shell_pid("crash");
    let addr = server.addr;
    // Sent by hand: the connection dies with sandboxd, without a response.
    thread::spawn(move || {
        let body = r#"{"cmd":"sleep 30; echo late > late.txt"}"#;
        let mut stream = TcpStream::connect(addr).expect("connect");
        let request = format!(
            "POST /v1/sandboxes/crash/exec HTTP/1.1\r\nHost: sandboxd\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let _ = std::io::Read::read_to_end(&mut stream, &mut Vec::new());
    });
    let sleeper = wait_for(|| {
        live_session_members(shell)
            .into_iter()
            .find(|pid| *pid != shell)
    });
    // SAFETY: plain kill(2) on our own child.
    unsafe {
        libc::kill(server.pid(), libc::SIGKILL);
    }
    assert!(pid_is_gone(shell, Duration::from_secs(1)), "shell lives");
    // The command's running process escapes; ending it must not let the
    // rest of the command line run.
    assert!(
        !pid_is_gone(sleeper, Duration::ZERO),
        "sleep was killed too"
    );
    // SAFETY: as above, on a process this test started.
    unsafe {
        libc::kill(sleeper, libc::SIGKILL);
    }
    thread::sleep(Duration::from_millis(300));
    assert!(!server.workspace("crash").join("late.txt").exists());
}

/// The first `Some` of `probe`, polling for up to 5 s.
fn wait_for<T>(probe: impl Fn() -> Option<T>) -> T {
    for _ in 0..500 {
        if let Some(value) = probe() {
            return value;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("condition not met within 5 s");
}
