//! The Worker's front door: it checks the token, routes, refuses a body
//! declared too large and hands the request itself, body unread, to the
//! room's Durable Object (DuetAgent, or Sandbox for exec), which reads the
//! body within the same bound. It knows nothing of storage, models or shells.

use worker::{Env, Request, Response, Stub};

use crate::api::route::{self, Action, Route};
use crate::api::{auth, ApiError};
use crate::runtime::log::{self, RequestLog};
use crate::runtime::{body, clock, config, respond};

pub async fn handle(req: Request, env: Env) -> Response {
    let started = clock::now_ms();
    // The method as sent: `worker::Method` reads methods it does not know as GET.
    let method = req.inner().method();
    let path = req.path();
    let routed = route::parse(&method, &path);
    let (route_name, room) = match &routed {
        Ok(Route::Health) => ("health", None),
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

/// With `DUET_API_TOKEN` set, `/api/` needs `Authorization: Bearer <token>`.
fn check_token(req: &Request, env: &Env, path: &str) -> Result<(), ApiError> {
    let Some(token) = config::get(env, "DUET_API_TOKEN").filter(|_| path.starts_with("/api/"))
    else {
        return Ok(());
    };
    let header = req.headers().get("authorization")?;
    if auth::authorized(header.as_deref(), &token) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

async fn dispatch(req: Request, env: &Env, route: Route) -> Result<Response, ApiError> {
    let Route::Room { room, action } = route else {
        return Ok(Response::ok("ok")?);
    };
    if action.has_body() {
        body::check_declared_length(&req)?;
    }
    Ok(room_object(env, &room, action)?
        .fetch_with_request(req)
        .await?)
}

/// The object that serves `action` for `room`.
fn room_object(env: &Env, room: &str, action: Action) -> Result<Stub, ApiError> {
    Ok(match action {
        Action::Exec => crate::sandbox::sandbox_stub(env, room)?,
        _ => env.durable_object("DUET_AGENT")?.get_by_name(room)?,
    })
}
