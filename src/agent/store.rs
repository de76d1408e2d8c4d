//! A room's chat history in the object's SQLite storage.
//!
//! Every change is one synchronous statement batch with no `await` inside, so
//! concurrent messages to a room interleave only between whole exchanges and
//! none is lost: there is no read-modify-write across an `await`.

use worker::{SqlStorage, SqlStorageValue};

use crate::api::limits::HISTORY_LIMIT;
use crate::api::wire::{Message, Role};

pub struct Store {
    sql: SqlStorage,
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
        Ok(Self { sql })
    }

    /// The last [`HISTORY_LIMIT`] messages, oldest first.
    pub fn recent(&self) -> worker::Result<Vec<Message>> {
        self.sql
            .exec(
                "SELECT role, user_id AS userId, text, ts FROM
                   (SELECT * FROM messages ORDER BY id DESC LIMIT ?)
                 ORDER BY id",
                vec![(HISTORY_LIMIT as i64).into()],
            )?
            .to_array()
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
        Ok(())
    }

    pub fn clear(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM messages", None)?;
        Ok(())
    }
}
