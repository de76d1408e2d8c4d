//! Timeouts, output caps and resource limits.

use std::time::Duration;

use crate::harness::{live_session_members, pid_is_gone, timed, Server, SLACK};

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
    let sid = server.shell_pid("forky");
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

/// `ulimit` as this test process sees it: a shell's limit can be at most
/// the hard limit sandboxd inherited from us.
fn own_ulimit(flag: &str) -> String {
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-c"])
        .arg(format!("ulimit -H {flag}"))
        .output()
        .expect("run bash");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// The smaller of a limit (in `ulimit`'s units) and our own hard limit.
fn expected_ulimit(flag: &str, value: u64) -> String {
    match own_ulimit(flag).parse::<u64>() {
        Ok(hard) if hard < value => hard.to_string(),
        _ => value.to_string(),
    }
}

#[test]
fn file_size_limit_stops_a_disk_filler_and_the_shell_survives() {
    let server = Server::start_with(&["--max-file-bytes", "65536"], &[]);
    server.exec("disk", "KEPT=yes");
    let r = server.exec("disk", "head -c 10000000 /dev/zero > big; echo $?");
    // 128 + SIGXFSZ, and bash names the signal.
    assert_eq!(r.stdout, format!("{}\n", 128 + libc::SIGXFSZ));
    assert!(
        r.stderr.contains("File size limit exceeded"),
        "{}",
        r.stderr
    );
    let big = server.workspace("disk").join("big");
    assert_eq!(std::fs::metadata(big).expect("big").len(), 65536);
    // Children inherit the limit; pipes (and so the output) are not files.
    let r = server.exec(
        "disk",
        "echo $KEPT; bash -c 'ulimit -f'; head -c 100000 /dev/zero | tr '\\0' a",
    );
    assert_eq!(r.stdout, format!("yes\n64\n{}", "a".repeat(100_000)));
    assert_eq!(r.exit_code, 0);
}

#[test]
fn file_size_limit_defaults_to_a_gibibyte_and_zero_lifts_it() {
    // bash counts in 1024-byte blocks.
    let r = Server::start().exec("fsize", "ulimit -f");
    assert_eq!(r.stdout.trim(), expected_ulimit("-f", 1 << 20));
    let r = Server::start_with(&["--max-file-bytes", "0"], &[]).exec("fsize", "ulimit -f");
    assert_eq!(r.stdout.trim(), own_ulimit("-f"));
}

#[test]
fn process_limit_is_off_by_default_and_applies_to_every_shell() {
    let r = Server::start().exec("nproc", "ulimit -u");
    assert_eq!(r.stdout.trim(), own_ulimit("-u"));
    let server = Server::start_with(&["--max-procs", "300"], &[]);
    for name in ["nproc-a", "nproc-b"] {
        let r = server.exec(name, "ulimit -Su; ulimit -Hu; bash -c 'ulimit -u'");
        let want = expected_ulimit("-u", 300);
        assert_eq!(r.stdout, format!("{want}\n{want}\n{want}\n"), "{name}");
    }
}

#[test]
fn shells_are_capped_and_sandboxes_with_one_keep_it() {
    let server = Server::start_with(&["--max-sessions", "2"], &[]);
    assert_eq!(server.exec("cap-a", "echo a").stdout, "a\n");
    assert_eq!(server.exec("cap-b", "echo b").stdout, "b\n");

    let refused = || server.json("POST", "/v1/sandboxes/cap-c/exec", r#"{"cmd":"echo c"}"#);
    let (status, value) = refused();
    assert_eq!(status, 503, "{value}");
    let error = value["error"].as_str().unwrap();
    assert!(
        error.contains("at most 2 shells") && error.contains("--max-sessions"),
        "{error}"
    );
    assert!(!server.workspace("cap-c").exists());

    // A sandbox that has a place keeps it when its shell is replaced.
    let r = server.exec("cap-a", "exit 3");
    assert_eq!(r.exit_code, 3);
    assert_eq!(refused().0, 503);
    assert_eq!(server.exec("cap-a", "echo again").stdout, "again\n");
    assert_eq!(server.exec("cap-b", "echo b").stdout, "b\n");

    // Destroying one frees its place.
    assert_eq!(server.destroy("cap-b").0, 200);
    assert_eq!(server.exec("cap-c", "echo c").stdout, "c\n");
    assert_eq!(
        server
            .json("POST", "/v1/sandboxes/cap-b/exec", r#"{"cmd":"true"}"#)
            .0,
        503
    );
}

#[test]
fn idle_shells_are_ended_and_give_back_their_place() {
    let server = Server::start_with(&["--max-sessions", "1", "--idle-shell-secs", "1"], &[]);
    let ws = server.workspace("idler");
    server.exec("idler", "touch kept; mkdir sub; cd sub; X=1");
    let pid = server.shell_pid("idler");
    assert_eq!(
        server
            .json("POST", "/v1/sandboxes/other/exec", r#"{"cmd":"true"}"#)
            .0,
        503
    );
    assert!(pid_is_gone(pid, Duration::from_secs(3)), "idle shell lives");

    // Its place went to whoever asks first.
    assert_eq!(server.exec("other", "echo in").stdout, "in\n");
    assert_eq!(
        server
            .json("POST", "/v1/sandboxes/idler/exec", r#"{"cmd":"true"}"#)
            .0,
        503
    );
    assert!(pid_is_gone(
        server.shell_pid("other"),
        Duration::from_secs(3)
    ));

    let r = server.exec("idler", "ls; echo ${X:-fresh} $PWD");
    assert_eq!(r.stdout, format!("kept\nsub\nfresh {}\n", ws.display()));
    assert_eq!(
        r.stderr,
        "sandboxd: the shell ended (it was idle for 1 s); this command ran in a fresh shell \
         in the same workspace (files kept; working directory, variables and background jobs \
         reset)\n"
    );
}

#[test]
fn a_shell_busy_with_a_command_is_not_idle() {
    let server = Server::start_with(&["--idle-shell-secs", "1"], &[]);
    server.exec("busy-idle", "X=kept");
    let r = server.exec("busy-idle", "sleep 2; echo $X");
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("kept\n", ""));
    let r = server.exec("busy-idle", "echo $X");
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("kept\n", ""));
}
