//! Timeouts and output caps.

use std::time::Duration;

use crate::harness::{live_session_members, pid_is_gone, timed, Server};

const SLACK: Duration = Duration::from_millis(1500);

#[test]
fn timeout_kills_grandchildren_that_ignore_sigterm() {
    let server = Server::start();
    let cmd = "bash -c 'trap \"\" TERM; echo $$ > inner.pid; sleep 30; echo survived' & \
               echo $! > outer.pid; echo waiting; sleep 30";
    let (r, took) = timed(|| server.exec_timeout("tmo", cmd, 500));
    assert!(took < Duration::from_millis(500) + SLACK, "{took:?}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert_eq!((r.exit_code, r.timed_out, r.success), (124, true, false));
    assert_eq!(r.stdout, "waiting\n");
    // bash itself reports its killed foreground job before our note.
    assert!(r.stderr.contains("Killed"), "{}", r.stderr);
    assert!(r
        .stderr
        .ends_with("\nsandboxd: command timed out after 500 ms\n"));

    let ws = server.workspace("tmo");
    for file in ["inner.pid", "outer.pid"] {
        let pid: i32 = std::fs::read_to_string(ws.join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            pid_is_gone(pid, Duration::from_secs(1)),
            "{file} {pid} lives"
        );
    }
    assert_eq!(server.exec("tmo", "echo next").stdout, "next\n");
}

#[test]
fn timeout_keeps_the_shell_when_bash_comes_back() {
    let server = Server::start();
    server.exec("keep", "mkdir w && cd w && KEEP=yes");
    let r = server.exec_timeout("keep", "echo partial >&2; sleep 30", 300);
    assert_eq!((r.exit_code, r.timed_out), (124, true));
    assert!(r.stderr.starts_with("partial\n"), "{}", r.stderr);
    assert!(r
        .stderr
        .ends_with("\nsandboxd: command timed out after 300 ms\n"));
    let r = server.exec("keep", "echo $KEEP; basename $PWD");
    assert_eq!(r.stdout, "yes\nw\n", "same shell after the timeout");
}

#[test]
fn builtin_busy_loop_times_out_and_the_shell_is_replaced() {
    let server = Server::start();
    let ws = server.workspace("busy");
    server.exec("busy", "mkdir sub && cd sub && export MARK=1");
    let (r, took) = timed(|| server.exec_timeout("busy", "while :; do :; done", 400));
    assert_eq!((r.exit_code, r.timed_out), (124, true));
    assert!(took < Duration::from_millis(400) + SLACK, "{took:?}");
    let r = server.exec("busy", "pwd; echo ${MARK:-fresh}");
    assert_eq!(r.stdout, format!("{}\nfresh\n", ws.display()));
}

#[test]
fn fork_loop_is_killed_entirely() {
    let server = Server::start();
    let sid: i32 = server
        .exec("forky", "echo $$")
        .stdout
        .trim()
        .parse()
        .unwrap();
    let (r, took) = timed(|| server.exec_timeout("forky", "while :; do sleep 30 & done", 500));
    assert!(r.timed_out);
    // Tearing down hundreds of processes is kernel work that competes with
    // the other tests for two cores; allow it one more second.
    assert!(took < Duration::from_millis(1500) + SLACK, "{took:?}");
    assert_eq!(live_session_members(sid), Vec::<i32>::new());
    assert_eq!(server.exec("forky", "echo alive").stdout, "alive\n");
}

#[test]
fn fifty_megabyte_flood_is_capped_and_the_session_survives() {
    let server = Server::start();
    server.exec("flood", "FLOODVAR=still");
    let (r, took) = timed(|| {
        server.exec(
            "flood",
            "head -c 50000000 /dev/zero | tr '\\0' a; echo done >&2",
        )
    });
    assert_eq!(r.stdout.len(), 1_048_576);
    assert!(r.stdout.bytes().all(|b| b == b'a'));
    assert_eq!(r.stderr, "done\n");
    assert!(r.truncated);
    assert_eq!((r.exit_code, r.timed_out), (0, false));
    assert!(took < Duration::from_secs(10), "{took:?}");
    let r = server.exec("flood", "echo $FLOODVAR");
    assert_eq!(r.stdout, "still\n");
    assert!(!r.truncated);
}

#[test]
fn cap_cuts_on_character_boundaries_on_both_streams() {
    let server = Server::start_with(&["--output-limit", "10"], &[]);
    // a é € 🌍 are 1, 2, 3 and 4 bytes: exactly 10.
    let r = server.exec("cap", "printf 'aé€🌍'");
    assert_eq!((r.stdout.as_str(), r.truncated), ("aé€🌍", false));
    let r = server.exec("cap", "printf 'aé€🌍b'");
    assert_eq!((r.stdout.as_str(), r.truncated), ("aé€🌍", true));
    let r = server.exec("cap", "printf 'aaaaaaaa🌍' >&2");
    assert_eq!((r.stderr.as_str(), r.truncated), ("aaaaaaaa", true));
    assert_eq!(r.stdout, "");
    // The timeout note is added after capping, so it is never cut off.
    let r = server.exec_timeout("cap", "printf 0123456789ABC >&2; sleep 5", 200);
    assert!(r.stderr.starts_with("0123456789\n"), "{}", r.stderr);
    assert!(r
        .stderr
        .ends_with("\nsandboxd: command timed out after 200 ms\n"));
}
