//! The room's shared terminal (the routes and their JSON are
//! `duet_wire::terminal`): an interactive login bash per sandbox under a
//! pseudo-terminal, beside the command shell of `session`, which it never
//! touches. Everyone in the room sees one screen and types into one shell.
//!
//! The shell
//! ---------
//! `bash --login -i`, in the workspace, as sandboxd's user, with the
//! command shell's environment (cleared, then sandboxd's list, HOME the
//! workspace) but `TERM=xterm-256color`, under the same resource limits.
//! Like every shell and job it leads a session of its own and dies with
//! sandboxd (`procs::own_session`). Its stdin, stdout and stderr are the
//! slave side of a pseudo-terminal, which is also its controlling terminal
//! (`pty`): line editing, job control, Ctrl-C, window sizes and password
//! prompts work as in any terminal, the kernel's line discipline doing
//! what it does for any. The terminal starts with the first request of any
//! of its routes. When its shell exits, whatever it left running in its
//! session is killed, what it printed is read to the end, and a new shell
//! starts on a new pseudo-terminal of the same size (so with fresh
//! settings: `stty -echo` does not outlive its shell), no sooner than
//! [`MIN_LIFE`] after the last one started, so a shell that cannot stay up
//! costs a start a second; a `restarted` event on the output tells of it.
//! A destroy of the sandbox, and shutdown, end the
//! terminal: its session is killed and no shell starts again. A restore of
//! the workspace kills the shell, and the next starts in the new workspace.
//!
//! Output, and the one lock
//! ------------------------
//! A task per terminal reads the master side and waits for the shell to
//! end. Each read goes, under one lock, to a terminal emulator (`vt100`,
//! with [`SCROLLBACK_LINES`] of scrollback) and to the kept output (the
//! newest [`TERMINAL_OUTPUT_KEPT_BYTES`], numbered by byte offset across
//! restarts, `kept`); then the output's readers are woken. A screen is
//! taken under the same lock, so it is the emulator exactly at an offset
//! between two reads: a reader from that offset gets every byte after it,
//! once. A character cut at the end of a read is held back until its last
//! bytes come (or its shell ends), so the emulator and the stream only see
//! whole characters and a screen's offset never falls inside one; bytes
//! that are not UTF-8 reach the stream as U+FFFD.
//!
//! Each reader keeps its own offset and the number of the next restart to
//! tell, so any number read at once, each at its pace, and one that falls
//! behind what is kept skips ahead (its next event's offset says where).
//! A restart is told at the offset where the new shell's output starts,
//! after all the old one printed. A reader only ends when the terminal
//! does.
//!
//! The emulator answers nothing: a program's questions to its terminal
//! (where the cursor is, what the terminal is) are answered by whichever
//! terminal draws the output, if it sends its answer as input.
//!
//! Input
//! -----
//! One request's bytes are written whole before the next's, in order of
//! arrival (a fair lock). The kernel takes a few kilobytes ahead of a
//! program that does not read; an input request waits [`INPUT_WAIT`] at
//! most, for its turn, for a shell (between two), and for the terminal to
//! take its bytes, then answers how many it took.
//!
//! Whether what is typed shows (`echo`) is read from the terminal just
//! before writing. The ECHO flag alone does not tell: bash's line editor
//! turns it off at every prompt, reading key by key (ICANON off) and
//! echoing what it takes itself, and so does any program reading keys
//! raw. So input shows if the terminal echoes it, or if it is read key by
//! key by the shell itself (the foreground process group is the shell's):
//! at its prompt. It does not show when ECHO is off for a line-at-a-time
//! reader, as at a password prompt (`sudo`, `ssh`, `read -s`, a program
//! after `stty -echo`), and is taken as not showing when a program in the
//! foreground reads keys raw (an editor, a REPL, `ssh` itself, a prompt
//! that hides what it reads): whether it shows them is the program's to
//! say. A prompt of the shell itself after `stty -echo` is taken as
//! showing: its line editor keeps that setting to itself.

mod pty;
mod screen;

use std::collections::VecDeque;
use std::io;
use std::num::NonZeroU16;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use duet_wire::terminal::{
    Screen, TerminalEvent, TerminalSize, Typed, DEFAULT_COLS, DEFAULT_ROWS, SCROLLBACK_LINES,
    TERMINAL_OUTPUT_KEPT_BYTES,
};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout, timeout_at, Instant};

use crate::error::Error;
use crate::kept::Kept;
use crate::output::incomplete_utf8_tail;
use crate::procs;
use crate::rlimits::Limits;
use crate::session::status_code;
use pty::Pty;

/// How soon after a shell started the next may start.
pub const MIN_LIFE: Duration = Duration::from_millis(1000);
/// The longest an input request waits.
pub const INPUT_WAIT: Duration = Duration::from_millis(5000);
/// The longest a shell that failed to start waits for its next try.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long to read what is left of a shell's output once it exited.
const DRAIN: Duration = Duration::from_millis(250);
/// How long a killed shell may take to be reaped.
const REAP: Duration = Duration::from_millis(1000);
/// How long ending a terminal waits for its task.
const END_WAIT: Duration = Duration::from_millis(2000);
/// Restarts kept for readers, the newest.
const RESTARTS_KEPT: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

/// What every shell of a terminal starts with.
pub struct Setup {
    pub workspace: PathBuf,
    /// The command shell's environment, HOME apart.
    pub env: Vec<(String, String)>,
    pub limits: Limits,
}

pub struct Terminal {
    state: Mutex<State>,
    /// Bumped when output is added, a shell starts or ends, and the
    /// terminal ends.
    changed: watch::Sender<()>,
    /// One input at a time, in order of arrival.
    input: tokio::sync::Mutex<()>,
    /// Set to end the terminal.
    stop: watch::Sender<bool>,
}

struct State {
    emulator: vt100::Parser,
    kept: Kept,
    /// The restarts at or after the oldest output kept, the newest
    /// [`RESTARTS_KEPT`].
    restarts: VecDeque<Restart>,
    /// All restarts so far: the number of the next.
    restarts_ever: u64,
    size: TerminalSize,
    /// The running shell's master side and session id.
    shell: Option<(Arc<Pty>, i32)>,
    /// Once set, no shell starts again.
    ended: bool,
}

struct Restart {
    number: u64,
    offset: u64,
    code: Option<i32>,
}

/// A shell on its pseudo-terminal.
struct Shell {
    child: Child,
    /// Its pid: the id of its session.
    sid: i32,
    pty: Arc<Pty>,
    started: Instant,
    /// The first bytes of a character whose last have not been read yet.
    held: Vec<u8>,
}

impl Shell {
    fn spawn(setup: &Setup, size: TerminalSize) -> io::Result<Shell> {
        std::fs::create_dir_all(&setup.workspace)?;
        let (pty, slave) = Pty::open(size)?;
        let mut command = Command::new("bash");
        command
            .args(["--login", "-i"])
            .env_clear()
            .envs(setup.env.iter().map(|(k, v)| (k, v)))
            .env("HOME", &setup.workspace)
            .env("TERM", "xterm-256color")
            .current_dir(&setup.workspace)
            .kill_on_drop(true);
        procs::own_session(&mut command, setup.limits);
        pty::attach(&mut command, slave)?;
        let child = command.spawn()?;
        // The slave goes with the command: only the shell holds it now.
        drop(command);
        let Some(sid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
            return Err(io::Error::other("the shell has no pid"));
        };
        Ok(Shell {
            child,
            sid,
            pty: Arc::new(pty),
            started: Instant::now(),
            held: Vec::new(),
        })
    }
}

impl Terminal {
    /// Starts a terminal with its first shell.
    pub fn start(setup: Setup) -> Result<Arc<Terminal>, Error> {
        let size = TerminalSize {
            cols: DEFAULT_COLS,
            rows: DEFAULT_ROWS,
        };
        let shell = Shell::spawn(&setup, size).map_err(Error::TerminalSpawn)?;
        let (rows, cols) = dimensions(size);
        let terminal = Arc::new(Terminal {
            state: Mutex::new(State {
                emulator: vt100::Parser::new(rows, cols, SCROLLBACK_LINES),
                kept: Kept::new(TERMINAL_OUTPUT_KEPT_BYTES),
                restarts: VecDeque::new(),
                restarts_ever: 0,
                size,
                shell: Some((Arc::clone(&shell.pty), shell.sid)),
                ended: false,
            }),
            changed: watch::Sender::new(()),
            input: tokio::sync::Mutex::new(()),
            stop: watch::Sender::new(false),
        });
        // Watching from now: an end asked before the task runs is seen.
        let stop = terminal.stop.subscribe();
        tokio::spawn(Arc::clone(&terminal).run(shell, setup, stop));
        Ok(terminal)
    }

    /// The screen as it is, and the offset it is at.
    pub fn screen(&self) -> Screen {
        let state = self.state();
        let screen = state.emulator.screen();
        Screen {
            cols: state.size.cols,
            rows: state.size.rows,
            data: screen::data(screen),
            text: screen::text(screen),
            offset: state.kept.total(),
        }
    }

    /// A reader of the output from offset `from`: from the oldest byte kept
    /// if that is later, from the end if `from` is past it.
    pub fn reader(self: &Arc<Self>, from: u64) -> Reader {
        let changed = self.changed.subscribe();
        let state = self.state();
        let at = from.min(state.kept.total());
        let ahead = state.restarts.iter().filter(|r| r.offset > at).count();
        Reader {
            terminal: Arc::clone(self),
            at,
            next_restart: state.restarts_ever - ahead as u64,
            changed,
        }
    }

    /// Types `bytes` into the terminal (see the module docs).
    pub async fn type_in(&self, bytes: &[u8]) -> Result<Typed, Error> {
        let deadline = Instant::now() + INPUT_WAIT;
        let stuck = || Error::TerminalStuck {
            ms: INPUT_WAIT.as_millis() as u64,
        };
        let _turn = timeout_at(deadline, self.input.lock())
            .await
            .map_err(|_| stuck())?;
        let (pty, shell) = timeout_at(deadline, self.shell())
            .await
            .map_err(|_| stuck())?
            .ok_or(Error::TerminalEnded)?;
        let echo = shows_typing(&pty, shell);
        let mut written = 0;
        while written < bytes.len() {
            match timeout_at(deadline, pty.write(&bytes[written..])).await {
                Ok(Ok(n @ 1..)) => written += n,
                // Its shell is gone.
                Ok(_) => break,
                Err(_) if written == 0 => return Err(stuck()),
                Err(_) => break,
            }
        }
        Ok(Typed {
            bytes: written as u64,
            echo,
        })
    }

    /// Sets the size of the terminal and of its emulator.
    pub fn resize(&self, size: TerminalSize) -> Result<(), Error> {
        let mut state = self.state();
        state.size = size;
        let (rows, cols) = dimensions(size);
        state.emulator.set_size(rows, cols);
        match &state.shell {
            Some((pty, _)) => pty
                .resize(size)
                .map_err(|e| Error::Internal(format!("could not size the terminal: {e}"))),
            None => Ok(()),
        }
    }

    /// Kills the shell's session; the next shell starts as after an exit.
    pub fn restart(&self) {
        let sid = self.state().shell.as_ref().map(|(_, sid)| *sid);
        if let Some(sid) = sid {
            procs::kill_session(sid, None);
        }
    }

    /// Ends the terminal: kills its shell's session, and no shell starts
    /// again. Waits (bounded) for its task to see it.
    pub async fn end(&self) {
        self.stop.send_replace(true);
        self.restart();
        let mut changed = self.changed.subscribe();
        let _ = timeout(END_WAIT, async {
            while !self.state().ended {
                if changed.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Runs shell after shell until the terminal is ended.
    async fn run(self: Arc<Self>, mut shell: Shell, setup: Setup, mut stop: watch::Receiver<bool>) {
        loop {
            let exited = self.serve(&mut shell, &mut stop).await;
            let ending = exited.is_none();
            let started = shell.started;
            let code = self.close(shell, exited).await;
            if ending {
                break;
            }
            let Some(next) = self.next_shell(&setup, started, &mut stop).await else {
                break;
            };
            shell = next;
            self.restarted(&shell, code);
        }
        let mut state = self.state();
        state.ended = true;
        state.shell = None;
        drop(state);
        self.changed.send_replace(());
    }

    /// Reads the shell's output until it exits (`Some` of how, if known)
    /// or the terminal is ended (`None`).
    async fn serve(
        &self,
        shell: &mut Shell,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Option<ExitStatus>> {
        let mut buf = vec![0; READ_CHUNK];
        let mut open = true;
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => return None,
                status = shell.child.wait() => return Some(status.ok()),
                read = shell.pty.read(&mut buf), if open => match read {
                    Ok(n @ 1..) => self.add(&mut shell.held, &buf[..n]),
                    _ => open = false,
                },
            }
        }
    }

    /// Kills what is left of the shell's session and, unless the terminal
    /// is being ended, reads the rest of its output. Returns its exit code.
    async fn close(&self, mut shell: Shell, exited: Option<Option<ExitStatus>>) -> Option<i32> {
        procs::kill_session(shell.sid, None);
        let status = match exited {
            Some(status) => {
                let mut buf = vec![0; READ_CHUNK];
                let _ = timeout(DRAIN, async {
                    while let Ok(n @ 1..) = shell.pty.read(&mut buf).await {
                        self.add(&mut shell.held, &buf[..n]);
                    }
                })
                .await;
                status
            }
            None => timeout(REAP, shell.child.wait())
                .await
                .ok()
                .and_then(Result::ok),
        };
        if !shell.held.is_empty() {
            self.append(&shell.held);
        }
        self.state().shell = None;
        self.changed.send_replace(());
        status.map(status_code)
    }

    /// The next shell, started no sooner than [`MIN_LIFE`] after the last
    /// one; `None` once the terminal is ended.
    async fn next_shell(
        &self,
        setup: &Setup,
        last_started: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Shell> {
        let mut at = last_started + MIN_LIFE;
        let mut retry = MIN_LIFE;
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => return None,
                () = sleep_until(at) => {}
            }
            let size = self.state().size;
            match Shell::spawn(setup, size) {
                Ok(shell) => return Some(shell),
                Err(e) => {
                    let note = format!(
                        "\r\nsandboxd: could not start a shell ({e}); trying again in {} s\r\n",
                        retry.as_secs()
                    );
                    self.append(note.as_bytes());
                    at = Instant::now() + retry;
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        }
    }

    /// Puts the new `shell` in place of the one that exited with `code`.
    fn restarted(&self, shell: &Shell, code: Option<i32>) {
        let mut state = self.state();
        // A resize may have come while it started.
        let _ = shell.pty.resize(state.size);
        state.shell = Some((Arc::clone(&shell.pty), shell.sid));
        let restart = Restart {
            number: state.restarts_ever,
            offset: state.kept.total(),
            code,
        };
        state.restarts_ever += 1;
        state.restarts.push_back(restart);
        if state.restarts.len() > RESTARTS_KEPT {
            state.restarts.pop_front();
        }
        drop(state);
        self.changed.send_replace(());
    }

    /// Adds what was read after `held`, holding back a character cut at
    /// its end.
    fn add(&self, held: &mut Vec<u8>, read: &[u8]) {
        held.extend_from_slice(read);
        let whole = held.len() - incomplete_utf8_tail(held);
        if whole > 0 {
            self.append(&held[..whole]);
            held.drain(..whole);
        }
    }

    /// Hands `bytes` to the emulator and the kept output, at once.
    fn append(&self, bytes: &[u8]) {
        let mut state = self.state();
        state.emulator.process(bytes);
        state.kept.add(bytes);
        let start = state.kept.start();
        while state.restarts.front().is_some_and(|r| r.offset < start) {
            state.restarts.pop_front();
        }
        drop(state);
        self.changed.send_replace(());
    }

    /// The running shell's pseudo-terminal and pid, once there is one;
    /// `None` if the terminal ended.
    async fn shell(&self) -> Option<(Arc<Pty>, i32)> {
        let mut changed = self.changed.subscribe();
        loop {
            {
                let state = self.state();
                if let Some((pty, sid)) = &state.shell {
                    return Some((Arc::clone(pty), *sid));
                }
                if state.ended {
                    return None;
                }
            }
            changed.changed().await.ok()?;
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding this lock; the state stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// The next event for a reader at offset `at`, next to tell restart
    /// number `next_restart`, if there is one yet.
    fn event(&self, at: &mut u64, next_restart: &mut u64) -> Option<TerminalEvent> {
        let restart = self.restarts.iter().find(|r| r.number >= *next_restart);
        let to = restart.map_or(self.kept.total(), |r| r.offset);
        if let Some(piece) = self.kept.piece(*at, to, true) {
            *at = piece.offset + piece.bytes;
            return Some(TerminalEvent::Output {
                offset: piece.offset,
                bytes: piece.bytes,
                data: piece.data,
            });
        }
        let restart = restart?;
        *next_restart = restart.number + 1;
        *at = (*at).max(restart.offset);
        Some(TerminalEvent::Restarted {
            offset: restart.offset,
            code: restart.code,
        })
    }
}

/// One reader of a terminal's output.
pub struct Reader {
    terminal: Arc<Terminal>,
    /// Where its next output starts.
    at: u64,
    next_restart: u64,
    changed: watch::Receiver<()>,
}

impl Reader {
    /// The next event, once there is one; `None` once the terminal ended.
    pub async fn next(&mut self) -> Option<TerminalEvent> {
        loop {
            self.changed.borrow_and_update();
            {
                let state = self.terminal.state();
                if let Some(event) = state.event(&mut self.at, &mut self.next_restart) {
                    return Some(event);
                }
                if state.ended {
                    return None;
                }
            }
            // The terminal holds the sender, and this reader the terminal.
            self.changed.changed().await.ok()?;
        }
    }
}

/// Whether what is typed now shows (see the module docs): the terminal
/// echoes it, or `shell` itself reads it key by key, its line editor
/// echoing what it takes. Unknown counts as not.
fn shows_typing(pty: &Pty, shell: i32) -> bool {
    match pty.modes() {
        Ok(modes) if modes.echo => true,
        Ok(modes) if !modes.canonical => pty.foreground().is_ok_and(|group| group == shell),
        _ => false,
    }
}

/// A size as the emulator takes it (sizes that fit are never 0).
fn dimensions(size: TerminalSize) -> (NonZeroU16, NonZeroU16) {
    let nonzero = |n| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
    (nonzero(size.rows), nonzero(size.cols))
}
