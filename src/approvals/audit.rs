//! The room's audit: every command run or refused in the room, whoever
//! asked (a user's exec, the agent), with who let it through and how it
//! ended. The Sandbox object keeps it, as every command that runs passes
//! through it; the DuetAgent sends those it refused (`room::calls`). Every
//! entry is made by [`entry`].
//!
//! Each entry is stored as the JSON `GET …/audit` shows, so reading the
//! audit parses nothing. Only the newest [`AUDIT_ENTRIES`] are kept, so
//! the audit is bounded in rows, and in bytes by the bounds of its fields
//! (the command cut to `AUDIT_CMD_CHARS`, names and rules to theirs).
//! Nothing of it goes to the worker's logs.

use worker::{SqlStorage, SqlStorageValue};

use crate::api::limits::{AUDIT_CMD_CHARS, AUDIT_ENTRIES};
use crate::api::shapes::{AuditEntry, AuditOutcome, Source};
use crate::text::first_chars;

/// Who or what let a command run: the writer who approved it, or the allow
/// rule that spared the question (neither, where the room's policy runs
/// every command). The one consent type, from the policy's verdict or an
/// approval's decision (`consent::Said`) to the audit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consent {
    pub decided_by: Option<String>,
    pub rule: Option<String>,
}

/// The audit's entry for `command` of `source`, asked for by `asked_by`,
/// as of `at`: how it ended is the caller's to add where it ran.
pub fn entry(
    at: u64,
    command: &str,
    source: Source,
    asked_by: Option<String>,
    outcome: AuditOutcome,
    consent: Consent,
) -> AuditEntry {
    AuditEntry {
        at,
        command: first_chars(command, AUDIT_CMD_CHARS).to_owned(),
        source,
        asked_by,
        outcome,
        decided_by: consent.decided_by,
        rule: consent.rule,
        exit_code: None,
        duration_ms: None,
        timed_out: false,
        tool: source.tool(),
    }
}

pub struct Audit {
    sql: SqlStorage,
}

impl Audit {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS audit (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                entry TEXT NOT NULL
            )",
            None,
        )?;
        Ok(Self { sql })
    }

    /// Adds an entry, forgetting the oldest beyond the bound.
    pub fn record(&self, entry: &AuditEntry) -> worker::Result<()> {
        self.record_json(serde_json::to_string(entry).expect("an audit entry serializes"))
    }

    /// Adds an entry as the DuetAgent sent it (an [`AuditEntry`]'s JSON).
    pub fn record_json(&self, json: String) -> worker::Result<()> {
        self.sql.exec(
            "INSERT INTO audit (entry) VALUES (?)",
            vec![SqlStorageValue::String(json)],
        )?;
        self.sql.exec(
            "DELETE FROM audit WHERE id <= last_insert_rowid() - ?",
            vec![SqlStorageValue::Integer(AUDIT_ENTRIES as i64)],
        )?;
        Ok(())
    }

    /// `{"entries": [...]}`, newest first.
    pub fn to_json(&self) -> worker::Result<String> {
        let mut entries = vec![];
        let rows = self.sql.exec(
            "SELECT entry FROM audit ORDER BY id DESC LIMIT ?",
            vec![SqlStorageValue::Integer(AUDIT_ENTRIES as i64)],
        )?;
        for row in rows.raw() {
            if let Some(SqlStorageValue::String(entry)) = row?.into_iter().next() {
                entries.push(entry);
            }
        }
        Ok(format!("{{\"entries\":[{}]}}", entries.join(",")))
    }

    /// The room is gone: so is its audit.
    pub fn forget(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM audit", None)?;
        Ok(())
    }
}
