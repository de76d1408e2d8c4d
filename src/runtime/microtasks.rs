//! How Rust futures are woken. Every `await` of a JavaScript promise in this
//! Worker resumes its future through the futures queue of `js-sys`, which
//! schedules its runs with the global `queueMicrotask` when there is one and
//! with a resolved promise's `then` otherwise. On workerd, `queueMicrotask` is
//! a runtime function that wraps each callback in the current async context
//! before queueing it; a promise reaction is V8's own job, and V8 carries the
//! context along by itself. Measured: about 5% less of workerd's CPU per warm
//! request (`/health`, `/message`), each of which resumes futures a few times.
//!
//! The queue looks for `queueMicrotask` once, when it is first used, so the
//! Worker makes that first use at start-up with the global hidden for the
//! moment, and puts it back at once: nothing else sees it missing.

use worker::js_sys::{global, Reflect};
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::spawn_local;

pub fn wake_by_promise_jobs() {
    let global = global();
    let name = JsValue::from_str("queueMicrotask");
    let own = Reflect::get_own_property_descriptor(&global, &name)
        .map(|descriptor| !descriptor.is_undefined())
        .unwrap_or(false);
    let saved = Reflect::get(&global, &name).unwrap_or(JsValue::UNDEFINED);
    if Reflect::set(&global, &name, &JsValue::UNDEFINED) != Ok(true) {
        return; // it cannot be hidden: the queue keeps using it
    }
    spawn_local(async {});
    if own {
        let _ = Reflect::set(&global, &name, &saved);
    } else {
        let _ = Reflect::delete_property(&global, &name);
    }
}
