//! One persistent bash process per sandbox, driven over pipes.
//!
//! Design
//! ------
//! bash runs as `bash --noprofile --norc` in a session of its own (`setsid`),
//! with a cleared environment, three pipes, the workspace as cwd and HOME,
//! and the resource limits of `rlimits`.
//! It is not given a terminal: a pty would merge stdout and stderr, echo
//! input and add `\r`, while the pipes keep both streams separate and
//! byte-exact.
//!
//! For each command sandboxd writes one line to bash's stdin:
//!
//! ```text
//! builtin eval '<cmd, each ' written as '\''>' </dev/null; builtin printf '%s%s%d\n' HEAD TAIL "$?"; builtin printf '%s%s\n' HEAD TAIL >&2
//! ```
//!
//! * Quoting the whole command as one `eval` argument means bash parses the
//!   command only inside `eval`: an unbalanced quote or any syntax error is
//!   an error of that one command and cannot swallow the lines that follow.
//! * `</dev/null` gives the command an immediate EOF on stdin, so it can
//!   never read (and eat) the scripts meant for bash itself.
//! * HEAD+TAIL is a marker with a fresh random TAIL per command, so output
//!   cannot forge it. It is printed in two pieces so that `set -x` traces of
//!   the `printf` lines never contain it whole. The stdout marker carries the
//!   exit status; output before it (even without a trailing newline) is the
//!   command's, and the marker line itself is stripped (see `output`).
//! * `builtin` keeps user-defined functions named `eval` or `printf` out.
//!
//! Because the shell stays alive, `cd`, variables, functions and files
//! persist. State leaks between commands are intended; the container, not
//! this process, is the security boundary.
//!
//! Trade-offs:
//! * A command that ends bash (`exit 3`, `set -e` plus a failure) is noticed
//!   through the child's exit or EOF on its pipes, never by waiting for the
//!   timeout. The next command gets a fresh shell in the same workspace.
//! * On timeout every process of the session except bash is killed; that
//!   includes background jobs of earlier commands. If bash does not print its
//!   markers within [`GRACE`] (it is busy in a builtin loop, or its stdout
//!   was redirected away with `exec`), or starts new processes meanwhile (a
//!   loop in bash that forks), bash is killed too and replaced. bash's own
//!   report of a killed job (`Killed ...`) stays in stderr before the
//!   timeout note. The timeout counts from the start of the command, not
//!   from its arrival in the sandbox's queue.
//! * Output a background job writes after its command ended is read as part
//!   of a later command's output, as in a terminal; output arriving in the
//!   same read as a marker, after it, is dropped.
//! * A process that calls `setsid` itself leaves the session and is not
//!   found when killing.
//! * If sandboxd itself dies (crash, SIGKILL), each bash is killed with it
//!   (`PR_SET_PDEATHSIG`), so the rest of an interrupted command line never
//!   runs behind the back of the shell a restarted sandboxd starts. The
//!   processes bash had started are not reached and run on until they end
//!   (in the container, the container ends with sandboxd).
//! * `$?` at the start of a command reflects the marker `printf`, not the
//!   previous command.

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::error::Error;
use crate::output::Capture;
use crate::procs;
use crate::rlimits::Limits;

/// How long bash gets to come back after the command's processes were
/// killed on timeout.
const GRACE: Duration = Duration::from_millis(1000);
/// How often to look for new processes during the grace period.
const BUSY_POLL: Duration = Duration::from_millis(50);
/// How long to keep reading output of a shell that is gone.
const DRAIN: Duration = Duration::from_millis(250);
/// How long to wait for a killed shell to be reaped.
const REAP: Duration = Duration::from_millis(1000);
const READ_CHUNK: usize = 64 * 1024;
/// Fixed, public first half of every marker.
const MARKER_HEAD: &str = "__sandboxd_";

/// Exit code reported for a command that timed out (as coreutils `timeout`).
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Exit code reported for a command ended by destroying its sandbox
/// (128 + SIGKILL, as a shell reports a killed process).
pub const DESTROYED_EXIT_CODE: i32 = 137;

/// What one command produced.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub truncated: bool,
    pub started: SystemTime,
    pub duration: Duration,
    /// False when the shell is gone or was killed; the session must then be
    /// dropped and a new one spawned for the next command.
    pub shell_usable: bool,
}

pub struct Session {
    child: Child,
    /// bash's pid, which is also its session id.
    sid: i32,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
}

/// How the first phase of a command ended.
enum Phase {
    Finished,
    ShellGone,
    TimedOut,
    Cancelled,
}

impl Session {
    /// Starts bash in `workspace` with exactly the environment `env` plus
    /// `HOME` set to the workspace, under `limits`.
    pub fn spawn(
        workspace: &Path,
        env: &[(String, String)],
        limits: Limits,
    ) -> Result<Session, Error> {
        let mut command = Command::new("bash");
        command
            .args(["--noprofile", "--norc"])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("HOME", workspace)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let parent = std::process::id();
        // SAFETY: setsid, prctl, getppid, getrlimit and setrlimit are
        // async-signal-safe and touch no memory of ours.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                // The death signal follows the spawning thread, a runtime
                // worker that lives as long as sandboxd serves.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                if u32::try_from(libc::getppid()) != Ok(parent) {
                    return Err(io::Error::other("sandboxd exited during spawn"));
                }
                limits.apply()
            });
        }
        let mut child = command.spawn().map_err(Error::Spawn)?;
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (
            child.id(),
            child.stdin.take(),
            child.stdout.take(),
            child.stderr.take(),
        ) else {
            return Err(Error::Spawn(io::Error::other("shell pipes missing")));
        };
        let sid = i32::try_from(pid).map_err(|_| Error::Spawn(io::Error::other("pid overflow")))?;
        Ok(Session {
            child,
            sid,
            stdin,
            stdout,
            stderr,
        })
    }

    /// True while bash has not exited (it may have died between commands).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Runs one command. `cancelled` resolving ends it at once (the sandbox
    /// is being destroyed).
    pub async fn run(
        &mut self,
        cmd: &str,
        timeout: Duration,
        output_limit: usize,
        cancelled: impl Future<Output = ()>,
    ) -> Outcome {
        let started = SystemTime::now();
        let clock = Instant::now();
        let tail = random_tail();
        let marker = format!("{MARKER_HEAD}{tail}");
        let script = wrap_command(cmd, &tail);
        let mut out = Capture::new(marker.as_bytes(), output_limit);
        let mut err = Capture::new(marker.as_bytes(), output_limit);
        let Session {
            child,
            sid,
            stdin,
            stdout,
            stderr,
        } = self;
        let sid = *sid;

        let phase = tokio::select! {
            biased;
            () = cancelled => Phase::Cancelled,
            finished = async {
                stdin.write_all(script.as_bytes()).await.is_ok()
                    && pump(stdout, stderr, &mut out, &mut err, true).await
            } => if finished { Phase::Finished } else { Phase::ShellGone },
            _ = child.wait() => Phase::ShellGone,
            () = tokio::time::sleep(timeout) => Phase::TimedOut,
        };

        let (exit_code, timed_out, shell_usable, note) = match phase {
            Phase::Finished => (None, false, true, None),
            Phase::ShellGone => {
                let status = end_shell(child, sid, stdout, stderr, &mut out, &mut err).await;
                (status.map(status_code), false, false, None)
            }
            Phase::TimedOut => {
                let killed = procs::kill_session(sid, Some(sid));
                let came_back = tokio::select! {
                    back = pump(stdout, stderr, &mut out, &mut err, true) => back,
                    _ = child.wait() => false,
                    () = shell_starts_processes(sid, &killed) => false,
                    () = tokio::time::sleep(GRACE) => false,
                };
                if !came_back {
                    end_shell(child, sid, stdout, stderr, &mut out, &mut err).await;
                }
                let note = format!(
                    "sandboxd: command timed out after {} ms",
                    timeout.as_millis()
                );
                (Some(TIMEOUT_EXIT_CODE), true, came_back, Some(note))
            }
            Phase::Cancelled => {
                end_shell(child, sid, stdout, stderr, &mut out, &mut err).await;
                let note = "sandboxd: sandbox destroyed while the command was running".to_string();
                (Some(DESTROYED_EXIT_CODE), false, false, Some(note))
            }
        };

        let out = out.finish();
        let err = err.finish();
        // The marker's trailer is the status `$?` printed by our own wrapper.
        let exit_code = exit_code
            .or_else(|| out.trailer.as_deref().and_then(|t| t.parse().ok()))
            .unwrap_or(DESTROYED_EXIT_CODE);
        let mut stderr_text = err.text;
        if let Some(note) = note {
            if !stderr_text.is_empty() && !stderr_text.ends_with('\n') {
                stderr_text.push('\n');
            }
            stderr_text.push_str(&note);
            stderr_text.push('\n');
        }
        Outcome {
            stdout: out.text,
            stderr: stderr_text,
            exit_code,
            timed_out,
            truncated: out.truncated || err.truncated,
            started,
            duration: clock.elapsed(),
            shell_usable,
        }
    }
}

impl Drop for Session {
    /// Whatever path drops a session, nothing it started outlives it.
    /// (kill_on_drop then lets tokio reap bash itself.)
    fn drop(&mut self) {
        procs::kill_session(self.sid, None);
    }
}

/// Resolves once the shell starts a new process after its command's
/// processes were killed: it is still running the command itself (a loop in
/// bash), so waiting out the grace period would only let it fork more.
async fn shell_starts_processes(sid: i32, killed: &HashSet<i32>) {
    loop {
        tokio::time::sleep(BUSY_POLL).await;
        let members = procs::session_members(sid);
        if members
            .iter()
            .any(|pid| *pid != sid && !killed.contains(pid))
        {
            return;
        }
    }
}

/// Kills everything left of the session including bash, reaps bash and
/// reads what output is still in the pipes. Returns bash's exit status if it
/// could be reaped.
async fn end_shell(
    child: &mut Child,
    sid: i32,
    stdout: &mut ChildStdout,
    stderr: &mut ChildStderr,
    out: &mut Capture,
    err: &mut Capture,
) -> Option<ExitStatus> {
    // Kill before reaping: an unreaped bash keeps its pid, and so the
    // session id, from being reused.
    procs::kill_session(sid, None);
    let status = tokio::time::timeout(REAP, child.wait()).await.ok()?.ok();
    let _ = tokio::time::timeout(DRAIN, pump(stdout, stderr, out, err, false)).await;
    status
}

/// Reads both pipes into their captures. With `until_markers`, returns true
/// once both markers were seen and false as soon as either pipe closes (the
/// shell is gone); otherwise reads until both pipes close.
async fn pump(
    stdout: &mut ChildStdout,
    stderr: &mut ChildStderr,
    out: &mut Capture,
    err: &mut Capture,
    until_markers: bool,
) -> bool {
    let mut out_buf = vec![0u8; READ_CHUNK];
    let mut err_buf = vec![0u8; READ_CHUNK];
    let (mut out_open, mut err_open) = (true, true);
    loop {
        if until_markers && out.is_done() && err.is_done() {
            return true;
        }
        if !out_open && !err_open {
            return false;
        }
        let want_out = out_open && !(until_markers && out.is_done());
        let want_err = err_open && !(until_markers && err.is_done());
        tokio::select! {
            read = stdout.read(&mut out_buf), if want_out => match read {
                Ok(n) if n > 0 => out.feed(&out_buf[..n]),
                _ if until_markers => return false,
                _ => out_open = false,
            },
            read = stderr.read(&mut err_buf), if want_err => match read {
                Ok(n) if n > 0 => err.feed(&err_buf[..n]),
                _ if until_markers => return false,
                _ => err_open = false,
            },
        }
    }
}

/// The line that runs `cmd` and then prints the end markers (see the module
/// docs). `tail` is the random half of the marker.
fn wrap_command(cmd: &str, tail: &str) -> String {
    format!(
        "builtin eval {} </dev/null; \
         builtin printf '%s%s%d\\n' {MARKER_HEAD} {tail} \"$?\"; \
         builtin printf '%s%s\\n' {MARKER_HEAD} {tail} >&2\n",
        single_quote(cmd)
    )
}

/// Quotes `s` as one bash word that expands to exactly `s`.
fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// 128 random bits as hex: unguessable by the command, so it cannot fake the
/// end of its own output.
fn random_tail() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Without the OS generator fall back to a per-process unique value;
        // still never printed by accident.
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos ^ u128::from(std::process::id())).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exit code as a shell reports it: the code, or 128 + the signal number.
fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|sig| 128 + sig))
        .unwrap_or(DESTROYED_EXIT_CODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash_echo(word: &str) -> Vec<u8> {
        let out = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-c"])
            .arg(format!("printf '%s' {word}"))
            .output()
            .expect("run bash");
        out.stdout
    }

    #[test]
    fn single_quote_round_trips_through_bash() {
        for s in [
            "",
            "plain",
            "it's",
            "'",
            "''",
            "a'b'c",
            "$HOME `id` $(id) \\ \" ! *",
            "line1\nline2",
            "é 🌍",
        ] {
            assert_eq!(bash_echo(&single_quote(s)), s.as_bytes(), "{s:?}");
        }
    }

    #[test]
    fn single_quote_escapes_quotes() {
        assert_eq!(single_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn wrapped_command_is_one_line_that_prints_split_markers() {
        let line = wrap_command("echo 'hi'", "abc");
        assert_eq!(
            line,
            "builtin eval 'echo '\\''hi'\\''' </dev/null; \
             builtin printf '%s%s%d\\n' __sandboxd_ abc \"$?\"; \
             builtin printf '%s%s\\n' __sandboxd_ abc >&2\n"
        );
        assert!(!line.contains("__sandboxd_abc"));
    }

    #[test]
    fn tails_are_random_hex() {
        let (a, b) = (random_tail(), random_tail());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
