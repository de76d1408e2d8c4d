//! The Worker's front door: it checks the token, routes, refuses what
//! another site's page could have sent (see `api::cross_site`) and a body
//! declared too large, and hands the request itself, body unread, to the
//! room's Durable Object (DuetAgent, or Sandbox for exec), which reads the
//! body within the same bound. It knows nothing of storage, models or shells.
//! It works on the runtime's own request and response (see the crate docs).

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::{web_sys, DurableObject};
use worker::Env;

use crate::api::route::{self, Action, Route};
use crate::api::{auth, cross_site, live, ApiError};
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
    let outcome = match check_token(&req, &env, path).and(routed) {
        Ok(route) => dispatch(req, &env, &url, route).await,
        Err(e) => Err(e),
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

/// With `DUET_API_TOKEN` set, `/api/` needs `Authorization: Bearer <token>`;
/// a WebSocket may offer the token as a subprotocol instead (browsers cannot
/// set headers on one; see `api::live`).
fn check_token(req: &web_sys::Request, env: &Env, path: &str) -> Result<(), ApiError> {
    let Some(token) = config::get(env, "DUET_API_TOKEN").filter(|_| path.starts_with("/api/"))
    else {
        return Ok(());
    };
    let header = header_of(req, "authorization")?;
    let offered = header_of(req, "sec-websocket-protocol")?
        .and_then(|protocols| live::token_from_protocols(&protocols));
    let by_protocol = offered.is_some_and(|offered| auth::same_token(&offered, &token));
    if by_protocol || auth::authorized(header.as_deref(), &token) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

async fn dispatch(
    req: web_sys::Request,
    env: &Env,
    url: &str,
    route: Route,
) -> Result<web_sys::Response, ApiError> {
    let (room, action) = match route {
        Route::Health => return Ok(web_sys::Response::new_with_opt_str(Some("ok"))?),
        Route::Page(page) => return Ok(web::serve(&page)?.into()),
        Route::Room { room, action } => (room, action),
    };
    let origin = header_of(&req, "origin")?;
    let content_type = header_of(&req, "content-type")?;
    cross_site::check(action, url, origin.as_deref(), content_type.as_deref())?;
    if action.has_body() {
        body::check_declared_length(&req)?;
    }
    if action == Action::Live {
        let upgrade = header_of(&req, "upgrade")?;
        let protocols = header_of(&req, "sec-websocket-protocol")?;
        live::check_upgrade(upgrade.as_deref(), protocols.as_deref())?;
    }
    let stub = room::calls::serving(env, &room, action)?.into_rpc::<DurableObject>();
    let answer = JsFuture::from(stub.fetch_with_request(&req)?).await?;
    Ok(answer.unchecked_into())
}

fn header_of(req: &web_sys::Request, name: &str) -> Result<Option<String>, ApiError> {
    Ok(req.headers().get(name)?)
}
