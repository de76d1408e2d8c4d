//! The room's generation of tokens, as each of its objects keeps it.
//!
//! The generation is a fresh random id. The DuetAgent owns it: it makes one
//! at the room's first invite and a new one when the invites are revoked,
//! telling the Sandbox object each time before it keeps it itself (the
//! Sandbox object keeps a copy, so commands and the live feed need no hop,
//! and closes the sockets of every other generation's tokens). Both forget
//! it when the room is deleted or its history expires. A room with no
//! generation takes no room token, so the tokens of a forgotten room never
//! come back, and nothing of a room is kept once it is gone.

use std::cell::RefCell;

use worker::{SqlStorage, SqlStorageValue};

use crate::access::token::Claims;
use crate::api::ApiError;
use crate::runtime::sql;

/// The room's generation in an object's SQLite storage, kept in memory too
/// (the object is its only writer).
pub struct Generation {
    sql: SqlStorage,
    /// As last read or written (`None`: not read yet).
    cache: RefCell<Option<Option<String>>>,
}

impl Generation {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS access (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                generation TEXT NOT NULL
            )",
            None,
        )?;
        Ok(Self {
            sql,
            cache: RefCell::default(),
        })
    }

    pub fn current(&self) -> worker::Result<Option<String>> {
        if let Some(current) = &*self.cache.borrow() {
            return Ok(current.clone());
        }
        let generation = sql::value(
            self.sql
                .exec("SELECT generation FROM access WHERE id = 1", None)?,
        )?;
        let current = generation.as_ref().and_then(sql::text);
        *self.cache.borrow_mut() = Some(current.clone());
        Ok(current)
    }

    /// Keeps `generation`, or forgets the room's (`None`).
    pub fn set(&self, generation: Option<&str>) -> worker::Result<()> {
        match generation {
            Some(generation) => self.sql.exec(
                "INSERT INTO access (id, generation) VALUES (1, ?)
                 ON CONFLICT (id) DO UPDATE SET generation = excluded.generation",
                vec![SqlStorageValue::from(generation)],
            )?,
            None => self.sql.exec("DELETE FROM access", None)?,
        };
        *self.cache.borrow_mut() = Some(generation.map(str::to_owned));
        Ok(())
    }

    /// Refuses a room token of another generation than the room's (401):
    /// revoked, or of a room since forgotten.
    pub fn admit(&self, claims: Option<&Claims>) -> Result<(), ApiError> {
        let Some(claims) = claims else {
            return Ok(());
        };
        match self.current()? {
            Some(current) if current == claims.generation => Ok(()),
            _ => Err(ApiError::TokenRevoked),
        }
    }
}
