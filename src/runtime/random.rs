//! Fresh ids: for watchers, commands and a room's token generation. They
//! need to differ from one another, not to be secret (a generation rides
//! inside signed tokens), so `Math.random` does.

/// A fresh id, `prefix` telling what it names.
pub fn id(prefix: char) -> String {
    let bits = (worker::js_sys::Math::random() * 2f64.powi(62)) as u64;
    format!("{prefix}{bits:016x}")
}
