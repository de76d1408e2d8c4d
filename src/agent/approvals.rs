//! A room's policy and the agent's commands waiting for a writer, in the
//! DuetAgent's SQLite storage, so that both outlive the object's instance:
//! a paused exchange (`exchange::Paused`, as JSON) with its approvals, one
//! per command of the waiting answer, in the order written.
//!
//! Deciding is one synchronous step (no `await` between reading an approval
//! and writing its decision), so of two writers deciding at once the first
//! wins and the second learns how it went. An exchange is taken for resuming
//! in one step too, and its rows deleted as it is taken: a resume that dies
//! half-way (the object evicted) does not run its commands twice.

use std::cell::RefCell;

use worker::{SqlStorage, SqlStorageValue};

use super::exchange::Paused;
use crate::api::policy::{AgentCommands, Policy, Verdict};
use crate::api::wire::{Approval, Decision};
use crate::api::ApiError;

pub struct Approvals {
    sql: SqlStorage,
    /// The room's policy, once read.
    policy: RefCell<Option<Policy>>,
}

/// A paused exchange whose approvals are all decided.
pub struct Ready {
    pub paused: Paused,
    pub decided: Vec<Approval>,
}

const APPROVAL_COLUMNS: &str = "id, command, asked_by AS askedBy, asked_at AS askedAt, \
     expires_at AS expiresAt, decision, decided_by AS decidedBy, rule, decided_at AS decidedAt";

impl Approvals {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS policy (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                policy TEXT NOT NULL
            )",
            None,
        )?;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS paused (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                exchange TEXT NOT NULL,
                ready INTEGER NOT NULL DEFAULT 0
            )",
            None,
        )?;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS approvals (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                paused INTEGER NOT NULL,
                command TEXT NOT NULL,
                asked_by TEXT,
                asked_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                decision TEXT,
                decided_by TEXT,
                rule TEXT,
                decided_at INTEGER
            )",
            None,
        )?;
        Ok(Self {
            sql,
            policy: RefCell::default(),
        })
    }

    /// The room's policy: as set, else a new room's with `default` mode.
    pub fn policy(&self, default: AgentCommands) -> worker::Result<Policy> {
        if let Some(policy) = self.policy.borrow().as_ref() {
            return Ok(policy.clone());
        }
        #[derive(serde::Deserialize)]
        struct Row {
            policy: String,
        }
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT policy FROM policy WHERE id = 1", None)?
            .to_array()?;
        let policy = rows
            .first()
            .and_then(|row| serde_json::from_str(&row.policy).ok())
            .unwrap_or_else(|| Policy::new(default));
        *self.policy.borrow_mut() = Some(policy.clone());
        Ok(policy)
    }

    pub fn set_policy(&self, policy: &Policy) -> worker::Result<()> {
        let json = serde_json::to_string(policy).expect("a policy serializes");
        self.sql.exec(
            "INSERT INTO policy (id, policy) VALUES (1, ?)
             ON CONFLICT (id) DO UPDATE SET policy = excluded.policy",
            vec![SqlStorageValue::String(json)],
        )?;
        *self.policy.borrow_mut() = Some(policy.clone());
        Ok(())
    }

    /// Keeps `paused` with an approval per command of its waiting answer,
    /// those a rule decided already decided; answers the ones that wait.
    pub fn propose(
        &self,
        paused: &Paused,
        commands: &[(String, Verdict)],
        now: u64,
        expires_at: u64,
    ) -> worker::Result<Vec<Approval>> {
        let json = serde_json::to_string(paused).expect("an exchange serializes");
        self.sql.exec(
            "INSERT INTO paused (exchange) VALUES (?)",
            vec![SqlStorageValue::String(json)],
        )?;
        let id = self.last_id()?;
        for (command, verdict) in commands {
            let (decision, rule) = match verdict {
                Verdict::Ask => (None, None),
                Verdict::Run { rule } => (Some(Decision::Approved), rule.as_deref()),
                Verdict::Denied { rule } => (Some(Decision::Denied), Some(rule.as_str())),
                Verdict::Off => (Some(Decision::Denied), None),
            };
            let text = |s: Option<&str>| s.map_or(SqlStorageValue::Null, |s| s.into());
            self.sql.exec(
                "INSERT INTO approvals (paused, command, asked_by, asked_at, expires_at,
                    decision, rule, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    SqlStorageValue::Integer(id),
                    command.as_str().into(),
                    text(paused.asked_by.as_deref()),
                    SqlStorageValue::Integer(now as i64),
                    SqlStorageValue::Integer(expires_at as i64),
                    text(decision.map(Decision::name)),
                    text(rule),
                    decision.map_or(SqlStorageValue::Null, |_| {
                        SqlStorageValue::Integer(now as i64)
                    }),
                ],
            )?;
        }
        self.select(
            "WHERE paused = ? AND decision IS NULL ORDER BY id",
            vec![SqlStorageValue::Integer(id)],
        )
    }

    /// The approvals that wait, oldest first.
    pub fn pending(&self) -> worker::Result<Vec<Approval>> {
        self.select("WHERE decision IS NULL ORDER BY id", vec![])
    }

    /// Decides approval `id` at `now`, if nobody has; a paused exchange
    /// with nothing left to decide becomes ready.
    pub fn decide(
        &self,
        id: u64,
        decision: Decision,
        by: Option<&str>,
        now: u64,
    ) -> Result<Approval, ApiError> {
        let found = self.select("WHERE id = ?", vec![SqlStorageValue::Integer(id as i64)])?;
        let approval = found.into_iter().next().ok_or(ApiError::NoSuchApproval)?;
        if let Some(earlier) = approval.decision {
            let how = match (&approval.decided_by, &approval.rule) {
                (Some(by), _) => format!("{} by {by}", earlier.name()),
                (None, Some(rule)) => format!("{} by the rule `{rule}`", earlier.name()),
                (None, None) => earlier.name().to_owned(),
            };
            return Err(ApiError::AlreadyDecided(how));
        }
        self.sql.exec(
            "UPDATE approvals SET decision = ?, decided_by = ?, decided_at = ? WHERE id = ?",
            vec![
                decision.name().into(),
                by.map_or(SqlStorageValue::Null, |by| by.into()),
                SqlStorageValue::Integer(now as i64),
                SqlStorageValue::Integer(id as i64),
            ],
        )?;
        self.mark_ready()?;
        Ok(Approval {
            decision: Some(decision),
            decided_by: by.map(str::to_owned),
            decided_at: Some(now),
            ..approval
        })
    }

    /// Expires the approvals due by `now`; answers them.
    pub fn expire(&self, now: u64) -> worker::Result<Vec<Approval>> {
        let due = self.select(
            "WHERE decision IS NULL AND expires_at <= ? ORDER BY id",
            vec![SqlStorageValue::Integer(now as i64)],
        )?;
        for approval in &due {
            self.sql.exec(
                "UPDATE approvals SET decision = ?, decided_at = ? WHERE id = ?",
                vec![
                    Decision::Expired.name().into(),
                    SqlStorageValue::Integer(now as i64),
                    SqlStorageValue::Integer(approval.id as i64),
                ],
            )?;
        }
        self.mark_ready()?;
        Ok(due
            .into_iter()
            .map(|approval| Approval {
                decision: Some(Decision::Expired),
                decided_at: Some(now),
                ..approval
            })
            .collect())
    }

    /// Takes a ready exchange, forgetting it here.
    pub fn take_ready(&self) -> worker::Result<Option<Ready>> {
        #[derive(serde::Deserialize)]
        struct Row {
            id: i64,
            exchange: String,
        }
        let rows: Vec<Row> = self
            .sql
            .exec(
                "SELECT id, exchange FROM paused WHERE ready = 1 ORDER BY id LIMIT 1",
                None,
            )?
            .to_array()?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let id = SqlStorageValue::Integer(row.id);
        let decided = self.select("WHERE paused = ? ORDER BY id", vec![id.clone()])?;
        self.sql
            .exec("DELETE FROM approvals WHERE paused = ?", vec![id.clone()])?;
        self.sql.exec("DELETE FROM paused WHERE id = ?", vec![id])?;
        // An exchange stored by another version of the worker, unreadable
        // here, is dropped rather than retried for ever.
        Ok(serde_json::from_str(&row.exchange)
            .ok()
            .map(|paused| Ready { paused, decided }))
    }

    /// When something is next due: now if an exchange is ready, else the
    /// first expiry of a waiting approval.
    pub fn next_due(&self, now: u64) -> worker::Result<Option<u64>> {
        #[derive(serde::Deserialize)]
        struct Row {
            due: Option<i64>,
        }
        let rows: Vec<Row> = self
            .sql
            .exec(
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM paused WHERE ready = 1) THEN ?
                   ELSE (SELECT MIN(expires_at) FROM approvals WHERE decision IS NULL) END AS due",
                vec![SqlStorageValue::Integer(now as i64)],
            )?
            .to_array()?;
        Ok(rows
            .first()
            .and_then(|row| row.due)
            .map(|due| due.max(0) as u64))
    }

    /// The room is forgotten: its policy, approvals and paused exchanges.
    pub fn forget(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM approvals", None)?;
        self.sql.exec("DELETE FROM paused", None)?;
        self.sql.exec("DELETE FROM policy", None)?;
        *self.policy.borrow_mut() = None;
        Ok(())
    }

    /// Marks ready every paused exchange with nothing left to decide.
    fn mark_ready(&self) -> worker::Result<()> {
        self.sql.exec(
            "UPDATE paused SET ready = 1 WHERE ready = 0 AND NOT EXISTS
               (SELECT 1 FROM approvals WHERE approvals.paused = paused.id
                AND approvals.decision IS NULL)",
            None,
        )?;
        Ok(())
    }

    fn last_id(&self) -> worker::Result<i64> {
        #[derive(serde::Deserialize)]
        struct Row {
            id: i64,
        }
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT last_insert_rowid() AS id", None)?
            .to_array()?;
        Ok(rows.first().map_or(0, |row| row.id))
    }

    fn select(&self, filter: &str, values: Vec<SqlStorageValue>) -> worker::Result<Vec<Approval>> {
        let query = format!("SELECT {APPROVAL_COLUMNS} FROM approvals {filter}");
        self.sql.exec(&query, values)?.to_array()
    }
}
