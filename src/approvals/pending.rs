//! A room's policy and the agent's commands waiting for a writer, in the
//! DuetAgent's SQLite storage, so that both outlive the object's instance:
//! a paused exchange (as the exchange writes it, text to this table) with
//! its approvals, one per command of the waiting answer, in the order
//! written.
//!
//! Deciding is one synchronous step (no `await` between reading an approval
//! and writing its decision), so of two writers deciding at once the first
//! wins and the second learns how it went. An exchange is taken for resuming
//! in one step too, and deleted as it is taken: a resume that dies half-way
//! (the object evicted) does not run its commands twice.
//!
//! Every decision made here, and the forgetting of them all, is told to
//! whoever waits for it in memory ([`waiting`](super::waiting)): one place
//! that no way of deciding can pass by.

use std::cell::RefCell;

use worker::{SqlStorage, SqlStorageValue};

use super::policy::{AgentCommands, Policy, Verdict};
use super::waiting::{Waiter, Waiting};
use crate::api::error::FieldErrors;
use crate::api::shapes::{Approval, Decision};
use crate::api::validate::{json_object, optional_name, required_string};
use crate::api::ApiError;
use crate::runtime::sql::{self, number, text};

/// `{"decision": "approve"|"deny", "userId"?: string}`: whether a command
/// of the agent's runs, and who says so.
pub fn decision_request(body: &[u8]) -> Result<(bool, Option<String>), ApiError> {
    let object = json_object(body)?;
    let mut errors = FieldErrors::new();
    let approve = match required_string(&object, "decision", &mut errors) {
        Some("approve") => Some(true),
        Some("deny") => Some(false),
        Some(_) => {
            let why = "must be approve or deny";
            errors.entry("decision").or_default().push(why.into());
            None
        }
        None => None,
    };
    let user_id = optional_name(&object, "userId", &mut errors);
    match approve {
        Some(approve) if errors.is_empty() => Ok((approve, user_id)),
        _ => Err(ApiError::Invalid(errors)),
    }
}

pub struct Approvals {
    sql: SqlStorage,
    /// The room's policy, once read.
    policy: RefCell<Option<Policy>>,
    /// Who waits for a decision, in this instance of the object.
    waiting: Waiting,
}

/// A paused exchange whose approvals are all decided.
pub struct Ready {
    /// The exchange, as it was kept.
    pub paused: String,
    pub decided: Vec<Approval>,
}

/// Decided approvals kept after their exchange went on.
const KEPT_DECIDED: i64 = 1_000;

const APPROVAL_COLUMNS: &str =
    "id, command, asked_by, asked_at, expires_at, decision, decided_by, rule, decided_at, diff";

/// An approval to keep for a command of a waiting answer: what the policy
/// said of it, and for a file's change the change.
pub struct Proposal {
    pub command: String,
    pub verdict: Verdict,
    pub diff: Option<String>,
}

impl Approvals {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        // Rules hold no control characters, so a newline separates them.
        sql.exec(
            "CREATE TABLE IF NOT EXISTS policy (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                mode TEXT NOT NULL,
                allow TEXT NOT NULL,
                deny TEXT NOT NULL
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
                decided_at INTEGER,
                diff TEXT
            )",
            None,
        )?;
        // A table made before approvals showed diffs gains the column; one
        // that has it refuses, which is as good.
        let _ = sql.exec("ALTER TABLE approvals ADD COLUMN diff TEXT", None);
        Ok(Self {
            sql,
            policy: RefCell::default(),
            waiting: Waiting::default(),
        })
    }

    /// The room's policy: as set, else a new room's with `default` mode.
    pub fn policy(&self, default: AgentCommands) -> worker::Result<Policy> {
        if let Some(policy) = self.policy.borrow().as_ref() {
            return Ok(policy.clone());
        }
        let row = sql::first(
            self.sql
                .exec("SELECT mode, allow, deny FROM policy WHERE id = 1", None)?,
        )?;
        let policy = match row.as_deref() {
            Some([mode, allow, deny]) => Policy {
                agent_commands: text(mode)
                    .and_then(|mode| AgentCommands::parse(&mode))
                    .unwrap_or(default),
                allow: rules(allow),
                deny: rules(deny),
            },
            _ => Policy::new(default),
        };
        *self.policy.borrow_mut() = Some(policy.clone());
        Ok(policy)
    }

    pub fn set_policy(&self, policy: &Policy) -> worker::Result<()> {
        self.sql.exec(
            "INSERT INTO policy (id, mode, allow, deny) VALUES (1, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET
               mode = excluded.mode, allow = excluded.allow, deny = excluded.deny",
            vec![
                policy.agent_commands.name().into(),
                SqlStorageValue::String(policy.allow.join("\n")),
                SqlStorageValue::String(policy.deny.join("\n")),
            ],
        )?;
        *self.policy.borrow_mut() = Some(policy.clone());
        Ok(())
    }

    /// Keeps `paused` with an approval per command of its waiting answer,
    /// those a rule decided already decided; answers the ones that wait.
    pub fn propose(
        &self,
        paused: String,
        asked_by: Option<&str>,
        commands: &[Proposal],
        now: u64,
        expires_at: u64,
    ) -> worker::Result<Vec<Approval>> {
        self.sql.exec(
            "INSERT INTO paused (exchange) VALUES (?)",
            vec![SqlStorageValue::String(paused)],
        )?;
        let id = self.last_id()?;
        for Proposal {
            command,
            verdict,
            diff,
        } in commands
        {
            let (decision, rule) = match verdict {
                Verdict::Ask => (None, None),
                Verdict::Run { rule } => (Some(Decision::Approved), rule.as_deref()),
                Verdict::Denied { rule } => (Some(Decision::Denied), Some(rule.as_str())),
                Verdict::Off => (Some(Decision::Denied), None),
            };
            let or_null = |s: Option<&str>| s.map_or(SqlStorageValue::Null, |s| s.into());
            self.sql.exec(
                "INSERT INTO approvals (paused, command, asked_by, asked_at, expires_at,
                    decision, rule, decided_at, diff) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    SqlStorageValue::Integer(id),
                    command.as_str().into(),
                    or_null(asked_by),
                    SqlStorageValue::Integer(now as i64),
                    SqlStorageValue::Integer(expires_at as i64),
                    or_null(decision.map(Decision::name)),
                    or_null(rule),
                    decision.map_or(SqlStorageValue::Null, |_| {
                        SqlStorageValue::Integer(now as i64)
                    }),
                    or_null(diff.as_deref()),
                ],
            )?;
        }
        self.select(
            "WHERE paused = ? AND decision IS NULL ORDER BY id",
            vec![SqlStorageValue::Integer(id)],
        )
    }

    /// Keeps an approval for an MCP client's command, which waits in its
    /// own request rather than in a paused exchange: it belongs to none (its
    /// `paused` is 0, which no exchange's id is), so no exchange is made
    /// ready by its decision and the alarm only expires it.
    pub fn ask(
        &self,
        command: &str,
        diff: Option<&str>,
        asked_by: Option<&str>,
        now: u64,
        expires_at: u64,
    ) -> Result<Approval, ApiError> {
        let or_null = |s: Option<&str>| s.map_or(SqlStorageValue::Null, |s| s.into());
        self.sql.exec(
            "INSERT INTO approvals (paused, command, diff, asked_by, asked_at, expires_at)
             VALUES (0, ?, ?, ?, ?, ?)",
            vec![
                command.into(),
                or_null(diff),
                or_null(asked_by),
                SqlStorageValue::Integer(now as i64),
                SqlStorageValue::Integer(expires_at as i64),
            ],
        )?;
        let id = self.last_id()? as u64;
        self.get(id)?.ok_or(ApiError::NoSuchApproval)
    }

    /// Waits for the decision on approval `id`, whoever makes it, from now
    /// on (see [`Waiting::wait`]); it hears [`Forgotten`] once the room's
    /// approvals are. The decision is then read with [`Self::get`].
    ///
    /// [`Forgotten`]: super::waiting::Heard::Forgotten
    pub fn wait(&self, id: u64) -> Waiter<'_> {
        self.waiting.wait(id)
    }

    /// Approval `id`, as it stands; `None` once forgotten with the room.
    pub fn get(&self, id: u64) -> worker::Result<Option<Approval>> {
        let found = self.select("WHERE id = ?", vec![SqlStorageValue::Integer(id as i64)])?;
        Ok(found.into_iter().next())
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
        let approval = self.get(id)?.ok_or(ApiError::NoSuchApproval)?;
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
        self.waiting.decided(id);
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
            self.waiting.decided(approval.id);
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
        let row = sql::first(self.sql.exec(
            "SELECT id, exchange FROM paused WHERE ready = 1 ORDER BY id LIMIT 1",
            None,
        )?)?;
        let Some([id, exchange]) = row.as_deref() else {
            return Ok(None);
        };
        let paused = text(exchange).unwrap_or_default();
        let id = id.clone();
        let decided = self.select("WHERE paused = ? ORDER BY id", vec![id.clone()])?;
        self.sql.exec("DELETE FROM paused WHERE id = ?", vec![id])?;
        // Decided approvals stay a while, so that a late decision learns
        // how it went (409) rather than that there was none (404).
        self.sql.exec(
            "DELETE FROM approvals WHERE decision IS NOT NULL AND id <= (SELECT MAX(id) FROM approvals) - ?",
            vec![SqlStorageValue::Integer(KEPT_DECIDED)],
        )?;
        Ok(Some(Ready { paused, decided }))
    }

    /// When something is next due: now if an exchange is ready, else the
    /// first expiry of a waiting approval.
    pub fn next_due(&self, now: u64) -> worker::Result<Option<u64>> {
        let due = sql::value(self.sql.exec(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM paused WHERE ready = 1) THEN ?
               ELSE (SELECT MIN(expires_at) FROM approvals WHERE decision IS NULL) END",
            vec![SqlStorageValue::Integer(now as i64)],
        )?)?;
        Ok(due.as_ref().and_then(number))
    }

    /// The room is forgotten: its policy, approvals and paused exchanges.
    pub fn forget(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM approvals", None)?;
        self.sql.exec("DELETE FROM paused", None)?;
        self.sql.exec("DELETE FROM policy", None)?;
        *self.policy.borrow_mut() = None;
        self.waiting.forgotten();
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
        let id = sql::value(self.sql.exec("SELECT last_insert_rowid()", None)?)?;
        Ok(id.as_ref().and_then(number).unwrap_or(0) as i64)
    }

    fn select(&self, filter: &str, values: Vec<SqlStorageValue>) -> worker::Result<Vec<Approval>> {
        let query = format!("SELECT {APPROVAL_COLUMNS} FROM approvals {filter}");
        let mut approvals = vec![];
        for row in self.sql.exec(&query, values)?.raw() {
            if let [id, command, asked_by, asked_at, expires_at, decision, decided_by, rule, decided_at, diff] =
                row?.as_slice()
            {
                approvals.push(Approval {
                    id: number(id).unwrap_or(0),
                    command: text(command).unwrap_or_default(),
                    diff: text(diff),
                    asked_by: text(asked_by),
                    asked_at: number(asked_at).unwrap_or(0),
                    expires_at: number(expires_at).unwrap_or(0),
                    decision: text(decision).and_then(|name| Decision::parse(&name)),
                    decided_by: text(decided_by),
                    rule: text(rule),
                    decided_at: number(decided_at),
                });
            }
        }
        Ok(approvals)
    }
}

fn rules(value: &SqlStorageValue) -> Vec<String> {
    let joined = text(value).unwrap_or_default();
    joined
        .split('\n')
        .filter(|rule| !rule.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validate::tests::details;

    #[test]
    fn decisions() {
        assert_eq!(
            decision_request(br#"{"decision": "approve"}"#).unwrap(),
            (true, None)
        );
        assert_eq!(
            decision_request(br#"{"decision": "deny", "userId": "bo"}"#).unwrap(),
            (false, Some("bo".into()))
        );
        for body in [r#"{}"#, r#"{"decision": "yes"}"#, r#"{"decision": true}"#] {
            assert!(details(decision_request(body.as_bytes()).unwrap_err())["decision"].is_array());
        }
    }
}
