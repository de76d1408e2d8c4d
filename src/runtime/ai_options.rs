//! `env.AI.run`'s third argument, which workers-rs's binding does not take:
//! `extraHeaders` (sent with the request to the service) and `gateway` (AI
//! Gateway: its logs, caching and limits), as Cloudflare documents them for
//! the binding. Built as a plain JavaScript object by hand: a serialiser
//! would cost the upload more than these few fields.

use worker::js_sys::{Object, Promise, Reflect};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::worker_sys::Ai;

#[wasm_bindgen]
extern "C" {
    /// The binding, seen with the three arguments its `run` takes.
    type AiWithOptions;

    #[wasm_bindgen(method)]
    fn run(this: &AiWithOptions, model: &str, input: JsValue, options: &Object) -> Promise;
}

/// What a call asks of the platform besides the model's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions<'a> {
    /// Sent as `x-session-affinity`: the calls of one session go to the
    /// same model instance, which keeps the prefix they share (the system
    /// prompt, the history) in its prompt cache.
    pub session: &'a str,
    /// The AI Gateway the call goes through (`AI_GATEWAY_ID`), if any.
    pub gateway: Option<&'a str>,
}

/// `ai.run(model, input, options)`.
pub fn run(ai: &Ai, model: &str, input: JsValue, options: &RunOptions) -> Result<Promise, JsValue> {
    let object = Object::new();
    let headers = Object::new();
    Reflect::set(
        &headers,
        &"x-session-affinity".into(),
        &options.session.into(),
    )?;
    Reflect::set(&object, &"extraHeaders".into(), &headers)?;
    if let Some(id) = options.gateway {
        let gateway = Object::new();
        Reflect::set(&gateway, &"id".into(), &id.into())?;
        Reflect::set(&object, &"gateway".into(), &gateway)?;
    }
    Ok(ai
        .unchecked_ref::<AiWithOptions>()
        .run(model, input, &object))
}
