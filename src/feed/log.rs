//! The room's feed log: every event the feed publishes (messages, the
//! agent's answer as it comes, commands, their output and ends, approvals,
//! decisions, policy changes) under one room-wide number, kept in the
//! Sandbox object's storage so that it outlives an eviction or a restart.
//! A watcher that reconnects with the last number it saw is sent exactly
//! what it missed; one that joins late is given the terminal's recent past
//! from it.
//!
//! Numbers come from SQLite's `AUTOINCREMENT`, so they never repeat, not
//! even after the room is deleted and its log forgotten: a number from
//! before cannot be mistaken for one of the new log. Rows go from the
//! oldest end, and a job's oldest output beyond its own bound
//! ([`FeedLog::bound`]): a resume is complete only when every number after
//! its own is still there.
//!
//! The log is bounded by [`FEED_LOG_EVENTS`] events and [`FEED_LOG_BYTES`] bytes,
//! whichever comes first; the oldest go. An output event carries at most
//! 16 KiB (`OUTPUT_EVENT_BYTES`), so the bytes hold the terminal's recent
//! past ([`RECENT_TERMINAL_BYTES`]) sixteen times over, and the events
//! several long exchanges' deltas (one each 100 ms while the model writes).
//! A resume replays at most that much. A job's output is bounded on its
//! own too ([`FeedLog::bound`], `JOB_LOG_BYTES`), so the room's jobs
//! together hold at most about half the log.

use std::cell::Cell;

use worker::{SqlStorage, SqlStorageValue};

use super::event::{self, Frame, Written};
use crate::api::limits::{FEED_LOG_BYTES, FEED_LOG_EVENTS, RECENT_TERMINAL_BYTES};
use crate::runtime::sql;

/// How many events and bytes the log holds.
#[derive(Clone, Copy)]
struct Tally {
    events: u64,
    bytes: u64,
}

pub struct FeedLog {
    sql: SqlStorage,
    max_events: u64,
    /// Read once per object, then kept up to date.
    tally: Cell<Option<Tally>>,
    last: Cell<Option<u64>>,
}

/// What a reconnecting watcher is sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Resume {
    /// Exactly the frames it missed, oldest first.
    Missed(Vec<Frame>),
    /// What it missed is gone (trimmed), or its number is not of this log.
    Gap,
}

impl FeedLog {
    pub fn open(sql: SqlStorage, max_events: u64) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS feed_log (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                kind TEXT NOT NULL,
                event TEXT NOT NULL
            )",
            None,
        )?;
        Ok(Self {
            sql,
            max_events: max_events.clamp(1, FEED_LOG_EVENTS),
            tally: Cell::new(None),
            last: Cell::new(None),
        })
    }

    /// Appends an event as written, forgetting the oldest beyond the
    /// bounds; answers its frame, the event with its number.
    pub fn append(&self, event: &Written) -> worker::Result<Frame> {
        let Written { kind, json: event } = event;
        let mut tally = self.tally()?;
        let row = sql::value(self.sql.exec(
            "INSERT INTO feed_log (kind, event) VALUES (?, ?) RETURNING seq",
            vec![(*kind).into(), event.as_str().into()],
        )?)?;
        let seq = row.as_ref().and_then(sql::number).unwrap_or_default();
        self.last.set(Some(seq));
        tally.events += 1;
        tally.bytes += event.len() as u64;
        self.tally.set(Some(tally));
        if tally.events > self.max_events || tally.bytes > FEED_LOG_BYTES {
            self.trim(tally)?;
        }
        Ok(event::frame(event, seq))
    }

    /// The number of the newest event ever logged in this room; 0 before
    /// the first.
    pub fn last(&self) -> worker::Result<u64> {
        if let Some(last) = self.last.get() {
            return Ok(last);
        }
        let row = sql::value(self.sql.exec(
            "SELECT seq FROM sqlite_sequence WHERE name = 'feed_log'",
            None,
        )?)?;
        let last = row.as_ref().and_then(sql::number).unwrap_or_default();
        self.last.set(Some(last));
        Ok(last)
    }

    /// What a watcher that saw every event up to `since` has missed.
    pub fn since(&self, since: u64) -> worker::Result<Resume> {
        let last = self.last()?;
        if since > last {
            return Ok(Resume::Gap);
        }
        let frames = self.frames("seq > ?", vec![int(since)])?;
        Ok(match frames.len() as u64 == last - since {
            true => Resume::Missed(frames),
            false => Resume::Gap,
        })
    }

    /// What a watcher joining when `upto` was the newest event needs to
    /// show the room as the others do, oldest first: the terminal's recent
    /// past (whole events, newest first up to [`RECENT_TERMINAL_BYTES`],
    /// beginning at a command where it can), and the deltas of an answer
    /// still being written (those after the last message or failure).
    pub fn recent(&self, upto: u64) -> worker::Result<Vec<Frame>> {
        let rows = self.sql.exec(
            "SELECT seq, kind, event FROM feed_log
             WHERE seq <= ? AND (kind IN ('command', 'output', 'command_end', 'job', 'job_output', 'job_end')
                OR kind = 'delta' AND seq > (SELECT COALESCE(MAX(seq), 0) FROM feed_log
                    WHERE kind IN ('message', 'failed') AND seq <= ?))
             ORDER BY seq DESC",
            vec![int(upto), int(upto)],
        )?;
        // Newest first, with their kinds.
        let mut recent = vec![];
        let mut bytes = 0;
        for row in rows.raw() {
            let row = row?;
            let (Some(seq), Some(kind), Some(event)) = (
                row.first().and_then(sql::number),
                row.get(1).and_then(sql::text),
                row.get(2).and_then(sql::text),
            ) else {
                continue;
            };
            if kind != "delta" {
                // Once one does not fit, no older one goes in.
                bytes += event.len();
                if bytes > RECENT_TERMINAL_BYTES {
                    continue;
                }
            }
            recent.push((kind, event::frame(&event, seq)));
        }
        // A pane that starts mid-command starts at its next command instead,
        // unless that leaves nothing.
        if let Some(start) = recent.iter().rposition(|(kind, _)| kind == "command") {
            let mut at = 0;
            recent.retain(|(kind, _)| {
                at += 1;
                at <= start + 1 || kind == "delta"
            });
        }
        Ok(recent.into_iter().rev().map(|(_, frame)| frame).collect())
    }

    /// Forgets the oldest of the events that begin with `prefix` (one job's
    /// output) beyond the newest `bytes` bytes and `events` events of them.
    pub fn bound(&self, prefix: &str, bytes: u64, events: u64) -> worker::Result<()> {
        self.sql.exec(
            "DELETE FROM feed_log WHERE seq IN (SELECT seq FROM (SELECT seq,
                SUM(length(CAST(event AS BLOB))) OVER w AS b, COUNT(*) OVER w AS n
                FROM feed_log WHERE substr(event, 1, ?) = ? WINDOW w AS (ORDER BY seq DESC))
             WHERE b > ? OR n > ?)",
            vec![
                int(prefix.len() as u64),
                prefix.into(),
                int(bytes),
                int(events),
            ],
        )?;
        // Counted again when next needed.
        self.tally.set(None);
        Ok(())
    }

    /// The room is gone: so is its log (its numbers go on).
    pub fn forget(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM feed_log", None)?;
        self.tally.set(Some(Tally {
            events: 0,
            bytes: 0,
        }));
        Ok(())
    }

    /// The frames of the rows that match `filter`, oldest first, with
    /// their numbers.
    fn frames(&self, filter: &str, bindings: Vec<SqlStorageValue>) -> worker::Result<Vec<Frame>> {
        let rows = self.sql.exec(
            &format!("SELECT seq, event FROM feed_log WHERE {filter} ORDER BY seq"),
            bindings,
        )?;
        let mut frames = vec![];
        for row in rows.raw() {
            let row = row?;
            if let (Some(seq), Some(event)) = (
                row.first().and_then(sql::number),
                row.get(1).and_then(sql::text),
            ) {
                frames.push(event::frame(&event, seq));
            }
        }
        Ok(frames)
    }

    fn tally(&self) -> worker::Result<Tally> {
        if let Some(tally) = self.tally.get() {
            return Ok(tally);
        }
        let row = sql::first(self.sql.exec(
            "SELECT COUNT(*), COALESCE(SUM(length(CAST(event AS BLOB))), 0) FROM feed_log",
            None,
        )?)?
        .unwrap_or_default();
        let tally = Tally {
            events: row.first().and_then(sql::number).unwrap_or_default(),
            bytes: row.get(1).and_then(sql::number).unwrap_or_default(),
        };
        self.tally.set(Some(tally));
        Ok(tally)
    }

    /// Forgets the oldest events until the log is within its bounds.
    fn trim(&self, mut tally: Tally) -> worker::Result<()> {
        let rows = self.sql.exec(
            "SELECT seq, length(CAST(event AS BLOB)) FROM feed_log ORDER BY seq",
            None,
        )?;
        let mut through = None;
        for row in rows.raw() {
            if tally.events <= self.max_events && tally.bytes <= FEED_LOG_BYTES {
                break;
            }
            let row = row?;
            through = row.first().and_then(sql::number);
            tally.events -= 1;
            tally.bytes = tally
                .bytes
                .saturating_sub(row.get(1).and_then(sql::number).unwrap_or_default());
        }
        if let Some(through) = through {
            self.sql
                .exec("DELETE FROM feed_log WHERE seq <= ?", vec![int(through)])?;
        }
        self.tally.set(Some(tally));
        Ok(())
    }
}

fn int(n: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(n as i64)
}
