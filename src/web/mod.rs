//! The web page: `/` to create or enter a room, `/rooms/{roomId}` to watch
//! and use it live. Plain HTML, CSS and a little JavaScript (no framework,
//! no build step), in `page/`, which wrangler.toml hands to the platform's
//! asset store: their bytes are not in the Worker's upload, so the page can
//! grow without slowing the Worker's start. The Worker still routes every
//! request and sets every header; it reads a file through the `ASSETS`
//! binding and passes its body on.

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Env};

use crate::api::route::Page;
use crate::runtime::bindings;

/// The response for a part of the page.
pub async fn serve(page: &Page, env: &Env) -> worker::Result<web_sys::Response> {
    let (file, content_type) = match page {
        Page::Home => ("home.html", "text/html; charset=utf-8"),
        // The room id comes from the URL, in the page's script.
        Page::Room(_) => ("room.html", "text/html; charset=utf-8"),
        Page::Style => ("duet.css", "text/css; charset=utf-8"),
        Page::Script => ("duet.js", "text/javascript; charset=utf-8"),
    };
    // The asset store answers by path; the host is not looked at.
    let url = format!("https://assets.invalid/{file}");
    let found = bindings::fetcher(env, "ASSETS")?.fetch_with_str(&url)?;
    let found: web_sys::Response = JsFuture::from(found).await?.unchecked_into();
    if found.status() != 200 {
        return Err(worker::Error::RustError(format!(
            "the page's {file} is missing from the assets ({})",
            found.status()
        )));
    }
    let headers = web_sys::Headers::new()?;
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
    let init = web_sys::ResponseInit::new();
    init.set_headers(&headers);
    Ok(web_sys::Response::new_with_opt_readable_stream_and_init(
        found.body().as_ref(),
        &init,
    )?)
}
