//! Shell semantics: persistence, streams, exit codes, stdin, environment.

use std::time::Duration;

use crate::harness::{timed, Server};

#[test]
fn cwd_variables_functions_and_files_persist() {
    let server = Server::start();
    let ws = server.workspace("persist");

    let r = server.exec("persist", "pwd");
    assert_eq!(r.stdout, format!("{}\n", ws.display()));
    assert!(ws.is_dir());

    server.exec("persist", "mkdir sub && cd sub");
    assert_eq!(
        server.exec("persist", "pwd").stdout,
        format!("{}/sub\n", ws.display())
    );

    server.exec("persist", "export X=1; Y=two; greet() { echo \"hi $1\"; }");
    let r = server.exec(
        "persist",
        "echo \"$X $Y\"; greet you; bash -c 'echo child:$X:$Y'",
    );
    assert_eq!(r.stdout, "1 two\nhi you\nchild:1:\n");

    server.exec("persist", "echo content > note.txt");
    assert_eq!(server.exec("persist", "cat note.txt").stdout, "content\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/note.txt")).unwrap(),
        "content\n"
    );
}

#[test]
fn stdout_and_stderr_are_separate_and_byte_exact() {
    let server = Server::start();
    let r = server.exec(
        "streams",
        "echo out1; echo err1 >&2; printf out2; printf err2 >&2",
    );
    assert_eq!(r.stdout, "out1\nout2");
    assert_eq!(r.stderr, "err1\nerr2");
    assert_eq!((r.exit_code, r.success), (0, true));

    let r = server.exec("streams", "printf 'héllo 🌍'; printf 'ошибка ✗' >&2");
    assert_eq!(r.stdout, "héllo 🌍");
    assert_eq!(r.stderr, "ошибка ✗");

    let r = server.exec("streams", r"printf 'a\xffb'");
    assert_eq!(r.stdout, "a\u{FFFD}b", "invalid bytes are replaced");

    // Text resembling the marker, and output spanning many pipe reads.
    let r = server.exec("streams", "echo __sandboxd_; printf __sandboxd_");
    assert_eq!(r.stdout, "__sandboxd_\n__sandboxd_");
    let r = server.exec("streams", "head -c 300000 /dev/zero | tr '\\0' x");
    assert_eq!(r.stdout.len(), 300_000);
    assert!(r.stdout.bytes().all(|b| b == b'x'));
    assert!(r.stderr.is_empty());

    let r = server.exec("streams", "true");
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
}

#[test]
fn exit_codes_are_reported() {
    let server = Server::start();
    let r = server.exec("codes", "false");
    assert_eq!((r.exit_code, r.success, r.timed_out), (1, false, false));
    let r = server.exec("codes", "(exit 42)");
    assert_eq!(r.exit_code, 42);
    let r = server.exec("codes", "ls /definitely/not/here");
    assert_eq!(r.exit_code, 2);
    assert!(r.stderr.contains("No such file"), "{}", r.stderr);
    let r = server.exec("codes", "no_such_command_xyz");
    assert_eq!(r.exit_code, 127);
}

#[test]
fn exit_ends_the_shell_and_the_next_command_gets_a_fresh_one() {
    let server = Server::start();
    let ws = server.workspace("exiter");
    server.exec(
        "exiter",
        "mkdir -p sub && cd sub && export KEEP=1 && touch kept",
    );

    let (r, took) = timed(|| server.exec("exiter", "echo bye; echo gone >&2; exit 7"));
    assert_eq!((r.exit_code, r.success, r.timed_out), (7, false, false));
    assert_eq!(r.stdout, "bye\n");
    assert!(
        r.stderr
            .starts_with("gone\nsandboxd: the shell ended (it exited with code 7); "),
        "{}",
        r.stderr
    );
    assert!(took < Duration::from_secs(2), "exit noticed late: {took:?}");

    let r = server.exec("exiter", "pwd; echo \"${KEEP:-unset}\"; ls sub");
    assert_eq!(r.stdout, format!("{}\nunset\nkept\n", ws.display()));

    // A background job still holding the pipes must not delay the answer.
    let (r, took) = timed(|| server.exec("exiter", "sleep 30 & exit 3"));
    assert_eq!(r.exit_code, 3);
    assert!(took < Duration::from_secs(2), "exit noticed late: {took:?}");
    assert_eq!(server.exec("exiter", "echo again").stdout, "again\n");
}

#[test]
fn syntax_errors_do_not_desync_the_shell() {
    let server = Server::start();
    server.exec("syntax", "mkdir d && cd d && V=kept");
    for bad in [
        "echo 'unbalanced",
        "echo \"also",
        "if then fi",
        "echo $(",
        "(",
        "}",
    ] {
        let r = server.exec("syntax", bad);
        assert_ne!(r.exit_code, 0, "{bad}");
        assert!(!r.stderr.is_empty(), "{bad}");
        assert!(!r.timed_out, "{bad}");
    }
    let r = server.exec("syntax", "echo \"$V\"; basename \"$PWD\"; echo 'it'\\''s'");
    assert_eq!(r.stdout, "kept\nd\nit's\n");
}

#[test]
fn stdin_is_at_eof() {
    let server = Server::start();
    let (r, took) = timed(|| server.exec("stdin", "cat"));
    assert_eq!((r.stdout.as_str(), r.exit_code), ("", 0));
    assert!(took < Duration::from_secs(2));
    let r = server.exec("stdin", "read x; echo \"rc=$? x=$x\"");
    assert_eq!(r.stdout, "rc=1 x=\n");
    // The shell did not lose its own input to the command.
    assert_eq!(server.exec("stdin", "echo fine").stdout, "fine\n");
}

#[test]
fn environment_is_small_and_does_not_leak() {
    let server = Server::start_with(&[], &[("SANDBOXD_TEST_SECRET", "hunter2")]);
    let ws = server.workspace("envy");
    let r = server.exec("envy", "env");
    assert!(!r.stdout.contains("hunter2"), "{}", r.stdout);
    let names: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !["PWD", "OLDPWD", "SHLVL", "_", "USER"].contains(k))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["HOME", "LANG", "PATH", "TERM"]);
    let r = server.exec("envy", "echo \"$HOME|$LANG|$TERM\"; cd; pwd");
    assert_eq!(r.stdout, format!("{0}|C.UTF-8|dumb\n{0}\n", ws.display()));
}

#[test]
fn xtrace_does_not_break_the_markers() {
    let server = Server::start();
    let r = server.exec("trace", "set -x");
    assert_eq!(r.exit_code, 0);
    let r = server.exec("trace", "echo traced");
    assert_eq!(r.stdout, "traced\n");
    assert!(r.stderr.contains("+ echo traced"), "{}", r.stderr);
    let r = server.exec("trace", "set +x; echo quiet");
    assert_eq!(r.stdout, "quiet\n");
    assert_eq!(server.exec("trace", "echo clean").stderr, "");
}

#[test]
fn background_jobs_do_not_hold_up_the_command() {
    let server = Server::start();
    let (r, took) = timed(|| server.exec("bg", "sleep 20 & echo started"));
    assert_eq!(r.stdout, "started\n");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn sandboxes_are_isolated() {
    let server = Server::start();
    server.exec(
        "iso-a",
        "echo a > only-a; mkdir deep; cd deep; export WHO=a",
    );
    let b = server.exec("iso-b", "pwd; ls -A; echo \"${WHO:-none}\"");
    assert_eq!(
        b.stdout,
        format!("{}\nnone\n", server.workspace("iso-b").display())
    );
    let a = server.exec("iso-a", "pwd; echo $WHO");
    assert_eq!(
        a.stdout,
        format!("{}/deep\na\n", server.workspace("iso-a").display())
    );
    assert!(server.workspace("iso-a").join("only-a").exists());
    assert!(!server.workspace("iso-b").join("only-a").exists());
}
