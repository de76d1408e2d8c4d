//! A room's chat history in the object's SQLite storage, and when the room
//! was last used (for its expiry).
//!
//! Every change is one synchronous statement batch with no `await` inside, so
//! none is lost: there is no read-modify-write across an `await`. Concurrent
//! exchanges run side by side (each reads the history as it was when it
//! began), but each stores its user and agent message together, so the
//! stored pairs never interleave.
//!
//! The object is the only writer of its storage, so it keeps the recent
//! history in memory too, loaded once and changed in the same synchronous
//! step as the table: a warm message reads no rows.

use std::cell::{Cell, RefCell};

use worker::{SqlStorage, SqlStorageValue};

use crate::api::limits::HISTORY_LIMIT;
use crate::api::shapes::{Message, Role};
use crate::runtime::sql::{self, number, text};

pub struct Store {
    sql: SqlStorage,
    /// Whether the room's live feed has watchers, once read.
    watching: Cell<Option<bool>>,
    /// The last [`HISTORY_LIMIT`] messages, once read.
    recent: RefCell<Option<Vec<Message>>>,
}

impl Store {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                role TEXT NOT NULL,
                user_id TEXT,
                text TEXT NOT NULL,
                ts INTEGER NOT NULL
            )",
            None,
        )?;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS room (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                name TEXT NOT NULL,
                last_used INTEGER NOT NULL
            )",
            None,
        )?;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS feed (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                watching INTEGER NOT NULL
            )",
            None,
        )?;
        Ok(Self {
            sql,
            watching: Cell::new(None),
            recent: RefCell::default(),
        })
    }

    /// Whether the room's live feed has watchers (as the feed last said).
    pub fn watching(&self) -> worker::Result<bool> {
        if let Some(on) = self.watching.get() {
            return Ok(on);
        }
        let watching = sql::value(
            self.sql
                .exec("SELECT watching FROM feed WHERE id = 1", None)?,
        )?;
        let on = watching.as_ref().and_then(number).is_some_and(|n| n != 0);
        self.watching.set(Some(on));
        Ok(on)
    }

    pub fn set_watching(&self, on: bool) -> worker::Result<()> {
        self.sql.exec(
            "INSERT INTO feed (id, watching) VALUES (1, ?)
             ON CONFLICT (id) DO UPDATE SET watching = excluded.watching",
            vec![SqlStorageValue::Integer(i64::from(on))],
        )?;
        self.watching.set(Some(on));
        Ok(())
    }

    /// Records a use of `room` at `now`.
    pub fn touch(&self, room: &str, now: u64) -> worker::Result<()> {
        self.sql.exec(
            "INSERT INTO room (id, name, last_used) VALUES (1, ?, ?)
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, last_used = excluded.last_used",
            vec![room.into(), SqlStorageValue::Integer(now as i64)],
        )?;
        Ok(())
    }

    /// The room and when it was last used, if it ever was.
    pub fn last_use(&self) -> worker::Result<Option<(String, u64)>> {
        let row = sql::first(
            self.sql
                .exec("SELECT name, last_used FROM room WHERE id = 1", None)?,
        )?;
        Ok(match row.as_deref() {
            Some([name, last_used]) => text(name).zip(number(last_used)),
            _ => None,
        })
    }

    /// The last [`HISTORY_LIMIT`] messages, oldest first.
    pub fn recent(&self) -> worker::Result<Vec<Message>> {
        if let Some(recent) = &*self.recent.borrow() {
            return Ok(recent.clone());
        }
        let mut recent = Vec::with_capacity(HISTORY_LIMIT);
        let rows = self.sql.exec(
            "SELECT role, user_id, text, ts FROM
               (SELECT * FROM messages ORDER BY id DESC LIMIT ?)
             ORDER BY id",
            vec![(HISTORY_LIMIT as i64).into()],
        )?;
        for row in rows.raw() {
            if let [role, user_id, message, ts] = row?.as_slice() {
                let role = match text(role).as_deref() {
                    Some("user") => Role::User,
                    Some("agent") => Role::Agent,
                    _ => continue,
                };
                recent.push(Message {
                    role,
                    user_id: text(user_id),
                    text: text(message).unwrap_or_default(),
                    ts: number(ts).unwrap_or(0) as i64,
                });
            }
        }
        *self.recent.borrow_mut() = Some(recent.clone());
        Ok(recent)
    }

    /// Stores messages in order, then forgets all but the last [`HISTORY_LIMIT`].
    pub fn append(&self, messages: &[Message]) -> worker::Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let rows = vec!["(?, ?, ?, ?)"; messages.len()].join(", ");
        let values = messages.iter().flat_map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Agent => "agent",
            };
            [
                role.into(),
                m.user_id.clone().into(),
                m.text.as_str().into(),
                SqlStorageValue::Integer(m.ts),
            ]
        });
        self.sql.exec(
            &format!("INSERT INTO messages (role, user_id, text, ts) VALUES {rows}"),
            values.collect::<Vec<_>>(),
        )?;
        self.sql.exec(
            "DELETE FROM messages WHERE id <= (SELECT id FROM messages ORDER BY id DESC LIMIT 1 OFFSET ?)",
            vec![(HISTORY_LIMIT as i64).into()],
        )?;
        if let Some(recent) = &mut *self.recent.borrow_mut() {
            recent.extend_from_slice(messages);
            let over = recent.len().saturating_sub(HISTORY_LIMIT);
            recent.drain(..over);
        }
        Ok(())
    }

    /// Forgets the history and the room's last use.
    pub fn clear(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM messages", None)?;
        self.sql.exec("DELETE FROM room", None)?;
        *self.recent.borrow_mut() = Some(vec![]);
        Ok(())
    }
}
