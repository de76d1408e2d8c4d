//! A file for each running job, so that no job outlives the sandboxd that
//! started it by more than that sandboxd's restart.
//!
//! A job runs in a session of its own, whose id is the pid of its leader.
//! Before a job is answered as started, a file named by that id is written
//! under `~jobs` in the root (a name no sandbox can have); it is removed
//! once the job and every process of its session have been killed or
//! ended. A sandboxd that dies without doing so (crash, SIGKILL) leaves its
//! files behind, and the next one kills those sessions at start, before it
//! starts anything of its own, then removes the directory with the other
//! leftovers under the root.
//!
//! A session id stays allocated while any process of the session lives, so
//! a recorded id names the job's processes for as long as there is
//! anything left of them; once they are all gone the id is only reused
//! after the kernel's pid counter wrapped around.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::procs;

/// Where the files are, under the root.
const DIR: &str = "~jobs";

pub struct Records {
    dir: PathBuf,
}

/// The file of one running job.
pub struct Record(PathBuf);

impl Records {
    pub fn new(root: &Path) -> Self {
        Records {
            dir: root.join(DIR),
        }
    }

    /// Records the session `sid` of `job` in `sandbox`.
    pub fn add(&self, sid: i32, sandbox: &str, job: &str) -> io::Result<Record> {
        fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(sid.to_string());
        fs::write(&path, format!("{sandbox} {job}\n"))?;
        Ok(Record(path))
    }
}

impl Record {
    /// Once nothing of the job's session is left. Not done on drop: a job
    /// dropped without being ended must stay recorded.
    pub fn remove(self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Kills the sessions of the jobs an earlier sandboxd left running under
/// `root`. Best effort, like any cleanup at startup; the directory itself
/// is a leftover `workspace::remove_leftovers` removes.
pub fn kill_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root.join(DIR)) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(sid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if !procs::kill_session(sid, None).is_empty() {
            let job = fs::read_to_string(entry.path()).unwrap_or_default();
            eprintln!(
                "sandboxd: killed what was left of a job an earlier sandboxd started: {}",
                job.trim()
            );
        }
    }
}
