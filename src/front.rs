//! The Worker's front door: it checks the token (the service token, or a
//! room token's signature, expiry, room and role: `access`), routes,
//! refuses what another site's page could have sent (see `api::cross_site`)
//! and a body declared too large, and hands the request itself, body unread,
//! to the room's Durable Object (DuetAgent, or Sandbox for exec), which reads
//! the body within the same bound, and the same token's claims, and checks
//! the room token's generation. It
//! knows nothing of storage, models or shells. It works on the runtime's own
//! request and response (see the crate docs).

use std::cell::Cell;

use serde::Serialize;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::{web_sys, DurableObject};
use worker::Env;

use crate::access::request::{self, Credential};
use crate::access::roles::Mode;
use crate::api::route::{self, Action, Route};
use crate::api::{cross_site, ApiError};
use crate::runtime::log::{self, RequestLog};
use crate::runtime::{body, clock, config, respond};
use crate::{room, web};

pub async fn handle(req: web_sys::Request, env: Env) -> web_sys::Response {
    let started = clock::now_ms();
    // The method as sent: `worker::Method` reads methods it does not know as GET.
    let method = req.method();
    let url = req.url();
    let path = route::path_of(&url);
    let routed = route::parse(&method, path);
    let (route_name, room) = match &routed {
        Ok(Route::Health) => ("health", None),
        Ok(Route::Page(_)) => ("page", None),
        Ok(Route::Room { room, action }) => (action.name(), Some(room.clone())),
        Err(_) => ("unknown", None),
    };
    let hosts = config::get(&env, "DUET_HOSTS");
    let hosts = cross_site::Hosts::new(hosts.as_deref());
    let outcome = match admit_host(&hosts, &url, path) {
        Err(e) => Err(e),
        Ok(()) => match credential(&req, &env, path).await {
            Ok(credential) => match routed {
                Ok(route) => dispatch(req, &env, &url, &hosts, route, &credential).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        },
    };
    let error = outcome.as_ref().err().map(ToString::to_string);
    let response = outcome.unwrap_or_else(|e| respond::error(&e).into());
    log::emit(&RequestLog {
        method: &method,
        route: route_name,
        room: room.as_deref(),
        status: response.status(),
        duration_ms: clock::now_ms().saturating_sub(started),
        error: error.as_deref(),
    });
    response
}

/// Refuses an `/api/` request to a host that is not the worker's own (see
/// `api::cross_site`), before its token is looked at.
fn admit_host(hosts: &cross_site::Hosts, url: &str, path: &str) -> Result<(), ApiError> {
    match path.starts_with("/api/") {
        true => hosts.admit(url),
        false => Ok(()),
    }
}

/// Who sent a request: a request to `/api/` shows it by its token
/// (`access::request`), as `Authorization: Bearer <token>` or, on a
/// WebSocket, as a subprotocol (browsers cannot set headers on one). Other
/// paths (health, the page) need none.
async fn credential(req: &web_sys::Request, env: &Env, path: &str) -> Result<Credential, ApiError> {
    let mode = request::mode(env);
    if let Ok(Mode::Open) = mode {
        warn_open();
    }
    match path.starts_with("/api/") {
        true => request::verified(req, env).await,
        false => Ok(Credential::Owner),
    }
}

thread_local! {
    /// This isolate has warned that the worker is open.
    static WARNED_OPEN: Cell<bool> = const { Cell::new(false) };
}

/// Warns, once per isolate, that anyone may use every room.
fn warn_open() {
    #[derive(Serialize)]
    struct Warning {
        level: &'static str,
        event: &'static str,
        message: &'static str,
    }
    if !WARNED_OPEN.replace(true) {
        log::emit(&Warning {
            level: "warn",
            event: "open-access",
            message: "DUET_ACCESS is \"open\" and no DUET_API_TOKEN is set: anyone who can \
                      reach this worker can read every room, run commands in its sandbox \
                      (which reaches the internet) and delete it",
        });
    }
}

async fn dispatch(
    req: web_sys::Request,
    env: &Env,
    url: &str,
    hosts: &cross_site::Hosts<'_>,
    route: Route,
    credential: &Credential,
) -> Result<web_sys::Response, ApiError> {
    let (room, action) = match route {
        Route::Health => return Ok(web_sys::Response::new_with_opt_str(Some("ok"))?),
        Route::Page(page) => return web::serve(&page, env).await,
        Route::Room { room, action } => (room, action),
    };
    match credential.admit(&room, action) {
        // The Sandbox object refuses it, as the room's audit records every
        // command refused.
        Err(ApiError::Forbidden { .. }) if action == Action::Exec => {}
        admitted => admitted?,
    }
    let origin = header_of(&req, "origin")?;
    let content_type = header_of(&req, "content-type")?;
    hosts.check(action, url, origin.as_deref(), content_type.as_deref())?;
    if let Some(limit) = action.body_limit() {
        body::check_declared_length(&req, limit)?;
    }
    let stub = room::calls::serving(env, &room, action)?.into_rpc::<DurableObject>();
    let answer = JsFuture::from(stub.fetch_with_request(&req)?).await?;
    Ok(answer.unchecked_into())
}

fn header_of(req: &web_sys::Request, name: &str) -> Result<Option<String>, ApiError> {
    Ok(req.headers().get(name)?)
}
