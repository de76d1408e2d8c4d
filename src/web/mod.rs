//! The web page: `/` to create or enter a room, `/rooms/{roomId}` to watch
//! and use it live. Plain HTML, CSS and a little JavaScript, embedded in the
//! Worker as they are written (no framework, no build step).

use worker::Response;

use crate::api::route::Page;

const HOME: &str = include_str!("home.html");
const ROOM: &str = include_str!("room.html");
const STYLE: &str = include_str!("duet.css");
const SCRIPT: &str = include_str!("duet.js");

/// The response for a part of the page.
pub fn serve(page: &Page) -> worker::Result<Response> {
    let (body, content_type) = match page {
        Page::Home => (HOME, "text/html; charset=utf-8"),
        // The room id comes from the URL, in the page's script.
        Page::Room(_) => (ROOM, "text/html; charset=utf-8"),
        Page::Style => (STYLE, "text/css; charset=utf-8"),
        Page::Script => (SCRIPT, "text/javascript; charset=utf-8"),
    };
    let mut response = Response::ok(body)?;
    let headers = response.headers_mut();
    headers.set("content-type", content_type)?;
    headers.set("cache-control", "no-cache")?;
    headers.set("x-content-type-options", "nosniff")?;
    // A room's URL names the room: no link or request from the page passes
    // it on.
    headers.set("referrer-policy", "no-referrer")?;
    // The page loads nothing from elsewhere and may be framed by nobody.
    headers.set(
        "content-security-policy",
        "default-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    )?;
    Ok(response)
}
