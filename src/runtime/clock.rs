//! The time of day, for deadlines, durations and message timestamps.

/// Milliseconds since the Unix epoch (`Date.now()`: no `Date` is built).
pub fn now_ms() -> u64 {
    worker::js_sys::Date::now() as u64
}
