//! Jobs: commands beside a sandbox's shell that run for minutes or hours
//! (the routes and their JSON are `duet_wire::job`).
//!
//! A job is `bash --noprofile --norc -c CMD`, as the shell's user, under
//! the shell's resource limits, started in the working directory and with
//! the exported environment the sandbox's shell has at that moment (see
//! `context`). Like the shell it leads a session, and so a process group,
//! of its own: the shell never sees it, and a stop reaches everything it
//! started. Its stdin is `/dev/null`; its stdout and stderr are one pipe,
//! so its output is one stream in the order it was printed.
//!
//! A task per job reads that pipe into the job's [`Kept`] output and waits
//! for its bash to end. A stop (asked for, or its `maxMs` reached) sends
//! SIGTERM to its process group and, [`STOP_GRACE_MS`] later, kills its
//! whole session; when the sandbox is destroyed or sandboxd shuts down, the
//! session is killed at once. Whichever way bash ends, whatever it left
//! running in its session is killed then too (a job is over when its
//! command is), and the output still in the pipe is read. Each running job
//! is recorded in a file (see `records`), so that a sandboxd that dies
//! leaves nothing running past its restart.
//!
//! Readers of a job's output ([`Reader`]) each keep their own offset and
//! are woken whenever output is added or the job ends, so any number of
//! them read at once, and one that goes away changes nothing for the job.
//!
//! At most [`MAX_RUNNING_JOBS`] run at once per sandbox; of the jobs that
//! ended, the newest [`KEPT_ENDED_JOBS`] are kept.

pub mod context;
pub mod records;

use std::io;
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use duet_wire::job::{
    JobEvent, JobInfo, JobRequest, JobState, JOB_OUTPUT_KEPT_BYTES, MAX_RUNNING_JOBS, STOP_GRACE_MS,
};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, timeout, Instant};

use crate::error::Error;
use crate::kept::Kept;
use crate::procs;
use crate::rlimits::Limits;
use crate::session::status_code;
use crate::timestamp::iso8601_millis;
use context::Context;
use records::{Record, Records};

/// Ended jobs kept per sandbox; the worker keeps the room's whole list.
pub const KEPT_ENDED_JOBS: usize = 20;
/// The longest a job id is.
pub const MAX_ID_LEN: usize = 64;
const READ_CHUNK: usize = 64 * 1024;
/// How long to read what is left in the pipe once the job ended: only a
/// process that left the job's session can keep it open longer.
const DRAIN: Duration = Duration::from_millis(250);
/// How long a killed job may take to be reaped and drained.
const KILL_WAIT: Duration = Duration::from_millis(2000);

/// Accepts 1 to [`MAX_ID_LEN`] characters of `A-Z a-z 0-9 _ -`.
pub fn validate_id(id: &str) -> Result<(), Error> {
    let valid = (1..=MAX_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "invalid job id: use 1 to {MAX_ID_LEN} characters of A-Z a-z 0-9 _ -"
        )))
    }
}

/// The jobs of one sandbox, in the order they started.
#[derive(Default)]
pub struct Jobs(Mutex<Vec<Arc<Job>>>);

impl Jobs {
    /// Refuses what [`Jobs::start`] would: a job id already known, or a
    /// sandbox running as many jobs as it may.
    pub fn check(&self, id: &str) -> Result<(), Error> {
        admit(&self.lock(), id)
    }

    /// Starts the job `request` with `context`, unless the sandbox was
    /// destroyed since `destroyed` was looked at: a destroy stops the jobs
    /// it finds, and checking under the same lock means it finds this one.
    pub fn start(
        &self,
        sandbox: &str,
        request: JobRequest,
        context: Context,
        limits: Limits,
        records: &Records,
        destroyed: &watch::Receiver<u64>,
    ) -> Result<JobInfo, Error> {
        let mut jobs = self.lock();
        if destroyed.has_changed().unwrap_or(true) {
            return Err(Error::DestroyedBeforeStart(sandbox.to_string()));
        }
        admit(&jobs, &request.id)?;
        let job = Job::start(sandbox, request, context, limits, records)?;
        let info = job.info();
        jobs.push(job);
        forget_old(&mut jobs);
        Ok(info)
    }

    /// Every job, the running ones first, each group in order of start.
    pub fn list(&self) -> Vec<JobInfo> {
        let mut jobs = self.lock();
        forget_old(&mut jobs);
        let (running, ended): (Vec<_>, Vec<_>) = jobs.iter().partition(|job| job.is_running());
        running
            .into_iter()
            .chain(ended)
            .map(|job| job.info())
            .collect()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.lock().iter().find(|job| job.id == id).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Kills every running job, waits (bounded) for each to end, and
    /// forgets them all.
    pub async fn stop_all(&self) {
        let jobs = std::mem::take(&mut *self.lock());
        for job in &jobs {
            job.ask(Stop::Kill);
        }
        for job in &jobs {
            job.ended(KILL_WAIT).await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Job>>> {
        // Nothing panics while holding this lock; the list stays usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn admit(jobs: &[Arc<Job>], id: &str) -> Result<(), Error> {
    if jobs.iter().any(|job| job.id == id) {
        return Err(Error::JobExists(id.to_string()));
    }
    if jobs.iter().filter(|job| job.is_running()).count() >= MAX_RUNNING_JOBS {
        return Err(Error::TooManyJobs {
            max: MAX_RUNNING_JOBS,
        });
    }
    Ok(())
}

/// Forgets the oldest ended jobs past [`KEPT_ENDED_JOBS`].
fn forget_old(jobs: &mut Vec<Arc<Job>>) {
    let ended = jobs.iter().filter(|job| !job.is_running()).count();
    let mut extra = ended.saturating_sub(KEPT_ENDED_JOBS);
    jobs.retain(|job| {
        let forget = extra > 0 && !job.is_running();
        extra -= usize::from(forget);
        !forget
    });
}

pub struct Job {
    id: String,
    cmd: String,
    started_at: String,
    /// Its bash's pid: the id of its session and process group.
    sid: i32,
    state: Mutex<State>,
    /// Bumped whenever output is added and when the job ends.
    changed: watch::Sender<()>,
    /// The strongest stop asked for.
    stop: watch::Sender<Stop>,
}

struct State {
    kept: Kept,
    end: Option<Ended>,
}

#[derive(Clone)]
struct Ended {
    state: JobState,
    exit_code: Option<i32>,
    at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stop {
    No,
    /// SIGTERM to its process group, its session killed after the grace.
    Term,
    /// Its session killed at once.
    Kill,
}

impl Job {
    fn start(
        sandbox: &str,
        request: JobRequest,
        context: Context,
        limits: Limits,
        records: &Records,
    ) -> Result<Arc<Job>, Error> {
        let started = SystemTime::now();
        let (mut child, output) = spawn(&request.cmd, context, limits).map_err(Error::JobSpawn)?;
        let Some(sid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
            return Err(Error::JobSpawn(io::Error::other("the job has no pid")));
        };
        let record = match records.add(sid, sandbox, &request.id) {
            Ok(record) => record,
            Err(e) => {
                // Unrecorded, it could outlive a crash of sandboxd.
                procs::kill_session(sid, None);
                let _ = child.start_kill();
                return Err(Error::JobSpawn(e));
            }
        };
        let job = Arc::new(Job {
            id: request.id,
            cmd: request.cmd,
            started_at: iso8601_millis(started),
            sid,
            state: Mutex::new(State {
                kept: Kept::new(JOB_OUTPUT_KEPT_BYTES),
                end: None,
            }),
            changed: watch::Sender::new(()),
            stop: watch::Sender::new(Stop::No),
        });
        let life = Duration::from_millis(request.max_ms);
        tokio::spawn(Arc::clone(&job).run(child, output, life, record));
        Ok(job)
    }

    pub fn info(&self) -> JobInfo {
        let state = self.state();
        JobInfo {
            id: self.id.clone(),
            cmd: self.cmd.clone(),
            state: state
                .end
                .as_ref()
                .map_or(JobState::Running, |end| end.state),
            exit_code: state.end.as_ref().and_then(|end| end.exit_code),
            started_at: self.started_at.clone(),
            ended_at: state.end.as_ref().map(|end| end.at.clone()),
            output_bytes: state.kept.total(),
        }
    }

    fn is_running(&self) -> bool {
        self.state().end.is_none()
    }

    /// Stops the job (SIGTERM, then SIGKILL after the grace) and answers
    /// how it ended; at once if it already had.
    pub async fn stop(&self) -> JobInfo {
        self.ask(Stop::Term);
        self.ended(Duration::from_millis(STOP_GRACE_MS) + KILL_WAIT)
            .await;
        self.info()
    }

    /// A reader of its output from byte `from`.
    pub fn reader(self: &Arc<Self>, from: u64) -> Result<Reader, Error> {
        let total = self.state().kept.total();
        if from > total {
            return Err(Error::BadRequest(format!(
                "from {from} is past the job's output, which is {total} bytes so far"
            )));
        }
        Ok(Reader {
            job: Arc::clone(self),
            at: from,
            changed: self.changed.subscribe(),
            done: false,
        })
    }

    fn ask(&self, stop: Stop) {
        self.stop.send_if_modified(|asked| {
            let stronger = stop > *asked;
            if stronger {
                *asked = stop;
            }
            stronger
        });
    }

    /// Resolves once the job has ended, or after `within`.
    async fn ended(&self, within: Duration) {
        let mut changed = self.changed.subscribe();
        let _ = timeout(within, async {
            while self.is_running() {
                if changed.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Reads its output and stops it when asked or at the end of its
    /// `life`, until its bash ends; then kills what it left running, reads
    /// what is left of its output and says how it ended.
    async fn run(
        self: Arc<Self>,
        mut child: Child,
        mut output: pipe::Receiver,
        life: Duration,
        record: Record,
    ) {
        let mut stop = self.stop.subscribe();
        let end_of_life = sleep(life);
        tokio::pin!(end_of_life);
        let mut lived = false;
        let mut kill_at = None;
        let mut buf = vec![0; READ_CHUNK];
        let mut open = true;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.ok(),
                read = output.read(&mut buf), if open => match read {
                    Ok(n) if n > 0 => self.add(&buf[..n]),
                    _ => open = false,
                },
                () = &mut end_of_life, if !lived => {
                    lived = true;
                    self.ask(Stop::Term);
                }
                Ok(()) = stop.changed() => match *stop.borrow_and_update() {
                    Stop::No => {}
                    Stop::Term => if kill_at.is_none() {
                        procs::signal(-self.sid, libc::SIGTERM);
                        kill_at = Some(Instant::now() + Duration::from_millis(STOP_GRACE_MS));
                    },
                    Stop::Kill => {
                        procs::kill_session(self.sid, None);
                    }
                },
                () = sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                    kill_at = None;
                    procs::kill_session(self.sid, None);
                }
            }
        };
        procs::kill_session(self.sid, None);
        if open {
            let _ = timeout(DRAIN, async {
                while let Ok(n @ 1..) = output.read(&mut buf).await {
                    self.add(&buf[..n]);
                }
            })
            .await;
        }
        record.remove();
        let stopped = *stop.borrow() != Stop::No;
        self.end(status, stopped);
    }

    fn add(&self, bytes: &[u8]) {
        self.state().kept.add(bytes);
        self.changed.send_replace(());
    }

    fn end(&self, status: Option<ExitStatus>, stopped: bool) {
        self.state().end = Some(Ended {
            state: if stopped {
                JobState::Stopped
            } else {
                JobState::Exited
            },
            exit_code: status.map(status_code),
            at: iso8601_millis(SystemTime::now()),
        });
        self.changed.send_replace(());
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding this lock; the state stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts `bash -c cmd` as a job (see the module docs): the child and the
/// read end of its output.
fn spawn(cmd: &str, context: Context, limits: Limits) -> io::Result<(Child, pipe::Receiver)> {
    let (reader, writer) = io::pipe()?;
    let mut command = Command::new("bash");
    command
        .args(["--noprofile", "--norc", "-c", cmd])
        .env_clear()
        .envs(context.env)
        .current_dir(context.cwd)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer);
    procs::own_session(&mut command, limits);
    let child = command.spawn()?;
    // The write ends go with the command, so the pipe ends with the job.
    drop(command);
    Ok((child, pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?))
}

/// One reader of a job's output: its events from an offset on.
pub struct Reader {
    job: Arc<Job>,
    /// Where its next output starts.
    at: u64,
    changed: watch::Receiver<()>,
    done: bool,
}

impl Reader {
    /// The next event: output kept from where it is (skipping what is no
    /// longer kept), once there is some; then the end; then `None`.
    pub async fn next(&mut self) -> Option<JobEvent> {
        while !self.done {
            self.changed.borrow_and_update();
            let event = {
                let state = self.job.state();
                match state
                    .kept
                    .piece(self.at, state.kept.total(), state.end.is_some())
                {
                    Some(piece) => {
                        self.at = piece.offset + piece.bytes;
                        Some(JobEvent::Output {
                            offset: piece.offset,
                            bytes: piece.bytes,
                            data: piece.data,
                        })
                    }
                    None => state.end.clone().map(|end| {
                        self.done = true;
                        JobEvent::End {
                            state: end.state,
                            exit_code: end.exit_code,
                            ended_at: end.at,
                        }
                    }),
                }
            };
            if event.is_some() {
                return event;
            }
            // The job holds the sender, and this reader the job.
            let _ = self.changed.changed().await;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_ids_and_refuses_others() {
        for id in ["a", "job-1", "J_2", &"x".repeat(MAX_ID_LEN)] {
            assert!(validate_id(id).is_ok(), "{id}");
        }
        for id in ["", "a.b", "a/b", "a b", "é", &"x".repeat(MAX_ID_LEN + 1)] {
            assert!(
                matches!(validate_id(id), Err(Error::BadRequest(_))),
                "{id:?}"
            );
        }
    }
}
