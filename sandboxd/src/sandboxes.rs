//! The sandboxes by name: a workspace and at most one live shell each.
//!
//! Commands of one sandbox run one at a time in arrival order (a fair
//! mutex); different sandboxes run in parallel. Archiving and restoring a
//! workspace take their turn in the same queue, so they see and replace it
//! between commands. Each of these and each destroy runs in a task of its
//! own, so a client hanging up cannot leave a shell half-way through a
//! command or a workspace half-way through a restore.
//!
//! Destroy ends the running command, fails commands queued before it with
//! [`Error::DestroyedBeforeStart`], and leaves commands arriving after it to
//! start on a fresh workspace. A restore ends the sandbox's shell only once
//! the archive was accepted, and the next command's stderr says so, as
//! after an idle shell. One restore per sandbox runs (or waits) at a time:
//! another is refused with [`Error::RestoreRunning`]. A restore given up
//! (see `abandon`) while waiting for its turn or unpacking stops there and
//! changes nothing.
//!
//! Shells cost memory and processes, so at most `max_shells` sandboxes hold
//! one. A sandbox takes its place with its first shell and keeps it when
//! that shell is replaced, so a sandbox that has one is never refused; it
//! gives the place back when destroyed or when its shell has been idle for
//! `idle_shell` (its files stay, and the next command's stderr says the
//! shell was ended). A new sandbox finding every place taken is refused with
//! [`Error::TooManyShells`].
//!
//! Each sandbox also holds its jobs (see `jobs`), which run beside its
//! shell. A job takes the shell's turn only to ask it for its working
//! directory and environment, and for no longer than `context::TURN_WAIT`.
//! A destroy, and shutdown, kill a sandbox's jobs before anything else, and
//! a job whose start overlaps a destroy either is among them or is refused.
//!
//! A sandbox may also hold its terminal (see `terminal`), started by the
//! first request of its routes and kept until the sandbox is destroyed (it
//! neither counts among the `max_shells` nor ends when idle). A destroy
//! ends it once it has the shell's turn, and keeps a new one from starting
//! until the workspace is gone (a terminal request waits, at most
//! [`TERMINAL_TURN`]); a restore restarts its shell in the new workspace.

use std::collections::HashMap;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use duet_wire::job::{JobInfo, JobRequest};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::abandon::Abandon;
use crate::archive::{self, Bounds, Packed, Restored};
use crate::error::Error;
use crate::jobs::context::{self, Context, Last};
use crate::jobs::records::Records;
use crate::jobs::{Job, Jobs};
use crate::log::{self, CommandLog};
use crate::progress::Progress;
use crate::rlimits::Limits;
use crate::session::{End, Outcome, Session};
use crate::terminal::{Setup, Terminal};
use crate::workspace;

pub const MAX_NAME_LEN: usize = 160;
/// How long a terminal request waits while the sandbox is being destroyed.
pub const TERMINAL_TURN: Duration = Duration::from_secs(10);

pub struct Settings {
    /// Absolute directory holding one workspace per sandbox.
    pub root: PathBuf,
    /// The whole environment of every shell, apart from HOME.
    pub shell_env: Vec<(String, String)>,
    /// Bytes kept per stream of one command.
    pub output_limit: usize,
    /// Resource limits every shell starts with.
    pub limits: Limits,
    /// Most sandboxes holding a shell at once.
    pub max_shells: usize,
    /// How long a shell may go without a command; `None` for ever.
    pub idle_shell: Option<Duration>,
    /// What a restore unpacks at most, and so what an archive may hold, and
    /// how long its restore may take by its estimate.
    pub restore: Bounds,
}

pub struct Sandboxes {
    settings: Settings,
    entries: Mutex<HashMap<String, Arc<Sandbox>>>,
    /// One permit per sandbox that may hold a shell.
    places: Arc<Semaphore>,
    records: Records,
}

struct Sandbox {
    /// The shell and its bookkeeping; tokio's mutex is fair (FIFO).
    shell: tokio::sync::Mutex<Shell>,
    /// Bumped by every destroy; a running command watching it is ended.
    generation: watch::Sender<u64>,
    /// Whether a restore is running or waiting for its turn.
    restoring: AtomicBool,
    jobs: Jobs,
    /// What its shell last said of its working directory and environment.
    context: Last,
    /// Its terminal, once started; locked by a destroy from ending it to
    /// removing the workspace. Whoever holds both locks takes `shell` first.
    terminal: tokio::sync::Mutex<Option<Arc<Terminal>>>,
}

/// A sandbox's one restore; ends it when dropped.
struct Restoring(Arc<Sandbox>);

impl Restoring {
    fn begin(sandbox: Arc<Sandbox>) -> Option<Self> {
        let busy = sandbox.restoring.swap(true, Ordering::AcqRel);
        (!busy).then_some(Restoring(sandbox))
    }
}

impl Drop for Restoring {
    fn drop(&mut self) {
        self.0.restoring.store(false, Ordering::Release);
    }
}

struct Shell {
    /// The shell, if one is running.
    session: Option<Session>,
    /// The sandbox's place among the `max_shells`.
    place: Option<OwnedSemaphorePermit>,
    /// When the last command ended.
    idle_since: Instant,
    /// Why the shell was ended between commands, for the next command.
    ended: Option<End>,
}

impl Shell {
    fn new() -> Self {
        Shell {
            session: None,
            place: None,
            idle_since: Instant::now(),
            ended: None,
        }
    }
}

impl Sandboxes {
    /// Must be called within the runtime, which runs the idle-shell check.
    pub fn new(settings: Settings) -> Arc<Self> {
        let idle_shell = settings.idle_shell;
        let sandboxes = Arc::new(Sandboxes {
            places: Arc::new(Semaphore::new(settings.max_shells)),
            records: Records::new(&settings.root),
            settings,
            entries: Mutex::new(HashMap::new()),
        });
        if let Some(idle) = idle_shell {
            tokio::spawn(end_idle_shells(Arc::downgrade(&sandboxes), idle));
        }
        sandboxes
    }

    /// Runs `cmd` in the sandbox's shell, starting shell and workspace if
    /// needed, telling `watch` of its start and output if given.
    pub async fn exec(
        self: &Arc<Self>,
        name: &str,
        cmd: String,
        timeout: Duration,
        progress: Option<Arc<Progress>>,
    ) -> Result<Outcome, Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        detached(async move { this.exec_in_order(&name, &cmd, timeout, progress).await }).await
    }

    /// Ends the sandbox's shell and everything it started, and removes its
    /// workspace. Destroying an unknown sandbox succeeds.
    pub async fn destroy(self: &Arc<Self>, name: &str) -> Result<(), Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        detached(async move { this.destroy_in_order(&name).await }).await
    }

    /// The gzipped tar of the sandbox's workspace, in an unlinked file, and
    /// what it holds; [`Error::ArchiveTooLarge`] past `cap` bytes,
    /// [`Error::Unrestorable`] if a restore would refuse it or take too long.
    pub async fn archive(self: &Arc<Self>, name: &str, cap: u64) -> Result<Packed, Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        detached(async move { this.archive_in_order(&name, cap).await }).await
    }

    /// Replaces the sandbox's workspace with the gzipped tar read from
    /// `body` and ends its shell; a refused archive, or a restore given up
    /// through `abandon`, changes nothing.
    pub async fn restore(
        self: &Arc<Self>,
        name: &str,
        body: impl Read + Send + 'static,
        abandon: Arc<Abandon>,
    ) -> Result<Restored, Error> {
        validate_name(name)?;
        let restoring = Restoring::begin(self.entry(name))
            .ok_or_else(|| Error::RestoreRunning(name.to_string()))?;
        let (this, name) = (Arc::clone(self), name.to_string());
        detached(async move {
            this.restore_in_order(&name, restoring, body, &abandon)
                .await
        })
        .await
    }

    /// Starts the job `request` in the sandbox, starting its workspace if
    /// needed (not its shell).
    pub async fn start_job(
        self: &Arc<Self>,
        name: &str,
        request: JobRequest,
    ) -> Result<JobInfo, Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        detached(async move { this.start_job_now(&name, request).await }).await
    }

    /// The sandbox's terminal, started (with its workspace) if need be.
    pub async fn terminal(self: &Arc<Self>, name: &str) -> Result<Arc<Terminal>, Error> {
        validate_name(name)?;
        let sandbox = self.entry(name);
        let Ok(mut slot) = tokio::time::timeout(TERMINAL_TURN, sandbox.terminal.lock()).await
        else {
            return Err(Error::Destroying(name.to_string()));
        };
        if let Some(terminal) = slot.as_ref() {
            return Ok(Arc::clone(terminal));
        }
        let path = self.workspace(name);
        let started = workspace::create(&path).and_then(|()| {
            Terminal::start(Setup {
                workspace: path,
                env: self.settings.shell_env.clone(),
                limits: self.settings.limits,
            })
        });
        match started {
            Ok(terminal) => {
                *slot = Some(Arc::clone(&terminal));
                Ok(terminal)
            }
            Err(e) => {
                drop(slot);
                if let Ok(shell) = sandbox.shell.try_lock() {
                    self.forget_if_unused(name, &sandbox, &shell);
                }
                Err(e)
            }
        }
    }

    /// Where the sandbox's workspace is (or will be).
    pub fn workspace_of(&self, name: &str) -> Result<PathBuf, Error> {
        validate_name(name)?;
        Ok(self.workspace(name))
    }

    /// The sandbox's jobs, the running ones first.
    pub fn jobs(&self, name: &str) -> Result<Vec<JobInfo>, Error> {
        validate_name(name)?;
        let sandbox = self.entries().get(name).cloned();
        Ok(sandbox
            .map(|sandbox| sandbox.jobs.list())
            .unwrap_or_default())
    }

    pub fn job(&self, name: &str, id: &str) -> Result<Arc<Job>, Error> {
        validate_name(name)?;
        let sandbox = self.entries().get(name).cloned();
        sandbox
            .and_then(|sandbox| sandbox.jobs.get(id))
            .ok_or_else(|| Error::NoJob(id.to_string()))
    }

    /// Ends every job, command and shell (workspaces stay).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Sandbox>> = self.entries().values().cloned().collect();
        for sandbox in &all {
            sandbox.generation.send_modify(|g| *g += 1);
        }
        for sandbox in &all {
            sandbox.jobs.stop_all().await;
        }
        for sandbox in &all {
            if let Some(terminal) = sandbox.terminal.lock().await.take() {
                terminal.end().await;
            }
        }
        for sandbox in all {
            // Dropping a session kills it.
            sandbox.shell.lock().await.session.take();
        }
    }

    async fn exec_in_order(
        &self,
        name: &str,
        cmd: &str,
        timeout: Duration,
        progress: Option<Arc<Progress>>,
    ) -> Result<Outcome, Error> {
        let sandbox = self.entry(name);
        let mut destroyed = sandbox.generation.subscribe();
        let mut shell = sandbox.shell.lock().await;
        if destroyed.has_changed().unwrap_or(true) {
            return Err(Error::DestroyedBeforeStart(name.to_string()));
        }
        // A shell that died between commands is dropped (killing leftovers),
        // and the command is told.
        let (mut session, ended) = match shell.session.take().map(|mut s| (s.ended(), s)) {
            Some((None, session)) => (session, None),
            previous => {
                if shell.place.is_none() {
                    let Ok(place) = Arc::clone(&self.places).try_acquire_owned() else {
                        self.forget_if_unused(name, &sandbox, &shell);
                        return Err(Error::TooManyShells {
                            max: self.settings.max_shells,
                        });
                    };
                    shell.place = Some(place);
                }
                let ended = shell.ended.take().or(previous.and_then(|(ended, _)| ended));
                let path = self.workspace(name);
                workspace::create(&path)?;
                let session =
                    Session::spawn(&path, &self.settings.shell_env, self.settings.limits)?;
                (session, ended)
            }
        };
        let cancelled = async move {
            // Err only if the sender is gone, which `sandbox` prevents.
            let _ = destroyed.changed().await;
        };
        let mut outcome = session
            .run(
                cmd,
                timeout,
                self.settings.output_limit,
                cancelled,
                progress,
            )
            .await;
        if let Some(ended) = ended {
            outcome.note(&ended.note_for_next());
        }
        if outcome.shell_usable {
            shell.session = Some(session);
        }
        shell.idle_since = Instant::now();
        log::emit(&CommandLog::new(name, &outcome));
        Ok(outcome)
    }

    async fn start_job_now(&self, name: &str, request: JobRequest) -> Result<JobInfo, Error> {
        let sandbox = self.entry(name);
        let destroyed = sandbox.generation.subscribe();
        let started = async {
            // Refused before waiting for the shell, and again once started.
            sandbox.jobs.check(&request.id)?;
            let path = self.workspace(name);
            workspace::create(&path)?;
            let context = self.job_context(name, &sandbox, &path).await?;
            let (limits, records) = (self.settings.limits, &self.records);
            sandbox
                .jobs
                .start(name, request, context, limits, records, &destroyed)
        };
        let started = started.await;
        if started.is_err() {
            if let Ok(shell) = sandbox.shell.try_lock() {
                self.forget_if_unused(name, &sandbox, &shell);
            }
        }
        started
    }

    /// The working directory and environment a job starts with (see
    /// `jobs::context` for why these).
    async fn job_context(
        &self,
        name: &str,
        sandbox: &Sandbox,
        workspace: &Path,
    ) -> Result<Context, Error> {
        let fresh = || Context::fresh(workspace, &self.settings.shell_env);
        let mut destroyed = sandbox.generation.subscribe();
        let Ok(mut shell) = tokio::time::timeout(context::TURN_WAIT, sandbox.shell.lock()).await
        else {
            return Ok(sandbox.context.get().unwrap_or_else(fresh));
        };
        if destroyed.has_changed().unwrap_or(true) {
            return Err(Error::DestroyedBeforeStart(name.to_string()));
        }
        let mut session = match shell.session.take().map(|mut s| (s.ended(), s)) {
            Some((None, session)) => session,
            // The next command's shell is a fresh one (and a dead one is
            // left for it to find, with its note).
            dead => {
                shell.session = dead.map(|(_, session)| session);
                return Ok(fresh());
            }
        };
        let cancelled = async move {
            let _ = destroyed.changed().await;
        };
        let limit = self.settings.output_limit;
        let outcome = session
            .run(context::SCRIPT, context::TIMEOUT, limit, cancelled, None)
            .await;
        if !outcome.shell_usable {
            shell.ended = Some(End::JobContext);
            return Ok(fresh());
        }
        let pid = session.pid();
        shell.session = Some(session);
        let Some(context) = Context::parse(&outcome.stdout) else {
            return Ok(fresh());
        };
        sandbox.context.set(pid, &context);
        Ok(context)
    }

    async fn destroy_in_order(&self, name: &str) -> Result<(), Error> {
        let sandbox = self.entry(name);
        sandbox.generation.send_modify(|g| *g += 1);
        sandbox.jobs.stop_all().await;
        let mut shell = sandbox.shell.lock().await;
        // Always taken after the shell: a restore holds the shell and
        // waits for the terminal.
        let mut terminal = sandbox.terminal.lock().await;
        if let Some(terminal) = terminal.take() {
            terminal.end().await;
        }
        *shell = Shell::new();
        let removed = workspace::remove(self.workspace(name)).await;
        drop(terminal);
        self.forget_if_unused(name, &sandbox, &shell);
        removed
    }

    async fn archive_in_order(&self, name: &str, cap: u64) -> Result<Packed, Error> {
        let sandbox = self.entry(name);
        let shell = sandbox.shell.lock().await;
        let path = self.workspace(name);
        let missing = Error::NoWorkspace(name.to_string());
        let bounds = self.settings.restore;
        let packed = workspace::blocking(move || {
            if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
                return Err(missing);
            }
            let scratch = workspace::scratch(&path, "archive");
            archive::pack(&path, &scratch, cap, &staging(&path), bounds)
        })
        .await;
        self.forget_if_unused(name, &sandbox, &shell);
        packed
    }

    async fn restore_in_order(
        &self,
        name: &str,
        restoring: Restoring,
        body: impl Read + Send + 'static,
        abandon: &Arc<Abandon>,
    ) -> Result<Restored, Error> {
        let sandbox = &restoring.0;
        let mut shell = tokio::select! {
            shell = sandbox.shell.lock() => shell,
            why = abandon.given_up() => {
                if let Ok(shell) = sandbox.shell.try_lock() {
                    self.forget_if_unused(name, sandbox, &shell);
                }
                return Err(why);
            }
        };
        let path = self.workspace(name);
        let staged = staging(&path);
        let unpacked = {
            let (staged, abandon) = (staged.clone(), Arc::clone(abandon));
            let bounds = self.settings.restore;
            workspace::blocking(move || archive::unpack(body, &staged, bounds, &abandon)).await
        };
        let restored = match unpacked.map(|restored| (restored, abandon.check())) {
            // The last moment to give up: past it the workspace is replaced.
            Ok((_, Err(why))) => {
                let _ = workspace::remove(staged).await;
                Err(why)
            }
            Ok((restored, Ok(()))) => {
                // Dropping a session kills it.
                if shell.session.take().is_some() {
                    shell.ended = Some(End::Restored);
                }
                let replaced =
                    workspace::blocking(move || workspace::replace(&path, &staged)).await;
                if replaced.is_ok() {
                    if let Some(terminal) = sandbox.terminal.lock().await.as_ref() {
                        terminal.restart();
                    }
                }
                replaced.map(|()| restored)
            }
            Err(e) => Err(e),
        };
        self.forget_if_unused(name, sandbox, &shell);
        restored
    }

    /// Ends the shells no command has used for `idle`, giving their places
    /// back. Sandboxes running or awaiting a command are skipped.
    fn end_idle(&self, idle: Duration) {
        let all: Vec<Arc<Sandbox>> = self.entries().values().cloned().collect();
        for sandbox in all {
            let Ok(mut shell) = sandbox.shell.try_lock() else {
                continue;
            };
            if shell.place.is_some() && shell.idle_since.elapsed() >= idle {
                // Dropping a session kills it.
                if shell.session.take().is_some() {
                    shell.ended = Some(End::Idle(idle));
                }
                shell.place = None;
            }
        }
    }

    /// Forgets the entry if it holds nothing (no shell, no place, no note
    /// for the next command, no job, no terminal) and no other request is
    /// holding or waiting on it (the map holds one reference and the caller
    /// one).
    fn forget_if_unused(&self, name: &str, sandbox: &Arc<Sandbox>, shell: &Shell) {
        let terminal = sandbox
            .terminal
            .try_lock()
            .map_or(true, |terminal| terminal.is_some());
        if shell.session.is_some()
            || shell.place.is_some()
            || shell.ended.is_some()
            || !sandbox.jobs.is_empty()
            || terminal
        {
            return;
        }
        let mut entries = self.entries();
        if Arc::strong_count(sandbox) == 2 {
            entries.remove(name);
        }
    }

    fn entry(&self, name: &str) -> Arc<Sandbox> {
        let mut entries = self.entries();
        let sandbox = entries.entry(name.to_string()).or_insert_with(|| {
            Arc::new(Sandbox {
                shell: tokio::sync::Mutex::new(Shell::new()),
                generation: watch::Sender::new(0),
                restoring: AtomicBool::new(false),
                jobs: Jobs::default(),
                context: Last::default(),
                terminal: tokio::sync::Mutex::new(None),
            })
        });
        Arc::clone(sandbox)
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Arc<Sandbox>>> {
        // Nothing panics while holding this lock; if it ever did, the map
        // itself is still consistent.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn workspace(&self, name: &str) -> PathBuf {
        self.settings.root.join(name)
    }
}

/// Where a restore into the workspace `path` unpacks.
fn staging(path: &Path) -> PathBuf {
    workspace::scratch(path, "restore")
}

/// Runs `task` in a task of its own, to its end even if the caller is
/// dropped.
async fn detached<T: Send + 'static>(
    task: impl Future<Output = Result<T, Error>> + Send + 'static,
) -> Result<T, Error> {
    tokio::spawn(task)
        .await
        .map_err(|e| Error::Internal(format!("sandbox task failed: {e}")))?
}

/// Checks for idle shells a few times per `idle`, so one is ended at most
/// a quarter late (a minute at most), until sandboxd shuts down.
async fn end_idle_shells(sandboxes: Weak<Sandboxes>, idle: Duration) {
    let period = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut ticks = tokio::time::interval(period);
    loop {
        ticks.tick().await;
        let Some(sandboxes) = sandboxes.upgrade() else {
            return;
        };
        sandboxes.end_idle(idle);
    }
}

/// Accepts 1 to 160 characters of `A-Z a-z 0-9 . _ -`, except `.` and `..`,
/// so a name is always exactly one plain path component.
pub fn validate_name(name: &str) -> Result<(), Error> {
    let valid = (1..=MAX_NAME_LEN).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "invalid sandbox name: use 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ - (not . or ..)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_names() {
        for name in [
            "a",
            "room-1",
            "Room_2.v3",
            "...",
            ".hidden",
            &"x".repeat(160),
        ] {
            assert!(validate_name(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn rejects_bad_names() {
        for name in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a%2Fb",
            "a\0",
            &"x".repeat(161),
        ] {
            assert!(
                matches!(validate_name(name), Err(Error::BadRequest(_))),
                "{name:?}"
            );
        }
    }
}
