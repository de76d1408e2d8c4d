//! Commands that change their own shell in ways that break sandboxd's
//! wrapper: the next command must run, at once, in that shell or a fresh one
//! in the same workspace, and no marker may reach the output.

use std::time::Duration;

use duet_wire::ExecResult;

use crate::harness::{timed, Server};

/// Far below the 20 s default timeout: breakage must be noticed, not waited
/// out.
const PROMPT: Duration = Duration::from_secs(5);

/// What the command after the breaking one finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The same shell, still working.
    Kept,
    /// A fresh shell in the same workspace.
    Fresh,
}

/// True if `text` holds a whole marker: the head and a 32-hex-digit tail.
fn has_joined_marker(text: &str) -> bool {
    text.match_indices("__sandboxd_").any(|(at, head)| {
        let tail = &text.as_bytes()[at + head.len()..];
        tail.len() >= 32 && tail[..32].iter().all(u8::is_ascii_hexdigit)
    })
}

fn assert_clean(r: &ExecResult, cmd: &str, traced: bool) {
    for (stream, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        assert!(
            !has_joined_marker(text),
            "{cmd}: marker in {stream}: {text:?}"
        );
        // Traces (`set -x`, `set -v`) show the wrapper with the marker split.
        if !traced {
            assert!(!text.contains("__sandboxd_"), "{cmd}: {stream}: {text:?}");
        }
    }
}

/// Prepares a file, a directory change and a variable, runs `cmd`, then a
/// check command; asserts both are prompt and clean and that the check ran
/// in the shell `next` says. Returns the breaking command's result.
fn break_then_check(
    server: &Server,
    name: &str,
    cmd: &str,
    next: Next,
    traced: bool,
) -> ExecResult {
    let ws = server.workspace(name);
    let r = server.exec(
        name,
        "echo kept > before.txt; mkdir -p sub; cd sub; export MARK=set",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");

    let (broken, took) = timed(|| server.exec(name, cmd));
    assert!(took < PROMPT, "{cmd}: took {took:?}");
    assert!(!broken.timed_out, "{cmd}: {broken:?}");
    assert_clean(&broken, cmd, traced);
    let noted = broken.stderr.contains("sandboxd: the shell ended (");
    assert_eq!(noted, next == Next::Fresh, "{cmd}: {broken:?}");

    let (r, took) =
        timed(|| server.exec(name, "cat ~/before.txt && echo \"ok ${MARK:-fresh} $PWD\""));
    assert!(took < PROMPT, "{cmd}: next command took {took:?}");
    assert_clean(&r, cmd, traced);
    let (mark, dir) = match next {
        Next::Kept => ("set", ws.join("sub")),
        Next::Fresh => ("fresh", ws.clone()),
    };
    // A DEBUG trap's own output may surround the command's.
    let lines: Vec<&str> = r.stdout.lines().filter(|l| *l != "dbg").collect();
    assert_eq!(
        lines,
        ["kept", &format!("ok {mark} {}", dir.display())],
        "{cmd}: {r:?}"
    );
    assert_eq!(r.exit_code, 0, "{cmd}: {r:?}");
    // And the shell goes on working.
    assert_eq!(
        server.exec(name, "echo again").stdout.replace("dbg\n", ""),
        "again\n",
        "{cmd}"
    );
    broken
}

#[test]
fn commands_that_break_the_wrapper_get_a_fresh_shell_at_once() {
    let server = Server::start();
    for (i, cmd) in [
        "enable -n eval",
        "enable -n printf",
        "enable -n builtin",
        "shopt -s expand_aliases; alias builtin='printf %s%s'",
        "shopt -s expand_aliases; alias builtin='printf %s%s\\\\n'",
        "shopt -s expand_aliases; alias builtin=echo",
        "builtin() { :; }",
        "builtin() { echo fake; }",
        "set -n",
        "exec >/dev/null",
        "exec 1>&-",
        "exec 2>&-",
        "exec 2>/dev/null",
        "exec 1>&2",
        "exec >/dev/null 2>&1",
        "shopt -s extdebug; trap false DEBUG",
        "enable -n eval; enable -n enable",
        "echo before; enable -n printf; echo after",
    ]
    .into_iter()
    .enumerate()
    {
        break_then_check(&server, &format!("broken-{i}"), cmd, Next::Fresh, false);
    }
}

#[test]
fn commands_that_end_or_replace_bash_get_a_fresh_shell_at_once() {
    let server = Server::start();
    for (i, cmd) in [
        "exit 3",
        "set -e; false",
        "kill -9 $$",
        "exec sh",
        "exec python3",
        "exec cat",
        "exec bash",
        "trap 'echo bye' EXIT; exit 4",
        "sleep 30 & kill -9 $$",
    ]
    .into_iter()
    .enumerate()
    {
        break_then_check(&server, &format!("ended-{i}"), cmd, Next::Fresh, false);
    }
}

#[test]
fn harmless_changes_keep_the_shell() {
    let server = Server::start();
    for (i, (cmd, traced)) in [
        ("enable -n enable", false),
        ("exec 0</dev/null", false),
        ("eval() { :; }; printf() { :; }; :() { :; }", false),
        ("builtin() { command builtin \"$@\"; }", false),
        ("readonly PATH IFS HOME", false),
        ("trap 'echo dbg' DEBUG", false),
        ("trap 'echo bye' EXIT", false),
        ("set -x", true),
        ("set -v", true),
        ("set -euo pipefail", false),
    ]
    .into_iter()
    .enumerate()
    {
        break_then_check(&server, &format!("kept-{i}"), cmd, Next::Kept, traced);
    }
}

#[test]
fn output_before_the_breakage_is_returned() {
    let server = Server::start();
    let r = server.exec(
        "partial",
        "echo out; echo err >&2; exec >/dev/null; echo lost",
    );
    assert_eq!((r.stdout.as_str(), r.exit_code), ("out\n", 137));
    assert!(r.stderr.starts_with("err\n"), "{r:?}");
    // The stdout marker still carries the status when only stderr is gone.
    let r = server.exec("partial", "echo out; exec 2>&-; (exit 5)");
    assert_eq!((r.stdout.as_str(), r.exit_code), ("out\n", 5));
}

#[test]
fn a_broken_shell_is_noticed_even_after_a_long_command() {
    let server = Server::start();
    let (r, took) = timed(|| server.exec("slow-break", "sleep 1; enable -n printf"));
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < PROMPT, "{took:?}");
    assert_eq!(r.exit_code, 137);
    assert_eq!(server.exec("slow-break", "echo fine").stdout, "fine\n");
}

#[test]
fn a_timed_out_command_with_its_output_redirected_is_replaced_at_once() {
    let server = Server::start();
    let (r, took) = timed(|| server.exec_timeout("tmo-break", "exec >/dev/null; sleep 30", 300));
    assert!(r.timed_out);
    assert!(took < Duration::from_millis(1300), "{took:?}");
    assert_eq!(server.exec("tmo-break", "echo fine").stdout, "fine\n");
}

const FRESH: &str = "in a fresh shell in the same workspace \
                     (files kept; working directory, variables and background jobs reset)\n";

/// The note a command gets when its shell ended for `cause`.
fn ended_note(cause: &str) -> String {
    format!("sandboxd: the shell ended ({cause}); the next command starts {FRESH}")
}

#[test]
fn the_note_says_why_the_shell_ended() {
    let server = Server::start();
    for (cmd, code, cause) in [
        ("echo bye >&2; exit 7", 7, "it exited with code 7"),
        ("kill -9 $$", 137, "it was killed by signal 9"),
        ("exec sh", 0, "it exited with code 0"),
        (
            "exec >/dev/null",
            137,
            "its stdout was closed or redirected",
        ),
        ("exec 1>&-", 137, "its stdout was closed or redirected"),
        (
            "exec 2>&-; (exit 4)",
            4,
            "its stderr was closed or redirected",
        ),
        (
            "enable -n printf",
            137,
            "it stopped running commands: set -n, or builtin or printf disabled or redefined",
        ),
        (
            "enable -n eval",
            0,
            "the command changed it so that later commands would fail: \
             eval disabled, or an alias or function named builtin",
        ),
    ] {
        let r = server.exec("why", cmd);
        assert_eq!(r.exit_code, code, "{cmd}: {r:?}");
        assert!(r.stderr.ends_with(&ended_note(cause)), "{cmd}: {r:?}");
        assert_eq!(r.stderr.matches("sandboxd:").count(), 1, "{cmd}: {r:?}");
        let r = server.exec("why", "echo fine");
        assert_eq!(
            (r.stdout.as_str(), r.stderr.as_str()),
            ("fine\n", ""),
            "after {cmd}"
        );
    }

    // A timeout that bash does not come back from says both.
    let r = server.exec_timeout("why", "while :; do :; done", 300);
    assert!(
        r.stderr.ends_with(&format!(
            "sandboxd: command timed out after 300 ms\n{}",
            ended_note("it was still busy 1000 ms after the timeout")
        )),
        "{r:?}"
    );
    // One that bash comes back from keeps the shell and says nothing more.
    let r = server.exec_timeout("why", "sleep 5", 300);
    assert!(
        r.stderr
            .ends_with("sandboxd: command timed out after 300 ms\n"),
        "{r:?}"
    );
    assert_eq!(r.stderr.matches("sandboxd:").count(), 1, "{r:?}");
}

#[test]
fn a_shell_that_dies_between_commands_is_named_in_the_next_command() {
    let server = Server::start();
    let r = server.exec(
        "between",
        "(sleep 0.2; kill -9 $$) >/dev/null 2>&1 & cd /; X=1",
    );
    assert_eq!(r.stderr, "");
    std::thread::sleep(Duration::from_millis(600));
    let r = server.exec("between", "echo ${X:-fresh} >&2; basename $PWD");
    assert_eq!(r.stdout, "between\n");
    assert_eq!(
        r.stderr,
        format!(
            "fresh\nsandboxd: the shell ended (it was killed by signal 9); this command ran {FRESH}"
        )
    );
    assert_eq!(server.exec("between", "true").stderr, "");
}
