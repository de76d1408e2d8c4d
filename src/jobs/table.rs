//! The room's jobs in the Sandbox object's SQLite storage: each job as the
//! API shows it (its JSON, which its end updates in place), whether it
//! runs, the newest of its output (`JOB_OUTPUT_TAIL_BYTES`), the byte of
//! its output its follower goes on from, and when it is taken for lost.
//! The running jobs and the newest [`ENDED_JOBS_KEPT`] ended ones are
//! kept. Which jobs a follower of this object instance follows is kept in
//! memory: an evicted object's followers are gone with it.

use std::cell::RefCell;

use worker::{SqlStorage, SqlStorageValue};

use super::Job;
use crate::api::limits::ENDED_JOBS_KEPT;
use crate::runtime::sql;

pub struct Jobs {
    sql: SqlStorage,
    followed: RefCell<Vec<String>>,
}

impl Jobs {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS jobs (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                running INTEGER NOT NULL,
                job TEXT NOT NULL,
                output TEXT NOT NULL DEFAULT '',
                at INTEGER NOT NULL DEFAULT 0,
                lost_at INTEGER NOT NULL
            )",
            None,
        )?;
        Ok(Self {
            sql,
            followed: RefCell::default(),
        })
    }

    /// The running jobs: each one's id, and when it is taken for lost.
    pub fn running(&self) -> worker::Result<Vec<(String, u64)>> {
        let rows = self
            .sql
            .exec("SELECT id, lost_at FROM jobs WHERE running = 1", None)?;
        let mut running = vec![];
        for row in rows.raw() {
            if let [id, lost_at] = &row?[..] {
                running.push((sql::text(id).unwrap_or_default(), int(lost_at)));
            }
        }
        Ok(running)
    }

    /// Adds a job that started; answers it as the API shows it.
    pub fn add(&self, job: &Job, lost_at: u64) -> worker::Result<String> {
        let json = serde_json::to_string(job).expect("a job serializes");
        self.sql.exec(
            "INSERT INTO jobs (id, running, job, lost_at) VALUES (?, 1, ?, ?)",
            vec![job.id.into(), json.as_str().into(), number(lost_at)],
        )?;
        Ok(json)
    }

    /// `{"jobs": [...]}`: the running ones, then the ended, newest first.
    pub fn list(&self) -> worker::Result<String> {
        let rows = self
            .sql
            .exec("SELECT job FROM jobs ORDER BY running DESC, seq DESC", None)?;
        let mut jobs = vec![];
        for row in rows.raw() {
            jobs.extend(row?.first().and_then(sql::text));
        }
        Ok(format!("{{\"jobs\":[{}]}}", jobs.join(",")))
    }

    /// Job `id` with the newest of its output (`output`), if the room has it.
    pub fn get(&self, id: &str) -> worker::Result<Option<String>> {
        let row = sql::value(self.sql.exec(
            "SELECT json_set(job, '$.output', output) FROM jobs WHERE id = ?",
            vec![id.into()],
        )?)?;
        Ok(row.as_ref().and_then(sql::text))
    }

    /// Where a follower of job `id` goes on: the byte of its output, and
    /// the newest output kept; `None` once it ended or went.
    pub fn resume(&self, id: &str) -> worker::Result<Option<(u64, String)>> {
        let row = sql::first(self.sql.exec(
            "SELECT at, output FROM jobs WHERE id = ? AND running = 1",
            vec![id.into()],
        )?)?;
        Ok(match row.as_deref() {
            Some([at, output]) => Some((int(at), sql::text(output).unwrap_or_default())),
            _ => None,
        })
    }

    /// Records job `id`'s newest output and the byte its follower goes on
    /// from; `false` when it no longer runs here.
    pub fn output(&self, id: &str, output: &str, at: u64) -> worker::Result<bool> {
        let cursor = self.sql.exec(
            "UPDATE jobs SET output = ?, at = ? WHERE id = ? AND running = 1",
            vec![output.into(), number(at), id.into()],
        )?;
        Ok(cursor.rows_written() > 0)
    }

    /// Ends job `id` as `state` with `exit_code` at `ended_at`, forgetting
    /// the oldest ended jobs beyond the bound; answers it as the API shows
    /// it, or `None` if it was not running (it ended already, or went).
    pub fn end(
        &self,
        id: &str,
        state: &str,
        exit_code: Option<i64>,
        ended_at: &str,
    ) -> worker::Result<Option<String>> {
        // A JavaScript number reaches SQLite as a real: the cast keeps `3`
        // from being written `3.0`.
        let exit_code = exit_code.map_or(SqlStorageValue::Null, Into::into);
        let row = sql::value(self.sql.exec(
            "UPDATE jobs SET running = 0,
                job = json_set(job, '$.state', ?, '$.exitCode', CAST(? AS INTEGER), '$.endedAt', ?)
             WHERE id = ? AND running = 1 RETURNING job",
            vec![state.into(), exit_code, ended_at.into(), id.into()],
        )?)?;
        self.sql.exec(
            "DELETE FROM jobs WHERE running = 0 AND seq NOT IN
                (SELECT seq FROM jobs WHERE running = 0 ORDER BY seq DESC LIMIT ?)",
            vec![number(ENDED_JOBS_KEPT as u64)],
        )?;
        Ok(row.as_ref().and_then(sql::text))
    }

    /// The room is gone: so are its jobs.
    pub fn forget(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM jobs", None)?;
        Ok(())
    }

    /// Takes job `id` as followed here; `false` if it already was.
    pub fn follow(&self, id: &str) -> bool {
        let mut followed = self.followed.borrow_mut();
        let new = !followed.iter().any(|f| f == id);
        if new {
            followed.push(id.to_owned());
        }
        new
    }

    pub fn unfollow(&self, id: &str) {
        self.followed.borrow_mut().retain(|f| f != id);
    }

    pub fn followed(&self, id: &str) -> bool {
        self.followed.borrow().iter().any(|f| f == id)
    }
}

fn int(value: &SqlStorageValue) -> u64 {
    sql::number(value).unwrap_or_default()
}

fn number(n: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(n as i64)
}
