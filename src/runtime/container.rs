//! The two methods of a Durable Object's `ctx.container` that workers-rs
//! 0.8.7 does not bind usably, bound here and typed.
//!
//! - `start(options)`: workers-rs passes its options as a wasm-bindgen class
//!   whose `entrypoint` is always there and whose `env` is a JavaScript
//!   `Map`. The runtime takes the empty `entrypoint` for one (workerd creates
//!   the container with `"Cmd": []`) and reads `env` as a plain record, of
//!   which a `Map` has no fields. Here the options are a plain object with
//!   only `enableInternet`, which the documentation requires whenever
//!   options are given.
//! - `setInactivityTimeout(durationMs)`: not bound at all.
//!
//! Everything else (`running`, `monitor`, `destroy`, `getTcpPort`) is used
//! through workers-rs's own `Container`.

use worker::js_sys::{self, Object, Reflect};
use worker::wasm_bindgen::prelude::*;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Container;

#[wasm_bindgen]
extern "C" {
    type ContainerApi;

    #[wasm_bindgen(method, catch)]
    fn start(this: &ContainerApi, options: &Object) -> Result<(), JsValue>;

    #[wasm_bindgen(method, catch, js_name = setInactivityTimeout)]
    fn set_inactivity_timeout(
        this: &ContainerApi,
        duration_ms: f64,
    ) -> Result<js_sys::Promise, JsValue>;
}

fn api(container: &Container) -> &ContainerApi {
    let value: &JsValue = container.as_ref();
    value.unchecked_ref()
}

/// Starts the container (it must not be running), with or without outbound
/// internet access; does not wait for it.
pub fn start(container: &Container, enable_internet: bool) -> worker::Result<()> {
    let options = Object::new();
    Reflect::set(&options, &"enableInternet".into(), &enable_internet.into())?;
    api(container).start(&options)?;
    Ok(())
}

/// Asks the runtime to keep the container for `duration_ms` even when its
/// object is gone, and to stop it afterwards (see the README on what the
/// pinned runtime does with it).
pub async fn set_inactivity_timeout(container: &Container, duration_ms: u64) -> worker::Result<()> {
    let promise = api(container).set_inactivity_timeout(duration_ms as f64)?;
    JsFuture::from(promise).await?;
    Ok(())
}
