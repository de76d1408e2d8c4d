//! A room's side of its tokens (`api::token`): which token a request
//! presents, what it grants in the object the request reaches, the room's
//! generation that each of its objects keeps and checks it against, and the
//! deployment's access mode as the front door and both objects read it.
//!
//! The generation is a fresh random id. The DuetAgent owns it: it makes one
//! at the room's first invite and a new one when the invites are revoked,
//! telling the Sandbox object each time before it keeps it itself (the
//! Sandbox object keeps a copy, so commands and the live feed need no hop,
//! and closes the sockets of every other generation's tokens). Both forget
//! it when the room is deleted or its history expires. A room with no
//! generation takes no room token, so the tokens of a forgotten room never
//! come back, and nothing of a room is kept once it is gone.

use std::cell::{Cell, RefCell};

use worker::{web_sys, Env, SqlStorage, SqlStorageValue};

use crate::api::access::{self, Mode};
use crate::api::token::{self, Claims, Known};
use crate::api::{auth, live, ApiError};
use crate::runtime::{config, sql};

/// The token `req` presents: its `Authorization: Bearer` token, else the one
/// its WebSocket subprotocols carry (browsers cannot set headers on a
/// WebSocket; see `api::live`). The front door checks this token and the
/// room's objects read the claims of this same one, so the two never differ
/// on which it is.
pub fn presented(req: &web_sys::Request) -> Result<Option<String>, ApiError> {
    let headers = req.headers();
    if let Some(bearer) = headers.get("authorization")?.and_then(auth::bearer) {
        return Ok(Some(bearer));
    }
    let protocols = headers.get("sec-websocket-protocol")?;
    Ok(protocols.and_then(|protocols| live::token_from_protocols(&protocols)))
}

/// What the token of a request to one of the room's objects grants: `None`
/// for an owner (the service token, or anyone in open mode), else the claims
/// of its room token. Read, not verified again: a request reaches an object
/// only through the front door, which let it through only with the service
/// token or with this room token verified (MAC, expiry, room and role), or
/// from the room's other object, whose calls carry no token. Its generation
/// is the object's to check ([`Generation::admit`]).
pub fn claims_of(req: &web_sys::Request, env: &Env) -> Result<Option<Claims>, ApiError> {
    if mode(env)? == Mode::Open {
        return Ok(None);
    }
    let Some(presented) = presented(req)? else {
        return Ok(None);
    };
    let service = config::get(env, "DUET_API_TOKEN").unwrap_or_default();
    if auth::same_token(&presented, &service) {
        return Ok(None);
    }
    if let Some(claims) = READ.with(|read| read.borrow().get(&presented)) {
        return Ok(Some(claims));
    }
    let claims = token::parse(&presented)
        .and_then(|parsed| Claims::from_payload(parsed.payload))
        .ok_or_else(|| {
            ApiError::Internal("a token the front door let through is no room token".into())
        })?;
    READ.with(|read| read.borrow_mut().insert(&presented, &claims));
    Ok(Some(claims))
}

thread_local! {
    /// The room tokens this isolate's objects have read.
    static READ: RefCell<Known> = RefCell::default();
    /// The access mode, once read.
    static MODE: Cell<Option<Mode>> = const { Cell::new(None) };
}

/// The deployment's access mode (`DUET_ACCESS`, `DUET_API_TOKEN`), read
/// once per isolate (settings do not change while one lives; see
/// `runtime::config`).
pub fn mode(env: &Env) -> Result<Mode, ApiError> {
    if let Some(mode) = MODE.get() {
        return Ok(mode);
    }
    let access = config::get(env, "DUET_ACCESS");
    let service = config::get(env, "DUET_API_TOKEN").is_some();
    let mode = access::mode(access.as_deref(), service).map_err(ApiError::AccessNotConfigured)?;
    MODE.set(Some(mode));
    Ok(mode)
}

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
