//! The one reader of a request's token, for the front door and the room's
//! objects alike: which token a request presents, who that makes its
//! sender, and the deployment's access mode.
//!
//! The front door verifies a room token (its MAC and expiry; the room and
//! role are `roles::admit`'s) before anything else sees it. An object reads
//! the claims of the same token without verifying again: a request reaches
//! it only through the front door, or from the room's other object, whose
//! calls carry no token. Both keep what they read in one cache per isolate,
//! where an entry says whether its MAC was checked, so the front door never
//! takes a token it did not verify.

use std::cell::{Cell, RefCell};

use worker::{web_sys, Env};

use super::presented;
use super::roles::{self, Mode};
use super::signing;
use super::token::{self, Claims, Known};
use crate::api::route::Action;
use crate::api::ApiError;
use crate::runtime::{clock, config};

/// Who sent a request, as far as its token says.
pub enum Credential {
    /// The service token, or anyone in open mode: an owner in every room.
    Owner,
    /// A room token, its MAC checked and not expired.
    Room(Claims),
}

impl Credential {
    /// Refuses `action` in `room` to a room token that does not allow it.
    pub fn admit(&self, room: &str, action: Action) -> Result<(), ApiError> {
        match self {
            Self::Owner => Ok(()),
            Self::Room(claims) => roles::admit(claims, room, action),
        }
    }
}

thread_local! {
    /// The room tokens this isolate has read.
    static KNOWN: RefCell<Known> = RefCell::default();
    /// The access mode, once read.
    static MODE: Cell<Option<Mode>> = const { Cell::new(None) };
}

/// At the front door: who sent a request to `/api/`. In token mode it
/// needs the service token or a room token; anything that is neither, a
/// room token whose MAC is wrong included, is a 401, and so is one that
/// has expired.
pub async fn verified(req: &web_sys::Request, env: &Env) -> Result<Credential, ApiError> {
    let presented = match presents(req, env)? {
        Presents::Owner => return Ok(Credential::Owner),
        Presents::Nothing => return Err(ApiError::Unauthorized),
        Presents::RoomToken(token) => token,
    };
    let claims = match KNOWN.with(|known| known.borrow().get(&presented)) {
        Some((claims, true)) => claims,
        _ => {
            let parsed = token::parse(&presented).ok_or(ApiError::Unauthorized)?;
            let mac = signing::mac(env, parsed.signed.as_bytes()).await?;
            if !presented::same_bytes(&mac, &parsed.mac) {
                return Err(ApiError::Unauthorized);
            }
            let claims = Claims::from_payload(parsed.payload).ok_or(ApiError::Unauthorized)?;
            KNOWN.with(|known| known.borrow_mut().insert(&presented, &claims, true));
            claims
        }
    };
    if claims.expired(clock::now_ms()) {
        return Err(ApiError::TokenExpired);
    }
    Ok(Credential::Room(claims))
}

/// In a room's object: what the token of a request grants, `None` for an
/// owner, else the claims of its room token, read and not verified again
/// (see above). Its generation is the object's to check
/// (`generation::Generation::admit`).
pub fn claims(req: &web_sys::Request, env: &Env) -> Result<Option<Claims>, ApiError> {
    let Presents::RoomToken(presented) = presents(req, env)? else {
        return Ok(None);
    };
    if let Some((claims, _)) = KNOWN.with(|known| known.borrow().get(&presented)) {
        return Ok(Some(claims));
    }
    let claims = token::parse(&presented)
        .and_then(|parsed| Claims::from_payload(parsed.payload))
        .ok_or_else(|| {
            ApiError::Internal("a token the front door let through is no room token".into())
        })?;
    KNOWN.with(|known| known.borrow_mut().insert(&presented, &claims, false));
    Ok(Some(claims))
}

/// What a request presents, as the access mode reads it.
enum Presents {
    /// Open mode, or the service token.
    Owner,
    /// No token, in token mode.
    Nothing,
    /// Another token: a room token, if anything.
    RoomToken(String),
}

fn presents(req: &web_sys::Request, env: &Env) -> Result<Presents, ApiError> {
    if mode(env)? == Mode::Open {
        return Ok(Presents::Owner);
    }
    let Some(presented) = presented(req)? else {
        return Ok(Presents::Nothing);
    };
    let service = config::get(env, "DUET_API_TOKEN").unwrap_or_default();
    Ok(match presented::same_token(&presented, &service) {
        true => Presents::Owner,
        false => Presents::RoomToken(presented),
    })
}

/// The token `req` presents: its `Authorization: Bearer` token, else the one
/// its WebSocket subprotocols carry (browsers cannot set headers on a
/// WebSocket; see `feed::event`).
fn presented(req: &web_sys::Request) -> Result<Option<String>, ApiError> {
    let headers = req.headers();
    if let Some(bearer) = headers.get("authorization")?.and_then(presented::bearer) {
        return Ok(Some(bearer));
    }
    let protocols = headers.get("sec-websocket-protocol")?;
    Ok(protocols.and_then(|protocols| presented::token_from_protocols(&protocols)))
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
    let mode = roles::mode(access.as_deref(), service).map_err(ApiError::AccessNotConfigured)?;
    MODE.set(Some(mode));
    Ok(mode)
}
