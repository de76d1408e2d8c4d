//! The archive routes' query parameters, and the answer to a restore.

use serde::{Deserialize, Serialize};

/// `GET …/archive`'s parameter: the largest archive wanted, in bytes.
pub const MAX_BYTES: &str = "maxBytes";
/// `PUT …/archive`'s parameter: how long the restore may take, in
/// milliseconds.
pub const TIMEOUT_MS: &str = "timeoutMs";

/// `PUT …/archive`'s answer once the workspace is replaced: the regular
/// files written and their total size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreResult {
    pub restored: bool,
    pub files: u64,
    pub bytes: u64,
}
