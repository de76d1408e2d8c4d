//! The Worker's front door: it checks the token, routes, refuses a body
//! declared too large and hands the request itself, body unread, to the
//! room's Durable Object (DuetAgent, or Sandbox for exec), which reads the
//! body within the same bound. It knows nothing of storage, models or shells.

use worker::{Env, Request, Response, Stub};

use crate::api::route::{self, Action, Route};
use crate::api::{auth, live, ApiError};
use crate::runtime::log::{self, RequestLog};
use crate::runtime::{body, clock, config, respond};
use crate::web;

pub async fn handle(req: Request, env: Env) -> Response {
    let started = clock::now_ms();
    // The method as sent: `worker::Method` reads methods it does not know as GET.
    let method = req.inner().method();
    let path = req.path();
    let routed = route::parse(&method, &path);
    let (route_name, room) = match &routed {
        Ok(Route::Health) => ("health", None),
        Ok(Route::Page(_)) => ("page", None),
        Ok(Route::Room { room, action }) => (action.name(), Some(room.clone())),
        Err(_) => ("unknown", None),
    };
    let outcome = match check_token(&req, &env, &path).and(routed) {
        Ok(route) => dispatch(req, &env, route).await,
        Err(e) => Err(e),
    };
    let error = outcome.as_ref().err().map(ToString::to_string);
    let response = respond::result(outcome);
    log::emit(&RequestLog {
        method: &method,
        route: route_name,
        room: room.as_deref(),
        status: response.status_code(),
        duration_ms: clock::now_ms().saturating_sub(started),
        error: error.as_deref(),
    });
    response
}

/// With `DUET_API_TOKEN` set, `/api/` needs `Authorization: Bearer <token>`;
/// a WebSocket may offer the token as a subprotocol instead (browsers cannot
/// set headers on one; see `api::live`).
fn check_token(req: &Request, env: &Env, path: &str) -> Result<(), ApiError> {
    let Some(token) = config::get(env, "DUET_API_TOKEN").filter(|_| path.starts_with("/api/"))
    else {
        return Ok(());
    };
    let header = req.headers().get("authorization")?;
    let offered = req
        .headers()
        .get("sec-websocket-protocol")?
        .and_then(|protocols| live::token_from_protocols(&protocols));
    let by_protocol = offered.is_some_and(|offered| auth::same_token(&offered, &token));
    if by_protocol || auth::authorized(header.as_deref(), &token) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

async fn dispatch(req: Request, env: &Env, route: Route) -> Result<Response, ApiError> {
    let (room, action) = match route {
        Route::Health => return Ok(Response::ok("ok")?),
        Route::Page(page) => return Ok(web::serve(&page)?),
        Route::Room { room, action } => (room, action),
    };
    if action.has_body() {
        body::check_declared_length(&req)?;
    }
    if action == Action::Live {
        let upgrade = req.headers().get("upgrade")?;
        if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
            return Err(ApiError::NotAWebSocket);
        }
    }
    Ok(room_object(env, &room, action)?
        .fetch_with_request(req)
        .await?)
}

/// The object that serves `action` for `room`.
fn room_object(env: &Env, room: &str, action: Action) -> Result<Stub, ApiError> {
    Ok(match action {
        // The Sandbox object holds the live feed (see `sandbox::feed`).
        Action::Exec | Action::Live => crate::sandbox::sandbox_stub(env, room)?,
        _ => crate::agent::agent_stub(env, room)?,
    })
}
