//! The libc side of the terminal: a pseudo-terminal pair, a child given its
//! slave side as stdin, stdout, stderr and controlling terminal, and the
//! master side read and written through the runtime, sized, and asked how
//! it takes what is typed.
//!
//! Both sides are opened close-on-exec, so no other child sandboxd starts
//! (a command's shell, a job) holds a copy: the master reads EIO (taken as
//! the end of output) once the last process holding the slave is gone.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Stdio;

use duet_wire::terminal::TerminalSize;
use tokio::io::unix::AsyncFd;
use tokio::process::Command;

/// The master side of a pseudo-terminal.
pub struct Pty {
    master: AsyncFd<OwnedFd>,
}

impl Pty {
    /// Opens a pair of `size`: the master, and the slave for the child.
    pub fn open(size: TerminalSize) -> io::Result<(Pty, OwnedFd)> {
        let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: posix_openpt returns a new descriptor or -1.
        let master = owned(unsafe { libc::posix_openpt(flags) })?;
        let fd = master.as_raw_fd();
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: grantpt and unlockpt take the master; ptsname_r writes a
        // NUL-terminated name of at most `name.len()` bytes into `name`,
        // which open reads; open returns a new descriptor or -1.
        let slave = unsafe {
            check(libc::grantpt(fd))?;
            check(libc::unlockpt(fd))?;
            let rc = libc::ptsname_r(fd, name.as_mut_ptr(), name.len());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            owned(libc::open(name.as_ptr(), flags))?
        };
        // SAFETY: F_GETFL and F_SETFL on a descriptor we own.
        unsafe {
            let status = libc::fcntl(fd, libc::F_GETFL);
            check(status)?;
            check(libc::fcntl(fd, libc::F_SETFL, status | libc::O_NONBLOCK))?;
        }
        // SAFETY: an OwnedFd is a valid descriptor, the same one for as
        // long as it is owned.
        let master = unsafe { AsyncFd::register(master) }.map_err(|e| e.into_parts().1)?;
        let pty = Pty { master };
        pty.resize(size)?;
        Ok((pty, slave))
    }

    /// Reads what the child printed; 0 once no process holds the slave.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.master.readable().await?;
            let read = ready.try_io(|fd| {
                // SAFETY: read writes at most `buf.len()` bytes into `buf`.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                size(n)
            });
            match read {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }

    /// Writes some of `bytes` as typed, once the terminal takes any.
    pub async fn write(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.master.writable().await?;
            let written = ready.try_io(|fd| {
                // SAFETY: write reads at most `bytes.len()` bytes from `bytes`.
                let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
                size(n)
            });
            match written {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }

    /// How the terminal's line discipline takes what is typed now.
    pub fn modes(&self) -> io::Result<Modes> {
        // SAFETY: termios is plain data, filled in by tcgetattr.
        let termios = unsafe {
            let mut termios: libc::termios = std::mem::zeroed();
            check(libc::tcgetattr(self.fd(), &mut termios))?;
            termios
        };
        Ok(Modes {
            echo: termios.c_lflag & libc::ECHO != 0,
            canonical: termios.c_lflag & libc::ICANON != 0,
        })
    }

    /// The process group in the foreground, which reads what is typed.
    pub fn foreground(&self) -> io::Result<i32> {
        // SAFETY: tcgetpgrp only reads the descriptor.
        let group = unsafe { libc::tcgetpgrp(self.fd()) };
        check(group)?;
        Ok(group)
    }

    /// Sets its size; the foreground process group gets SIGWINCH.
    pub fn resize(&self, size: TerminalSize) -> io::Result<()> {
        let winsize = libc::winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize through the pointer.
        check(unsafe { libc::ioctl(self.fd(), libc::TIOCSWINSZ, &winsize) })
    }

    fn fd(&self) -> RawFd {
        self.master.get_ref().as_raw_fd()
    }
}

/// The terminal's settings that say whether what is typed shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// The terminal echoes what is typed.
    pub echo: bool,
    /// What is typed is read a line at a time (the terminal's own line
    /// editing); off for a program that reads each key as it comes.
    pub canonical: bool,
}

/// Gives the child `command` spawns `slave` as its stdin, stdout, stderr
/// and controlling terminal. The child must lead a session of its own,
/// made by a `pre_exec` registered before this one (`procs::own_session`).
pub fn attach(command: &mut Command, slave: OwnedFd) -> io::Result<()> {
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: ioctl is async-signal-safe. The pre_exec closures run after
    // the child's stdio is in place, in the order they were registered.
    unsafe {
        command.pre_exec(|| check(libc::ioctl(0, libc::TIOCSCTTY, 0)));
    }
    Ok(())
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn owned(fd: RawFd) -> io::Result<OwnedFd> {
    check(fd)?;
    // SAFETY: a descriptor just returned to us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn size(n: isize) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}
