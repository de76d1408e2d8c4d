//! The time of day, for deadlines, durations and message timestamps.

/// Milliseconds since the Unix epoch (`Date.now()`: no `Date` is built).
pub fn now_ms() -> u64 {
    worker::js_sys::Date::now() as u64
}

/// Now, as UTC ISO 8601 with milliseconds (as sandboxd writes times).
pub fn now_iso() -> String {
    worker::js_sys::Date::new_0().to_iso_string().into()
}
