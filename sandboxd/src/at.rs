//! File system calls relative to an open directory, one name at a time,
//! never following a symlink at that name: what lets a restore walk and
//! fill a tree that other processes may change under it (see `archive`).
//!
//! Every call takes a single name (no `/`) in a [`Dir`], the descriptor of
//! a directory opened with `O_NOFOLLOW | O_DIRECTORY`: a name that is a
//! symlink is never followed (opening it as a directory fails, with
//! `ENOTDIR` or `ELOOP`; creating anything there fails with `EEXIST`), and
//! a directory renamed or replaced after it was opened is still the one
//! written to.

use std::ffi::{CStr, CString, OsStr};
use std::fs::{File, Permissions};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::OnceLock;

/// An open directory.
pub struct Dir(File);

/// What a name in a directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Symlink,
    Other,
}

impl Dir {
    /// Opens the directory at `path`, failing if its last component is a
    /// symlink (those above it are followed).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let path = c_name(path.as_os_str())?;
        open(libc::AT_FDCWD, &path, DIR_FLAGS, 0).map(Dir)
    }

    /// The directory `name` in this one; `ENOTDIR` or `ELOOP` if `name` is
    /// a symlink.
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        open(self.fd(), &c_name(name)?, DIR_FLAGS, 0).map(Dir)
    }

    pub fn make_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a valid descriptor and a NUL-terminated name.
        cvt(unsafe { libc::mkdirat(self.fd(), name.as_ptr(), mode) })
    }

    /// Creates the regular file `name`, which must not exist (a symlink
    /// there included), open for writing.
    pub fn create_file(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        open(self.fd(), &c_name(name)?, flags | libc::O_CLOEXEC, mode)
    }

    pub fn symlink(&self, target: &OsStr, name: &OsStr) -> io::Result<()> {
        let (target, name) = (c_name(target)?, c_name(name)?);
        // SAFETY: a valid descriptor and NUL-terminated strings.
        cvt(unsafe { libc::symlinkat(target.as_ptr(), self.fd(), name.as_ptr()) })
    }

    pub fn make_fifo(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: a valid descriptor and a NUL-terminated name.
        cvt(unsafe { libc::mkfifoat(self.fd(), name.as_ptr(), mode) })
    }

    /// Opens the fifo `name` without waiting for a writer, to set its mode
    /// and times; anything else there is an error.
    pub fn open_fifo(&self, name: &OsStr) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let file = open(self.fd(), &c_name(name)?, flags, 0)?;
        if file.metadata()?.permissions().mode() & libc::S_IFMT != libc::S_IFIFO {
            return Err(io::Error::other("not a fifo any more"));
        }
        Ok(file)
    }

    /// What `name` is, without following it.
    pub fn kind(&self, name: &OsStr) -> io::Result<Kind> {
        Ok(match self.stat(name)?.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        })
    }

    /// `name` itself as `lstat` sees it (a symlink is not followed).
    pub fn stat(&self, name: &OsStr) -> io::Result<libc::stat> {
        let name = c_name(name)?;
        let mut stat = MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid descriptor, a NUL-terminated name, and room for
        // the answer, which is initialized when the call succeeds.
        unsafe {
            cvt(libc::fstatat(
                self.fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ))?;
            Ok(stat.assume_init())
        }
    }

    /// Removes `name` itself: a file or a symlink (never its target), or,
    /// with `dir`, an empty directory.
    pub fn remove(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let name = c_name(name)?;
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: a valid descriptor and a NUL-terminated name.
        cvt(unsafe { libc::unlinkat(self.fd(), name.as_ptr(), flags) })
    }

    /// Renames `from` to `to`, both in this directory; whatever `to` was (a
    /// symlink included) is replaced, not followed.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // SAFETY: a valid descriptor and NUL-terminated names.
        cvt(unsafe { libc::renameat(self.fd(), from.as_ptr(), self.fd(), to.as_ptr()) })
    }

    /// The target of the symlink `name`.
    pub fn read_link(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        let name = c_name(name)?;
        let mut target = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: a valid descriptor, a NUL-terminated name, and a buffer
        // of the length given.
        let len = unsafe {
            libc::readlinkat(
                self.fd(),
                name.as_ptr(),
                target.as_mut_ptr().cast(),
                target.len(),
            )
        };
        if len < 0 {
            return Err(io::Error::last_os_error());
        }
        target.truncate(len as usize);
        Ok(target)
    }

    /// Hands each name the directory holds (not `.` and `..`) to `each`.
    pub fn each_name(&self, mut each: impl FnMut(&OsStr)) -> io::Result<()> {
        // SAFETY: a valid descriptor; the duplicate is the stream's, which
        // closedir closes; entries are read before the next readdir.
        unsafe {
            let fd = libc::fcntl(self.fd(), libc::F_DUPFD_CLOEXEC, 0);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let stream = libc::fdopendir(fd);
            if stream.is_null() {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            // The duplicate shares the position of this descriptor.
            libc::rewinddir(stream);
            let ended = loop {
                *libc::__errno_location() = 0;
                let entry = libc::readdir(stream);
                if entry.is_null() {
                    break match *libc::__errno_location() {
                        0 => Ok(()),
                        errno => Err(io::Error::from_raw_os_error(errno)),
                    };
                }
                let name = CStr::from_ptr((*entry).d_name.as_ptr()).to_bytes();
                if name != b"." && name != b".." {
                    each(OsStr::from_bytes(name));
                }
            };
            libc::closedir(stream);
            ended
        }
    }

    /// Sets the access and modification times of `name` itself (a symlink
    /// is not followed) to `secs` since the epoch.
    pub fn set_times_of(&self, name: &OsStr, secs: i64) -> io::Result<()> {
        let name = c_name(name)?;
        let time = libc::timespec {
            tv_sec: secs,
            tv_nsec: 0,
        };
        // SAFETY: a valid descriptor, a NUL-terminated name, two timespecs.
        cvt(unsafe {
            libc::utimensat(
                self.fd(),
                name.as_ptr(),
                [time, time].as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        self.0.try_clone().map(Dir)
    }

    /// The directory itself, as a file (for its mode and times).
    pub fn file(&self) -> &File {
        &self.0
    }

    pub fn fd(&self) -> libc::c_int {
        self.0.as_raw_fd()
    }
}

/// The descriptor of a directory, opened by other means.
impl From<File> for Dir {
    fn from(file: File) -> Self {
        Dir(file)
    }
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

fn open(dir: libc::c_int, name: &CString, flags: libc::c_int, mode: u32) -> io::Result<File> {
    // SAFETY: a valid descriptor (or AT_FDCWD) and a NUL-terminated name;
    // the descriptor returned is ours alone.
    unsafe {
        let fd = libc::openat(dir, name.as_ptr(), flags, mode as libc::c_uint);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(fd))
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidFilename,
            "the name contains a NUL byte",
        )
    })
}

fn cvt(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Gives `file`, created with the permission bits `created`, the bits
/// `wanted`, unless creating it already did: unless the process's umask
/// took some away, or they differ. One system call less per entry, for
/// most entries.
pub fn set_mode(file: &File, created: u32, wanted: u32) -> io::Result<()> {
    if created & !umask() == wanted {
        return Ok(());
    }
    file.set_permissions(Permissions::from_mode(wanted))
}

/// The process's umask, read once (sandboxd never changes it); all bits if
/// it cannot be read, so that every mode is set explicitly then.
fn umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("Umask:"))?;
                u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
            })
            .unwrap_or(0o7777)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn names_that_are_symlinks_are_never_followed() {
        let root = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        symlink(outside.path(), root.path().join("l")).unwrap();
        fs::create_dir(root.path().join("d")).unwrap();
        let dir = Dir::open(root.path()).expect("open");
        let l = OsStr::new("l");
        assert_eq!(dir.kind(l).unwrap(), Kind::Symlink);
        assert_eq!(dir.kind(OsStr::new("d")).unwrap(), Kind::Dir);
        let refused = dir.open_dir(l).err().and_then(|e| e.raw_os_error());
        assert!(
            matches!(refused, Some(libc::ELOOP | libc::ENOTDIR)),
            "{refused:?}"
        );
        assert_eq!(
            dir.create_file(l, 0o644).err().map(|e| e.kind()),
            Some(io::ErrorKind::AlreadyExists)
        );
        assert!(dir.make_dir(l, 0o755).is_err());
        assert!(dir.make_fifo(l, 0o644).is_err());
        assert!(Dir::open(&root.path().join("l")).is_err());
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_moved_away_is_still_the_one_written_to() {
        let root = tempfile::tempdir().expect("tempdir");
        let top = Dir::open(root.path()).expect("open");
        top.make_dir(OsStr::new("d"), 0o755).unwrap();
        let d = top.open_dir(OsStr::new("d")).unwrap();
        fs::rename(root.path().join("d"), root.path().join("moved")).unwrap();
        symlink("/", root.path().join("d")).unwrap();
        d.create_file(OsStr::new("f"), 0o600).unwrap();
        assert!(root.path().join("moved/f").is_file());
    }

    #[test]
    fn modes_survive_the_umask() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = Dir::open(root.path()).expect("open");
        for mode in [0o777, 0o644, 0o400, 0o666] {
            let name = format!("f{mode:o}");
            let file = dir.create_file(OsStr::new(&name), mode).unwrap();
            set_mode(&file, mode, mode).unwrap();
            let got = fs::metadata(root.path().join(&name)).unwrap().permissions();
            assert_eq!(got.mode() & 0o7777, mode, "{name}");
        }
        // Created with other bits than wanted in the end.
        dir.make_dir(OsStr::new("d"), 0o755).unwrap();
        let d = dir.open_dir(OsStr::new("d")).unwrap();
        set_mode(d.file(), 0o755, 0o555).unwrap();
        let got = d.file().metadata().unwrap().permissions();
        assert_eq!(got.mode() & 0o7777, 0o555);
    }
}
