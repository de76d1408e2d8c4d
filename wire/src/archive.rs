//! The archive routes' query parameters and headers, the answer to a
//! restore, and how long a restore may take.

use serde::{Deserialize, Serialize};

/// `GET …/archive`'s parameter: the largest archive wanted, in bytes.
pub const MAX_BYTES: &str = "maxBytes";
/// `PUT …/archive`'s parameter: how long the restore may take, in
/// milliseconds.
pub const TIMEOUT_MS: &str = "timeoutMs";

/// `GET …/archive`'s header: the entries of the archive (directories,
/// files, symlinks, fifos), as a restore counts them.
pub const ENTRIES_HEADER: &str = "x-duet-entries";
/// `GET …/archive`'s header: the bytes the archive unpacks to, tar headers
/// included, as a restore counts them against its bound.
pub const UNPACKED_BYTES_HEADER: &str = "x-duet-unpacked-bytes";
/// `GET …/archive`'s header, present only when something of the workspace
/// was left out (sockets and device files cannot be archived): one line of
/// printable ASCII of at most about 1 KiB naming what, other bytes of names
/// written `\xNN`, e.g. `2 entries not kept (sockets and device files cannot
/// be archived): run/app.sock (socket), dev/tty9 (device)`.
pub const LEFT_OUT_HEADER: &str = "x-duet-left-out";

/// `PUT …/archive`'s answer once the workspace is replaced: the regular
/// files written and their total size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreResult {
    pub restored: bool,
    pub files: u64,
    pub bytes: u64,
}

// How long a restore takes was measured with sandboxd's own restore (a
// release build, `PUT …/archive` from the same machine) and GNU tar 1.34
// for reference, on a 2-core VM whose root file system (ext4 without a
// journal, on a virtio disk) other builds shared; docs/sandbox-limits.md
// has every figure. The time goes to creating entries, and that depends on
// what was removed nearby in the last minutes more than on the archive:
// ext4 without a journal passes over every inode freed less than 60 s ago
// (360 s while its inode table block is dirty) each time it allocates one,
// so a restore meeting 14,400 freshly freed inodes took 13 s where the same
// restore into fresh inodes took half a second, GNU tar alike. A waking
// room's container is fresh; the constants still cover the slowest case
// measured, since a bound too short wakes a room without its files, and one
// too long only waits longer for a restore that is late anyway.

/// What every restore costs, whatever it holds, in milliseconds: 10–20 ms
/// measured (an empty archive), 5× that for the request's trip between the
/// worker and the container.
pub const RESTORE_BASE_MS: u64 = 100;
/// What each entry of an archive costs a restore, in microseconds. Measured
/// (120 directories of 120 empty files, 14,520 entries; 300 of 100, 30,300):
/// 27–43 µs an entry into fresh inodes (GNU tar 29–65 µs), 0.32–0.93 ms
/// within minutes of removing as many (GNU tar 0.19–0.89 ms). This is the
/// slowest measured, rounded up: 23–37× the cost a waking container meets.
pub const RESTORE_ENTRY_US: u64 = 1_000;
/// The unpacked bytes a restore writes per millisecond. Measured: one file
/// of 64 MiB of random bytes (gzip stores them) in 0.10–0.18 s, 65 MiB of
/// base64 text in 0.42–0.55 s (most of it inflating), 256 MiB of log lines
/// in 1.1–1.5 s: 124 bytes per microsecond at the slowest. A third of that,
/// rounded down.
pub const RESTORE_BYTES_PER_MS: u64 = 40_000;
/// The longest restore the system accepts, in milliseconds: a workspace
/// whose [`restore_ms`] is longer does not sleep. Twice the slowest restore
/// measured at sandboxd's default entry bound: 30,300 entries in 30.4 s, in
/// the slow case above. At sandboxd's default bounds (30,000 entries,
/// 256 MiB unpacked) the estimate is at most 36.8 s, so those bounds are
/// met first.
pub const RESTORE_MAX_MS: u64 = 60_000;

/// How long the restore of an archive of `entries` entries unpacking to
/// `bytes` bytes (tar headers included) may take, in milliseconds:
/// [`RESTORE_BASE_MS`] + `entries` × [`RESTORE_ENTRY_US`] / 1000 + `bytes` /
/// [`RESTORE_BYTES_PER_MS`], rounded up. 14,400 empty files in 120
/// directories: 14.8 s; 30,000 entries and 256 MiB: 36.8 s.
pub const fn restore_ms(entries: u64, bytes: u64) -> u64 {
    let entries_ms = entries.saturating_mul(RESTORE_ENTRY_US).div_ceil(1000);
    let bytes_ms = bytes.div_ceil(RESTORE_BYTES_PER_MS);
    RESTORE_BASE_MS
        .saturating_add(entries_ms)
        .saturating_add(bytes_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_costs_its_base_its_entries_and_its_bytes() {
        assert_eq!(restore_ms(0, 0), RESTORE_BASE_MS);
        assert_eq!(
            restore_ms(1000, 0),
            RESTORE_BASE_MS + RESTORE_ENTRY_US,
            "a thousand entries cost a thousand times one, in ms"
        );
        assert_eq!(restore_ms(0, RESTORE_BYTES_PER_MS), RESTORE_BASE_MS + 1);
        assert_eq!(
            restore_ms(1, 1),
            RESTORE_BASE_MS + RESTORE_ENTRY_US.div_ceil(1000) + 1,
            "rounded up"
        );
        assert!(
            restore_ms(u64::MAX, u64::MAX) > RESTORE_MAX_MS,
            "no overflow"
        );
        assert_eq!(restore_ms(14_520, 14_520 * 512 + 1024), 14_806);
        assert_eq!(restore_ms(30_000, 256 << 20), 36_811);
        let mut last = 0;
        for entries in [0, 1, 10, 1000, 14_400, 30_000] {
            let ms = restore_ms(entries, entries * 512);
            assert!(ms > last, "{entries}");
            last = ms;
        }
    }
}
