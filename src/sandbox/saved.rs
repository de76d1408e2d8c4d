//! What the Sandbox object keeps in its own SQLite storage: the room it
//! serves (an alarm comes with no request to name it), when the room last
//! ran a command, whether its sandbox sleeps, and a sleeping room's
//! workspace as a compressed archive in chunks of [`CHUNK_BYTES`] (a SQLite
//! row holds at most 2 MB), with what sandboxd said it holds (entries and
//! unpacked bytes, from which its restore's time follows, and what it could
//! not keep). An archive that could not be restored is moved
//! aside, kept for the room's people to fetch, so that the room can wake
//! with an empty workspace without losing the files.
//!
//! The archive lives with the object that needs it, costs no other binding,
//! and goes when the object's storage is deleted. Each statement is
//! synchronous, so no other request of the object interleaves with one.
//!
//! The room's state is also kept in memory (the object is its only writer),
//! and a busy room's last use is written only now and then (when the room's
//! clock says so, `room::clock`): after a restart the clocks may run from up
//! to one step earlier.

use std::cell::RefCell;

use worker::{js_sys, web_sys, SqlStorage, SqlStorageValue};

use crate::runtime::sql::{self, number, text};

/// Bytes per stored chunk of an archive.
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// What sandboxd says an archive holds, as it packed it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Packed {
    /// Entries and unpacked bytes, from which a restore's time follows
    /// (`duet_wire::restore_ms`); `None` when sandboxd did not say.
    pub entries: Option<u64>,
    pub unpacked: Option<u64>,
    /// What it could not keep (sockets, devices), to tell the room.
    pub left_out: Option<String>,
}

/// The room's clock and sleep state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomState {
    pub room: String,
    pub last_used: u64,
    pub asleep: bool,
}

/// The two archives a room may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive {
    /// The workspace of a sleeping room, restored when it wakes.
    Saved,
    /// One whose restore failed: no longer restored, kept to be fetched.
    Kept,
}

impl Archive {
    fn name(self) -> &'static str {
        match self {
            Self::Saved => "archive",
            Self::Kept => "kept_archive",
        }
    }
}

pub struct Saved {
    sql: SqlStorage,
    /// The room's state as last read or written (`None`: not read yet).
    cache: RefCell<Option<Option<RoomState>>>,
}

impl Saved {
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(
            "CREATE TABLE IF NOT EXISTS room (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                name TEXT NOT NULL,
                last_used INTEGER NOT NULL,
                asleep INTEGER NOT NULL
            )",
            None,
        )?;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS packed (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                entries INTEGER,
                unpacked INTEGER,
                left_out TEXT
            )",
            None,
        )?;
        for table in [Archive::Saved, Archive::Kept] {
            sql.exec(
                &format!(
                    "CREATE TABLE IF NOT EXISTS {} (seq INTEGER PRIMARY KEY, bytes BLOB NOT NULL)",
                    table.name()
                ),
                None,
            )?;
        }
        Ok(Self {
            sql,
            cache: RefCell::default(),
        })
    }

    pub fn state(&self) -> worker::Result<Option<RoomState>> {
        if let Some(cached) = &*self.cache.borrow() {
            return Ok(cached.clone());
        }
        let state = self.stored_state()?;
        *self.cache.borrow_mut() = Some(state.clone());
        Ok(state)
    }

    fn stored_state(&self) -> worker::Result<Option<RoomState>> {
        let row = sql::first(self.sql.exec(
            "SELECT name, last_used, asleep FROM room WHERE id = 1",
            None,
        )?)?;
        let Some([name, last_used, asleep]) = row.as_deref() else {
            return Ok(None);
        };
        Ok(text(name).map(|room| RoomState {
            room,
            last_used: number(last_used).unwrap_or(0),
            asleep: number(asleep).is_some_and(|n| n != 0),
        }))
    }

    /// Records a use of `room` at `now`, keeping the sleep state; stored
    /// when the room is new here or `due` (see `room::clock`).
    pub fn touch(&self, room: &str, now: u64, due: bool) -> worker::Result<()> {
        let state = self.state()?;
        let known = state.as_ref().is_some_and(|s| s.room == room);
        if due || !known {
            self.sql.exec(
                "INSERT INTO room (id, name, last_used, asleep) VALUES (1, ?, ?, 0)
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, last_used = excluded.last_used",
                vec![room.into(), SqlStorageValue::Integer(now as i64)],
            )?;
        }
        *self.cache.borrow_mut() = Some(Some(RoomState {
            room: room.to_owned(),
            last_used: now,
            asleep: state.is_some_and(|s| s.asleep),
        }));
        Ok(())
    }

    pub fn set_asleep(&self, asleep: bool) -> worker::Result<()> {
        self.sql.exec(
            "UPDATE room SET asleep = ? WHERE id = 1",
            vec![SqlStorageValue::Integer(i64::from(asleep))],
        )?;
        if let Some(Some(state)) = &mut *self.cache.borrow_mut() {
            state.asleep = asleep;
        }
        Ok(())
    }

    /// Appends the next chunk of the archive being saved.
    pub fn append_chunk(&self, chunk: Vec<u8>) -> worker::Result<()> {
        self.sql.exec(
            "INSERT INTO archive (seq, bytes) VALUES ((SELECT COUNT(*) FROM archive), ?)",
            vec![SqlStorageValue::Blob(chunk)],
        )?;
        Ok(())
    }

    /// Records what the saved archive holds.
    pub fn set_packed(&self, packed: &Packed) -> worker::Result<()> {
        let number = |n: Option<u64>| n.map_or(SqlStorageValue::Null, |n| (n as i64).into());
        let left_out = packed
            .left_out
            .as_deref()
            .map_or(SqlStorageValue::Null, Into::into);
        self.sql.exec(
            "INSERT OR REPLACE INTO packed (id, entries, unpacked, left_out) VALUES (1, ?, ?, ?)",
            vec![number(packed.entries), number(packed.unpacked), left_out],
        )?;
        Ok(())
    }

    /// What the saved archive holds, as far as sandboxd said.
    pub fn packed(&self) -> worker::Result<Packed> {
        let row = sql::first(self.sql.exec(
            "SELECT entries, unpacked, left_out FROM packed WHERE id = 1",
            None,
        )?)?;
        Ok(match row.as_deref() {
            Some([entries, unpacked, left_out]) => Packed {
                entries: number(entries),
                unpacked: number(unpacked),
                left_out: text(left_out),
            },
            _ => Packed::default(),
        })
    }

    /// An archive's chunks, in order.
    fn chunks(
        &self,
        archive: Archive,
    ) -> worker::Result<impl Iterator<Item = worker::Result<Vec<u8>>>> {
        let cursor = self.sql.exec(
            &format!("SELECT bytes FROM {} ORDER BY seq", archive.name()),
            None,
        )?;
        Ok(cursor.raw().map(|row| match row?.into_iter().next() {
            Some(SqlStorageValue::Blob(bytes)) => Ok(bytes),
            _ => Err(worker::Error::RustError(
                "an archive chunk is not a blob".into(),
            )),
        }))
    }

    /// An archive as one `Blob`, which JavaScript holds rather than this
    /// object's memory; `None` when there is none.
    pub fn blob(&self, archive: Archive) -> worker::Result<Option<web_sys::Blob>> {
        let parts = js_sys::Array::new();
        for chunk in self.chunks(archive)? {
            parts.push(&js_sys::Uint8Array::from(chunk?.as_slice()));
        }
        if parts.length() == 0 {
            return Ok(None);
        }
        Ok(Some(web_sys::Blob::new_with_u8_array_sequence(&parts)?))
    }

    /// Bytes of an archive stored (0 when there is none).
    pub fn archive_bytes(&self, archive: Archive) -> worker::Result<u64> {
        let bytes = sql::value(self.sql.exec(
            &format!("SELECT SUM(LENGTH(bytes)) FROM {}", archive.name()),
            None,
        )?)?;
        Ok(bytes.as_ref().and_then(number).unwrap_or(0))
    }

    pub fn clear_archive(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM archive", None)?;
        self.sql.exec("DELETE FROM packed", None)?;
        Ok(())
    }

    /// Moves the saved archive aside as the kept one, replacing any kept
    /// before.
    pub fn keep_archive(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM kept_archive", None)?;
        self.sql.exec(
            "INSERT INTO kept_archive (seq, bytes) SELECT seq, bytes FROM archive",
            None,
        )?;
        self.clear_archive()
    }

    /// Forgets everything: the room, its clock and its archives.
    pub fn forget(&self) -> worker::Result<()> {
        self.clear_archive()?;
        self.sql.exec("DELETE FROM kept_archive", None)?;
        self.sql.exec("DELETE FROM room", None)?;
        *self.cache.borrow_mut() = Some(None);
        Ok(())
    }
}
