//! Finding and killing every process of a shell session.
//!
//! Each shell is started with `setsid`, so it and everything it starts share
//! a session id equal to the shell's pid (unless a process calls `setsid`
//! itself, which deliberately escapes). Killing by session id reaches
//! grandchildren that ignore SIGTERM or were re-parented away from the shell.
//! Fork loops are beaten by first stopping every member found and rescanning
//! until no new member appears, then killing them.
//!
//! Pid reuse: Linux keeps a session id allocated while any process still
//! belongs to that session, so while there is anything left to kill the id
//! cannot name a different session. Once the session is empty and its shell
//! reaped, a new session could only get the same id after the kernel's pid
//! counter wrapped around, which callers give no time for.

use std::collections::HashSet;
use std::fs;
use std::io;

use tokio::process::Command;

use crate::rlimits::Limits;

/// Upper bound on scan rounds per phase, so a pathological case cannot hang
/// the caller.
const MAX_ROUNDS: usize = 64;

/// Makes the child `command` spawns the leader of a session (and process
/// group) of its own, under `limits`, killed if sandboxd dies.
pub fn own_session(command: &mut Command, limits: Limits) {
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
}

/// Whether `pid` is a live (non-zombie) process.
pub fn is_alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| parse_stat(&stat))
        .is_some_and(|(state, _)| state != 'Z')
}

/// Live (non-zombie) processes whose session id is `sid`.
pub fn session_members(sid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parse_stat(&stat))
                .is_some_and(|(state, session)| session == sid && state != 'Z')
        })
        .collect()
}

/// State and session id from the text of `/proc/PID/stat`. The command name
/// in parentheses may itself contain spaces and parentheses, so the fields
/// are read after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state come ppid, pgrp, then session.
    let session = fields.nth(2)?.parse().ok()?;
    Some((state, session))
}

/// SIGKILLs every process of session `sid` except `spare` (the shell, when
/// it should survive). The whole session, `spare` included, is frozen first
/// so that nothing, the shell included, can fork while it is being emptied;
/// `spare` is resumed at the end. Does not wait for the killed processes to
/// exit (SIGKILL on a stopped process is final). Returns the pids killed.
pub fn kill_session(sid: i32, spare: Option<i32>) -> HashSet<i32> {
    let mut stopped = HashSet::new();
    for _ in 0..MAX_ROUNDS {
        let new: Vec<i32> = session_members(sid)
            .into_iter()
            .filter(|pid| !stopped.contains(pid))
            .collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            signal(pid, libc::SIGSTOP);
            stopped.insert(pid);
        }
    }

    // A stopped process cannot fork; a fork that completed just before the
    // stop shows up in this rescan.
    let mut killed = HashSet::new();
    for _ in 0..MAX_ROUNDS {
        let targets: Vec<i32> = stopped
            .iter()
            .chain(&session_members(sid))
            .copied()
            .filter(|&pid| Some(pid) != spare && !killed.contains(&pid))
            .collect();
        if targets.is_empty() {
            break;
        }
        for pid in targets {
            signal(pid, libc::SIGKILL);
            killed.insert(pid);
        }
    }

    if let Some(pid) = spare {
        signal(pid, libc::SIGCONT);
    }
    killed
}

/// Sends `sig` to `pid`, or with a negative `pid` to that process group.
pub fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; a vanished pid
    // only yields ESRCH, which is fine.
    unsafe {
        libc::kill(pid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn parses_plain_stat() {
        let stat = "1234 (bash) S 1000 1234 1234 0 -1 4194560 100 0 0 0";
        assert_eq!(parse_stat(stat), Some(('S', 1234)));
    }

    #[test]
    fn parses_stat_with_tricky_command_name() {
        let stat = "77 (a) b (c) Z 5 6 42 0 -1";
        assert_eq!(parse_stat(stat), Some(('Z', 42)));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse_stat("no parens here"), None);
        assert_eq!(parse_stat("1 (x) S 2"), None);
    }

    fn spawn_session(script: &str) -> (std::process::Child, i32) {
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sh");
        leader.args(["-c", script]);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            leader.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let child = leader.spawn().expect("spawn sh");
        let sid = child.id() as i32;
        (child, sid)
    }

    fn wait_for_members(sid: i32, count: usize) -> Vec<i32> {
        let mut members = Vec::new();
        for _ in 0..400 {
            members = session_members(sid);
            if members.len() == count {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        members
    }

    #[test]
    fn kills_the_session_but_spares_the_leader() {
        use std::os::unix::process::ExitStatusExt;
        let (mut child, sid) = spawn_session("sleep 30 & sleep 30 & wait; exit 5");
        let members = wait_for_members(sid, 3);
        assert_eq!(members.len(), 3, "sh and two sleeps: {members:?}");
        assert!(members.contains(&sid));

        kill_session(sid, Some(sid));
        // The leader survived and ran on once its children were gone.
        let status = child.wait().expect("reap sh");
        assert_eq!((status.code(), status.signal()), (Some(5), None));
        assert_eq!(wait_for_members(sid, 0), Vec::<i32>::new());
    }

    #[test]
    fn kills_everything_including_term_ignoring_processes() {
        use std::os::unix::process::ExitStatusExt;
        let (mut child, sid) = spawn_session("trap '' TERM; sleep 30 & sleep 30 & wait");
        assert_eq!(wait_for_members(sid, 3).len(), 3);

        kill_session(sid, None);
        let status = child.wait().expect("reap sh");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert_eq!(wait_for_members(sid, 0), Vec::<i32>::new());
    }
}
