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
//! For each command sandboxd writes one line, then an empty line (the
//! sentinel, below), to bash's stdin:
//!
//! ```text
//! builtin eval '<cmd, each ' written as '\''>' </dev/null; builtin printf '%s%s%d\n' HEAD TAIL "$?"; builtin printf '%s%s\n' HEAD TAIL >&2
//! ```
//!
//! * Quoting the whole command as one `eval` argument means bash parses the
//!   command only inside `eval`: an unbalanced quote or any syntax error is
//!   an error of that one command and cannot swallow the lines that follow.
//! * `</dev/null` gives the command an immediate EOF on stdin, so it can
//!   never read (and eat) the scripts meant for bash itself. A program the
//!   command `exec`s gets that EOF too and usually ends at once.
//! * HEAD+TAIL is a marker with a fresh random TAIL per command, so output
//!   cannot forge it. It is printed in two pieces so that `set -x` traces of
//!   the `printf` lines never contain it whole. The stdout marker carries the
//!   exit status; output before it (even without a trailing newline) is the
//!   command's, and the marker line itself is stripped (see `output`).
//! * `builtin` keeps user-defined functions named `eval` or `printf` out.
//! * The markers are printed by the line itself, not from inside `eval`:
//!   bash parsed that line before the command ran, so an alias the command
//!   defines cannot touch them.
//!
//! Because the shell stays alive, `cd`, variables, functions and files
//! persist. State leaks between commands are intended; the container, not
//! this process, is the security boundary.
//!
//! A command may be followed (see `progress`): its progress is told when it
//! starts and gets its output as the captures turn it into text, so what it
//! gets is always the start of what the result will hold, never a marker.
//!
//! A shell no command can break
//! ----------------------------
//! A command may change its shell in any way bash allows, and some ways stop
//! the wrapper from working: `enable -n printf`, `set -n`, `exec >/dev/null`
//! or `exec 2>&-` stop its markers; `enable -n eval`, an alias or a function
//! named `builtin` break every later line. Two facts make this exactly
//! detectable:
//! * bash reads a pipe one byte at a time, so it reads nothing past the
//!   current line until that line has finished running;
//! * `FIONREAD` on the write end of its stdin tells how much it has not
//!   read yet.
//!
//! So once the sentinel has been read, bash is done with the wrapper and
//! whatever it printed is already in the output pipes. If those are drained
//! too and a marker is still missing, the marker will never come: the shell
//! is broken. This is checked every [`STALL_POLL`] while markers are
//! outstanding, so breakage is noticed within tens of milliseconds, not at
//! the timeout, and a command that ends before the first check costs
//! nothing. A long command keeps its stdin unread and is simply waited for.
//!
//! After the command's markers sandboxd writes a probe: the same wrapper
//! around an empty command, with a fresh TAIL, then the sentinel. It must
//! end with status 0 within [`PROBE_WINDOW`]. This catches what only shows
//! on later lines: `eval` disabled (status 1), an alias or function named
//! `builtin` (markers garbled or missing). The probe's output is never
//! returned. Because it is written only once the command's markers came, it
//! never runs in a shell the command already broke, so its errors never mix
//! with the command's output.
//!
//! A shell that is broken, exits or is killed is ended (with everything it
//! started) and the next command gets a fresh one in the same workspace:
//! files stay; working directory, variables, functions and background jobs
//! do not. The command's stderr ends with a note saying so and why (see
//! [`End`]); if the shell dies between commands (a background `kill $$`),
//! the next command's note says it. The exit code is the one the marker
//! reported, else bash's own exit code, else 137 (sandboxd killed it).
//!
//! What this does not catch or keep:
//! * A shell that still runs the wrapper correctly is kept, whatever else
//!   changed: `set -x` traces and DEBUG trap output land in the command's
//!   output (they are not breakage), an EXIT trap runs when the shell ends,
//!   readonly variables and functions named `eval`, `printf` or `:` do not
//!   matter.
//! * Checking that the process is still bash (`/proc/PID/exe`) would add
//!   nothing: `exec` replaces bash in the middle of the wrapper line, so its
//!   markers never come.
//! * A `builtin` function crafted to imitate the wrapper (it sees HEAD and
//!   TAIL among its arguments) can fake the markers. That is sabotage of
//!   one's own shell; no wrapper can prevent it.
//! * A shell whose probe takes longer than [`PROBE_WINDOW`] (a DEBUG trap
//!   that sleeps) counts as broken.
//! * A command that reads bash's own input through the copy bash keeps of
//!   it during the command (`cat <&11`) eats the sentinel and counts as
//!   broken.
//!
//! Other trade-offs
//! ----------------
//! * On timeout every process of the session except bash is killed; that
//!   includes background jobs of earlier commands. If bash does not print its
//!   markers within [`GRACE`] (it is busy in a builtin loop), starts new
//!   processes meanwhile (a loop in bash that forks), or is found broken as
//!   above, bash is killed too and replaced. bash's own report of a killed
//!   job (`Killed ...`) stays in stderr before the timeout note. The timeout
//!   counts from the start of the command, not from its arrival in the
//!   sandbox's queue.
//! * Output a background job writes after its command ended is read as part
//!   of a later command's output, as in a terminal; output arriving in the
//!   same read as a marker, after it, or during the probe, is dropped.
//! * A process that calls `setsid` itself leaves the session and is not
//!   found when killing.
//! * If sandboxd itself dies (crash, SIGKILL), each bash is killed with it
//!   (`PR_SET_PDEATHSIG`), so the rest of an interrupted command line never
//!   runs behind the back of the shell a restarted sandboxd starts. The
//!   processes bash had started are not reached and run on until they end
//!   (in the container, the container ends with sandboxd).
//! * `$?` at the start of a command reflects the probe's `printf`, not the
//!   previous command.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use duet_wire::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::error::Error;
use crate::output::Capture;
use crate::procs;
use crate::progress::Progress;
use crate::rlimits::Limits;

/// How long bash gets to come back after the command's processes were
/// killed on timeout.
const GRACE: Duration = Duration::from_millis(1000);
/// How long the probe may take. A healthy bash answers it in well under a
/// millisecond, even on a loaded machine; the window only bounds a shell
/// slowed by its own traps. Kept short so that a timed-out command (up to
/// [`GRACE`] more) still answers within the 2 s the worker adds to its wait.
const PROBE_WINDOW: Duration = Duration::from_millis(500);
/// How often to check, while markers are outstanding, whether bash has read
/// all its input (and so can no longer print them).
const STALL_POLL: Duration = Duration::from_millis(20);
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
/// Exit code reported for a command whose shell sandboxd had to kill
/// (128 + SIGKILL, as a shell reports a killed process).
pub const KILLED_EXIT_CODE: i32 = 137;

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
    /// False when the shell ended (the note in stderr says why) or the
    /// sandbox is being destroyed; the session must then be dropped and a
    /// new one spawned for the next command.
    pub shell_usable: bool,
}

impl Outcome {
    /// How long the command ran, in whole milliseconds.
    pub fn duration_ms(&self) -> u64 {
        u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends one line of sandboxd's own to stderr. Added after capping,
    /// so it is never cut off.
    pub fn note(&mut self, line: &str) {
        if !self.stderr.is_empty() && !self.stderr.ends_with('\n') {
            self.stderr.push('\n');
        }
        self.stderr.push_str(line);
        self.stderr.push('\n');
    }
}

/// Why a shell ended, as said in the note of the command it concerns.
#[derive(Debug)]
pub enum End {
    /// bash exited or was killed by a signal (`None`: it could not be reaped).
    Gone(Option<ExitStatus>),
    /// bash read all its input but these markers never came.
    Silent(Streams),
    /// The probe after the command failed.
    ProbeFailed,
    /// bash stayed busy after its command's processes were killed on timeout.
    Busy,
    /// No command came for this long.
    Idle(Duration),
    /// Its workspace was replaced by a restored archive.
    Restored,
    /// It failed to say its working directory and environment for a job.
    JobContext,
}

/// Which streams lack their marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streams {
    Stdout,
    Stderr,
    Both,
}

const FRESH_SHELL: &str = "in a fresh shell in the same workspace \
                           (files kept; working directory, variables and background jobs reset)";

impl End {
    /// The note for the command the shell ended in.
    pub fn note(&self) -> String {
        format!("sandboxd: the shell ended ({self}); the next command starts {FRESH_SHELL}")
    }

    /// The note for the first command after a shell ended between commands.
    pub fn note_for_next(&self) -> String {
        format!("sandboxd: the shell ended ({self}); this command ran {FRESH_SHELL}")
    }
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        match self {
            End::Gone(Some(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => write!(f, "it exited with code {code}"),
                (_, Some(signal)) => write!(f, "it was killed by signal {signal}"),
                _ => f.write_str("it is gone"),
            },
            End::Gone(None) => f.write_str("it is gone"),
            End::Silent(Streams::Stdout) => f.write_str("its stdout was closed or redirected"),
            End::Silent(Streams::Stderr) => f.write_str("its stderr was closed or redirected"),
            End::Silent(Streams::Both) => f.write_str(
                "it stopped running commands: set -n, or builtin or printf disabled or redefined",
            ),
            End::ProbeFailed => f.write_str(
                "the command changed it so that later commands would fail: \
                 eval disabled, or an alias or function named builtin",
            ),
            End::Busy => write!(
                f,
                "it was still busy {} ms after the timeout",
                GRACE.as_millis()
            ),
            End::Idle(idle) => write!(f, "it was idle for {} s", idle.as_secs()),
            End::Restored => f.write_str("its workspace was restored from an archive"),
            End::JobContext => {
                f.write_str("it failed to say its working directory and environment for a job")
            }
        }
    }
}

pub struct Session {
    child: Child,
    /// bash's pid, which is also its session id.
    sid: i32,
    pipes: Pipes,
}

struct Pipes {
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: ChildStderr,
    /// Read buffers, kept for the session's life.
    out_buf: Box<[u8]>,
    err_buf: Box<[u8]>,
}

/// How reading up to a wrapper's markers ended.
enum Read {
    /// Both markers came.
    Markers,
    /// A pipe closed: the shell is gone.
    Closed,
    /// bash read all its input and printed everything it will, without
    /// printing the markers.
    Stalled,
}

/// How the first phase of a command ended.
enum Phase {
    Read(Read),
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
        procs::own_session(&mut command, limits);
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
            pipes: Pipes {
                stdin,
                stdout,
                stderr,
                out_buf: vec![0; READ_CHUNK].into(),
                err_buf: vec![0; READ_CHUNK].into(),
            },
        })
    }

    /// bash's pid, which is also its session id.
    pub fn pid(&self) -> i32 {
        self.sid
    }

    /// Why bash is no longer running, if it died between commands.
    pub fn ended(&mut self) -> Option<End> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(status) => Some(End::Gone(status)),
            Err(_) => Some(End::Gone(None)),
        }
    }

    /// Runs one command, telling `watch` of it if given. `cancelled`
    /// resolving ends it at once (the sandbox is being destroyed).
    pub async fn run(
        &mut self,
        cmd: &str,
        timeout: Duration,
        output_limit: usize,
        cancelled: impl Future<Output = ()>,
        progress: Option<Arc<Progress>>,
    ) -> Outcome {
        let started = SystemTime::now();
        let clock = Instant::now();
        let tail = random_tail();
        let marker = format!("{MARKER_HEAD}{tail}");
        let script = wrap_command(cmd, &tail);
        let mut out = Capture::new(marker.as_bytes(), output_limit);
        let mut err = Capture::new(marker.as_bytes(), output_limit);
        if let Some(progress) = progress {
            progress.start(started);
            for (capture, stream) in [(&mut out, Stream::Stdout), (&mut err, Stream::Stderr)] {
                let progress = Arc::clone(&progress);
                capture.tap(Box::new(move |text: &str| progress.add(stream, text)));
            }
        }
        let Session { child, sid, pipes } = self;
        let sid = *sid;

        let phase = tokio::select! {
            biased;
            () = cancelled => Phase::Cancelled,
            read = pipes.run_script(&script, &mut out, &mut err) => Phase::Read(read),
            _ = child.wait() => Phase::Read(Read::Closed),
            () = tokio::time::sleep(timeout) => Phase::TimedOut,
        };

        let destroyed = matches!(phase, Phase::Cancelled);
        let mut notes = Vec::new();
        let (end, forced_code, status_code) = match phase {
            Phase::Read(read) => {
                let (end, status) = settle(Some(read), child, sid, pipes, &mut out, &mut err).await;
                (end, None, status)
            }
            Phase::TimedOut => {
                let killed = procs::kill_session(sid, Some(sid));
                let read = tokio::select! {
                    read = pipes.pump(&mut out, &mut err, Until::Markers) => Some(read),
                    _ = child.wait() => Some(Read::Closed),
                    () = shell_starts_processes(sid, &killed) => None,
                    () = tokio::time::sleep(GRACE) => None,
                };
                notes.push(format!(
                    "sandboxd: command timed out after {} ms",
                    timeout.as_millis()
                ));
                let (end, _) = settle(read, child, sid, pipes, &mut out, &mut err).await;
                (end, Some(TIMEOUT_EXIT_CODE), None)
            }
            Phase::Cancelled => {
                end_shell(child, sid, pipes, &mut out, &mut err).await;
                // The workspace goes too, so there is nothing to say about
                // the next command.
                notes.push("sandboxd: sandbox destroyed while the command was running".into());
                (None, Some(KILLED_EXIT_CODE), None)
            }
        };

        let out = out.finish();
        let err = err.finish();
        // The marker's trailer is the status `$?` printed by our own wrapper.
        let reported = out.trailer.as_deref().and_then(|t| t.parse().ok());
        let mut outcome = Outcome {
            stdout: out.text,
            stderr: err.text,
            exit_code: forced_code
                .or(reported)
                .or(status_code)
                .unwrap_or(KILLED_EXIT_CODE),
            timed_out: forced_code == Some(TIMEOUT_EXIT_CODE),
            truncated: out.truncated || err.truncated,
            started,
            duration: clock.elapsed(),
            shell_usable: end.is_none() && !destroyed,
        };
        notes.extend(end.map(|end| end.note()));
        for line in &notes {
            outcome.note(line);
        }
        outcome
    }
}

impl Drop for Session {
    /// Whatever path drops a session, nothing it started outlives it.
    /// (kill_on_drop then lets tokio reap bash itself.)
    fn drop(&mut self) {
        procs::kill_session(self.sid, None);
    }
}

/// Keeps the shell if `read` found the command's markers and the probe
/// after them passes; otherwise ends it. `None` means bash stayed busy after
/// a timeout. Returns why the shell ended and, if bash exited by itself, the
/// exit code it reported.
async fn settle(
    read: Option<Read>,
    child: &mut Child,
    sid: i32,
    pipes: &mut Pipes,
    out: &mut Capture,
    err: &mut Capture,
) -> (Option<End>, Option<i32>) {
    let end = match read {
        Some(Read::Markers) => match probe(child, pipes).await {
            Read::Markers => return (None, None),
            Read::Closed => None,
            Read::Stalled => Some(End::ProbeFailed),
        },
        Some(Read::Closed) => None,
        Some(Read::Stalled) => Some(End::Silent(match (out.is_done(), err.is_done()) {
            (false, false) => Streams::Both,
            (false, true) => Streams::Stdout,
            (true, _) => Streams::Stderr,
        })),
        None => Some(End::Busy),
    };
    let status = end_shell(child, sid, pipes, out, err).await;
    match end {
        Some(end) => (Some(end), None),
        None => (Some(End::Gone(status)), status.map(status_code)),
    }
}

/// Checks that the shell still runs the wrapper: around an empty command it
/// must print both markers with status 0 within [`PROBE_WINDOW`]. Returns
/// `Markers` if so, `Closed` if bash is gone, else `Stalled`.
async fn probe(child: &mut Child, pipes: &mut Pipes) -> Read {
    let tail = random_tail();
    let marker = format!("{MARKER_HEAD}{tail}");
    // Nothing of the probe's output is kept.
    let mut out = Capture::new(marker.as_bytes(), 0);
    let mut err = Capture::new(marker.as_bytes(), 0);
    let script = wrap_command("", &tail);
    let read = tokio::select! {
        read = pipes.run_script(&script, &mut out, &mut err) => read,
        _ = child.wait() => Read::Closed,
        () = tokio::time::sleep(PROBE_WINDOW) => Read::Stalled,
    };
    let passed =
        out.finish().trailer.as_deref() == Some("0") && err.finish().trailer.as_deref() == Some("");
    match read {
        Read::Markers if !passed => Read::Stalled,
        read => read,
    }
}

/// What to read the output pipes until.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Both markers came, both pipes closed, or bash stalled.
    Markers,
    /// Both pipes closed.
    Closed,
}

impl Pipes {
    /// Writes `script` to bash and reads its output up to the markers.
    async fn run_script(&mut self, script: &str, out: &mut Capture, err: &mut Capture) -> Read {
        if self.stdin.write_all(script.as_bytes()).await.is_err() {
            return Read::Closed;
        }
        self.pump(out, err, Until::Markers).await
    }

    /// Reads both pipes into their captures until `until`.
    async fn pump(&mut self, out: &mut Capture, err: &mut Capture, until: Until) -> Read {
        let markers = until == Until::Markers;
        let (mut out_open, mut err_open) = (true, true);
        let mut stall_check =
            tokio::time::interval_at(tokio::time::Instant::now() + STALL_POLL, STALL_POLL);
        loop {
            if markers && out.is_done() && err.is_done() {
                return Read::Markers;
            }
            if !out_open && !err_open {
                return Read::Closed;
            }
            let want_out = out_open && !(markers && out.is_done());
            let want_err = err_open && !(markers && err.is_done());
            tokio::select! {
                read = self.stdout.read(&mut self.out_buf), if want_out => match read {
                    Ok(n) if n > 0 => out.feed(&self.out_buf[..n]),
                    _ => out_open = false,
                },
                read = self.stderr.read(&mut self.err_buf), if want_err => match read {
                    Ok(n) if n > 0 => err.feed(&self.err_buf[..n]),
                    _ => err_open = false,
                },
                _ = stall_check.tick(), if markers => if self.stalled(out, err) {
                    return Read::Stalled;
                },
            }
        }
    }

    /// True once bash has read all its input, sentinel included, and every
    /// stream still lacking its marker has been read to the end: what bash
    /// printed before reading the sentinel is then all in the captures, so a
    /// missing marker will not come. (A closed pipe has nothing unread.)
    fn stalled(&self, out: &Capture, err: &Capture) -> bool {
        unread(&self.stdin) == Some(0)
            && (out.is_done() || unread(&self.stdout) == Some(0))
            && (err.is_done() || unread(&self.stderr) == Some(0))
    }
}

/// Bytes written to the pipe behind `fd` and not read yet; Linux answers
/// this on either end of a pipe.
fn unread(fd: &impl AsRawFd) -> Option<usize> {
    let mut count: libc::c_int = 0;
    // SAFETY: FIONREAD stores one int through the pointer it is given.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut count) };
    if rc == 0 {
        usize::try_from(count).ok()
    } else {
        None
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
    pipes: &mut Pipes,
    out: &mut Capture,
    err: &mut Capture,
) -> Option<ExitStatus> {
    // Kill before reaping: an unreaped bash keeps its pid, and so the
    // session id, from being reused.
    procs::kill_session(sid, None);
    let status = tokio::time::timeout(REAP, child.wait()).await.ok()?.ok();
    let _ = tokio::time::timeout(DRAIN, pipes.pump(out, err, Until::Closed)).await;
    status
}

/// The line that runs `cmd` and prints the end markers, then the sentinel
/// (see the module docs). `tail` is the random half of the marker.
fn wrap_command(cmd: &str, tail: &str) -> String {
    format!(
        "builtin eval {} </dev/null; \
         builtin printf '%s%s%d\\n' {MARKER_HEAD} {tail} \"$?\"; \
         builtin printf '%s%s\\n' {MARKER_HEAD} {tail} >&2\n\n",
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
pub fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|sig| 128 + sig))
        .unwrap_or(KILLED_EXIT_CODE)
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
    fn wrapped_command_is_one_line_and_the_sentinel() {
        let line = wrap_command("echo 'hi'", "abc");
        assert_eq!(
            line,
            "builtin eval 'echo '\\''hi'\\''' </dev/null; \
             builtin printf '%s%s%d\\n' __sandboxd_ abc \"$?\"; \
             builtin printf '%s%s\\n' __sandboxd_ abc >&2\n\n"
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
