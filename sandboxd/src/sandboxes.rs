//! The sandboxes by name: a workspace and at most one live shell each.
//!
//! Commands of one sandbox run one at a time in arrival order (a fair
//! mutex); different sandboxes run in parallel. Each command and each
//! destroy runs in a task of its own, so a client hanging up mid-command
//! cannot leave a shell half-way through a command.
//!
//! Destroy ends the running command, fails commands queued before it with
//! [`Error::DestroyedBeforeStart`], and leaves commands arriving after it to
//! start on a fresh workspace.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Error;
use crate::rlimits::Limits;
use crate::session::{Outcome, Session};
use crate::workspace;

pub const MAX_NAME_LEN: usize = 160;

pub struct Settings {
    /// Absolute directory holding one workspace per sandbox.
    pub root: PathBuf,
    /// The whole environment of every shell, apart from HOME.
    pub shell_env: Vec<(String, String)>,
    /// Bytes kept per stream of one command.
    pub output_limit: usize,
    /// Resource limits every shell starts with.
    pub limits: Limits,
}

pub struct Sandboxes {
    settings: Settings,
    entries: Mutex<HashMap<String, Arc<Sandbox>>>,
}

struct Sandbox {
    /// The shell, if one is running; tokio's mutex is fair (FIFO).
    shell: tokio::sync::Mutex<Option<Session>>,
    /// Bumped by every destroy; a running command watching it is ended.
    generation: watch::Sender<u64>,
}

impl Sandboxes {
    pub fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Sandboxes {
            settings,
            entries: Mutex::new(HashMap::new()),
        })
    }

    /// Runs `cmd` in the sandbox's shell, starting shell and workspace if
    /// needed.
    pub async fn exec(
        self: &Arc<Self>,
        name: &str,
        cmd: String,
        timeout: Duration,
    ) -> Result<Outcome, Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        tokio::spawn(async move { this.exec_in_order(&name, &cmd, timeout).await })
            .await
            .map_err(|e| Error::Internal(format!("command task failed: {e}")))?
    }

    /// Ends the sandbox's shell and everything it started, and removes its
    /// workspace. Destroying an unknown sandbox succeeds.
    pub async fn destroy(self: &Arc<Self>, name: &str) -> Result<(), Error> {
        validate_name(name)?;
        let (this, name) = (Arc::clone(self), name.to_string());
        tokio::spawn(async move { this.destroy_in_order(&name).await })
            .await
            .map_err(|e| Error::Internal(format!("destroy task failed: {e}")))?
    }

    /// Ends every command and shell (workspaces stay).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Sandbox>> = self.entries().values().cloned().collect();
        for sandbox in &all {
            sandbox.generation.send_modify(|g| *g += 1);
        }
        for sandbox in all {
            // Dropping a session kills it.
            sandbox.shell.lock().await.take();
        }
    }

    async fn exec_in_order(
        &self,
        name: &str,
        cmd: &str,
        timeout: Duration,
    ) -> Result<Outcome, Error> {
        let sandbox = self.entry(name);
        let mut destroyed = sandbox.generation.subscribe();
        let mut shell = sandbox.shell.lock().await;
        if destroyed.has_changed().unwrap_or(true) {
            return Err(Error::DestroyedBeforeStart(name.to_string()));
        }
        // A shell that died between commands is dropped (killing leftovers),
        // and the command is told.
        let (mut session, ended) = match shell.take().map(|mut s| (s.ended(), s)) {
            Some((None, session)) => (session, None),
            previous => {
                let ended = previous.and_then(|(ended, _)| ended);
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
            .run(cmd, timeout, self.settings.output_limit, cancelled)
            .await;
        if let Some(ended) = ended {
            outcome.note(&ended.note_for_next());
        }
        if outcome.shell_usable {
            *shell = Some(session);
        }
        eprintln!(
            "sandbox={name} exit={} duration_ms={} timed_out={} truncated={}",
            outcome.exit_code,
            outcome.duration.as_millis(),
            outcome.timed_out,
            outcome.truncated
        );
        Ok(outcome)
    }

    async fn destroy_in_order(&self, name: &str) -> Result<(), Error> {
        let sandbox = self.entry(name);
        sandbox.generation.send_modify(|g| *g += 1);
        let mut shell = sandbox.shell.lock().await;
        shell.take();
        let removed = workspace::remove(self.workspace(name)).await;
        // Forget the entry unless another request is holding or waiting on it.
        let mut entries = self.entries();
        if Arc::strong_count(&sandbox) == 2 {
            entries.remove(name);
        }
        removed
    }

    fn entry(&self, name: &str) -> Arc<Sandbox> {
        let mut entries = self.entries();
        let sandbox = entries.entry(name.to_string()).or_insert_with(|| {
            Arc::new(Sandbox {
                shell: tokio::sync::Mutex::new(None),
                generation: watch::Sender::new(0),
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
