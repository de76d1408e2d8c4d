//! Resource limits every shell starts with, so that one sandbox cannot take
//! down the machine (or, in production, its container) for the others.
//!
//! They are set with `setrlimit` in the child between fork and exec, soft
//! and hard alike, so bash and everything it starts inherit them and only a
//! privileged process can raise them again. Each limit is at most the hard
//! limit sandboxd itself runs under: asking for more would fail the spawn,
//! and the tighter bound is the one that holds anyway.
//!
//! * `RLIMIT_FSIZE` bounds the size of any one file a process writes. A write
//!   past it fails and the writer gets SIGXFSZ ("File size limit exceeded"),
//!   so `head -c 2G /dev/zero > big` stops at the limit instead of filling
//!   the disk in one go. It does not bound the total of many files.
//! * `RLIMIT_NPROC` bounds the processes and threads of the shell's real user
//!   as a whole (sandboxd and every sandbox of the same user included), which
//!   stops fork bombs early. The kernel does not apply it to root.

use std::io;

/// The limits of one shell; `None` leaves the inherited limit alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Largest file a process may write, in bytes.
    pub file_bytes: Option<u64>,
    /// Most processes (threads included) the user may have.
    pub procs: Option<u64>,
}

impl Limits {
    /// Applies the limits to the calling process. Only calls getrlimit and
    /// setrlimit, so it is safe between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        if let Some(bytes) = self.file_bytes {
            lower(libc::RLIMIT_FSIZE, bytes)?;
        }
        if let Some(procs) = self.procs {
            lower(libc::RLIMIT_NPROC, procs)?;
        }
        Ok(())
    }
}

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

/// Sets soft and hard limit of `resource` to `value`, or to the current hard
/// limit if that is lower.
fn lower(resource: Resource, value: u64) -> io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write the struct passed.
    unsafe {
        if libc::getrlimit(resource, &mut current) == -1 {
            return Err(io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &new) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
