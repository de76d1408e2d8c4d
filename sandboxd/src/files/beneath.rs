//! A workspace's files by path, resolved by the kernel beneath the
//! workspace so that nothing outside it is ever read, written or removed.
//!
//! A path comes in relative and is first normalized as text ([`RelPath`]):
//! no `.`, no empty parts, and each `..` takes back the part before it;
//! one with nothing left to take back leaves the workspace and is refused,
//! as are absolute paths, NUL and paths of `PATH_MAX` or more.
//!
//! What is left is never handed to a call that resolves from `/` or the
//! current directory. The workspace is opened once as a directory
//! descriptor (its own name must not be a symlink), and every path is
//! resolved from that descriptor by `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS`: the kernel walks the path, follows the symlinks
//! it meets, and fails with `EXDEV` (answered 403) as soon as one of them,
//! or a `..` in one of their targets, would take it above the workspace or
//! to an absolute path; `/proc`'s magic links are never followed. The check
//! and the walk are one system call, so a symlink swapped in anywhere along
//! the path at any moment changes only where inside the workspace the walk
//! ends, never whether it stays inside.
//!
//! A read opens the file (or directory) itself that way and works on that
//! descriptor. A write, a delete and a listing's entries act on a *name in
//! a directory*: the directory is opened beneath the workspace as above,
//! and the name is then used only by the `*at` calls of `at::Dir`, which
//! never follow a symlink at that name (`fstatat` with
//! `AT_SYMLINK_NOFOLLOW`, `unlinkat`, `renameat`, `O_NOFOLLOW | O_EXCL`).
//! A write whose name is a symlink follows it by hand, as the kernel would:
//! its target is appended to the directory's path and that is resolved
//! beneath the workspace again, at most 40 times. A write goes to a new
//! file beside its target, renamed over it once complete: a reader sees the
//! old file or the new one, whole; a symlink swapped in at the name before
//! the rename is replaced, never written through.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use duet_wire::file::{Entry, EntryKind, FileList, MAX_LIST_ENTRIES, MAX_PATH_BYTES};

use crate::at::{self, Dir};
use crate::error::Error;
use crate::timestamp::iso8601_millis;

const RESOLVE: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
/// Symlinks followed by hand at the end of a written path (the kernel's
/// own bound on a path's symlinks).
const MAX_LINKS: usize = 40;
/// Deepest tree a recursive delete goes into.
const MAX_DEPTH: usize = 256;
/// A new file's permission bits before the umask, as a shell creates one.
const FILE_MODE: u32 = 0o666;
const DIR_MODE: u32 = 0o777;

/// A path relative to the workspace, normalized: its parts, none of them
/// empty, `.` or `..`. No parts is the workspace itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath(Vec<Vec<u8>>);

impl RelPath {
    pub fn parse(raw: &[u8]) -> Result<RelPath, Error> {
        let refuse = |why: &str| Err(Error::BadRequest(format!("invalid path: {why}")));
        if raw.len() >= MAX_PATH_BYTES {
            return refuse(&format!("longer than {} bytes", MAX_PATH_BYTES - 1));
        }
        if raw.contains(&0) {
            return refuse("it contains NUL");
        }
        if raw.starts_with(b"/") {
            return refuse("it is absolute; paths are relative to the workspace");
        }
        let mut parts: Vec<Vec<u8>> = Vec::new();
        for part in raw.split(|&b| b == b'/') {
            match part {
                b"" | b"." => {}
                b".." => {
                    if parts.pop().is_none() {
                        return refuse("its `..` leaves the workspace");
                    }
                }
                _ => parts.push(part.to_vec()),
            }
        }
        Ok(RelPath(parts))
    }

    /// The path as answered: parts joined by `/`, the workspace "".
    pub fn shown(&self) -> String {
        String::from_utf8_lossy(&self.0.join(&b'/')).into_owned()
    }

    /// The path as `openat2` takes it.
    fn bytes(&self) -> Vec<u8> {
        if self.0.is_empty() {
            b".".to_vec()
        } else {
            self.0.join(&b'/')
        }
    }

    /// The directory's path and the last name; `None` for the workspace.
    fn split_last(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let (name, dir) = self.0.split_last()?;
        Some((dir.join(&b'/'), name.clone()))
    }
}

/// A sandbox's workspace, open.
pub struct Workspace {
    dir: Dir,
}

/// What a read found.
pub enum Found {
    File { file: File, size: u64 },
    Dir(FileList),
}

impl Workspace {
    /// Opens the workspace directory at `path`, which must not be a symlink.
    pub fn open(path: &Path) -> Result<Workspace, Error> {
        match Dir::open(path) {
            Ok(dir) => Ok(Workspace { dir }),
            // Replaced by a symlink (its owner can): never followed.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => Err(
                Error::Forbidden("the workspace is a symlink, not a directory".into()),
            ),
            Err(e) => Err(Error::Internal(format!("the workspace: {e}"))),
        }
    }

    /// The file at `path`, open for reading, or the listing of the
    /// directory there; symlinks inside the workspace are followed.
    pub fn read(&self, path: &RelPath) -> Result<Found, Error> {
        // Not blocking on a fifo; a terminal never becomes ours.
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let file = self
            .open_beneath(&path.bytes(), flags)
            .map_err(|e| refusal(path, e))?;
        let meta = file.metadata().map_err(|e| refusal(path, e))?;
        if meta.is_dir() {
            return list(Dir::from(file), path).map(Found::Dir);
        }
        if !meta.is_file() {
            return Err(not_regular(path));
        }
        Ok(Found::File {
            file,
            size: meta.len(),
        })
    }

    /// A new file beside the one at `path`, to be written and then put in
    /// its place; the directories on the way are created. A symlink at
    /// `path` is followed (if it stays inside); an existing file's
    /// permission bits are kept, a new one gets the shell's.
    pub fn start_write(&self, path: &RelPath) -> Result<(Pending, File), Error> {
        let (mut dir_path, mut name) = path
            .split_last()
            .ok_or_else(|| Error::FileConflict("the workspace itself is a directory".into()))?;
        for _ in 0..MAX_LINKS {
            let dir = self.make_dirs(&dir_path, path)?;
            let name_os = OsStr::from_bytes(&name);
            let mode = match dir.stat(name_os) {
                Ok(stat) => match stat.st_mode & libc::S_IFMT {
                    libc::S_IFREG => Some(stat.st_mode & 0o7777),
                    libc::S_IFDIR => {
                        return Err(Error::FileConflict(format!(
                            "{} is a directory",
                            path.shown()
                        )))
                    }
                    libc::S_IFLNK => {
                        let target = match dir.read_link(name_os) {
                            Ok(target) => target,
                            // No longer a symlink: look again.
                            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => continue,
                            Err(e) => return Err(refusal(path, e)),
                        };
                        let joined = follow(&dir_path, &target, path)?;
                        (dir_path, name) = split(&joined);
                        if matches!(&name[..], b"" | b"." | b"..") {
                            // A directory, if it is inside at all.
                            self.open_dir(&joined).map_err(|e| refusal(path, e))?;
                            return Err(Error::FileConflict(format!(
                                "{} is a symlink to a directory",
                                path.shown()
                            )));
                        }
                        continue;
                    }
                    _ => return Err(not_regular(path)),
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(refusal(path, e)),
            };
            let (temp, file) = create_temp(&dir).map_err(|e| refusal(path, e))?;
            if let Some(mode) = mode {
                at::set_mode(&file, FILE_MODE, mode).map_err(|e| refusal(path, e))?;
            }
            let pending = Pending {
                dir,
                temp,
                name,
                shown: path.shown(),
                done: false,
            };
            return Ok((pending, file));
        }
        Err(too_many_links(path))
    }

    /// Removes the file, symlink (itself) or empty directory at `path`;
    /// with `recursive`, a directory and all it holds, symlinks in it
    /// removed and never followed.
    pub fn delete(&self, path: &RelPath, recursive: bool) -> Result<(), Error> {
        let (dir_path, name) = path.split_last().ok_or_else(|| {
            Error::BadRequest("the workspace itself is not deleted; destroy the sandbox".into())
        })?;
        let dir = self.open_dir(&dir_path).map_err(|e| refusal(path, e))?;
        let name = OsStr::from_bytes(&name);
        let is_dir = dir.kind(name).map_err(|e| refusal(path, e))? == at::Kind::Dir;
        match dir.remove(name, is_dir) {
            Err(e) if is_dir && recursive && is_not_empty(&e) => {
                remove_tree(&dir, name, MAX_DEPTH).map_err(|e| refusal(path, e))
            }
            Err(e) if is_dir && is_not_empty(&e) => Err(Error::FileConflict(format!(
                "{} is a directory that is not empty; delete it with recursive=true",
                path.shown()
            ))),
            done => done.map_err(|e| refusal(path, e)),
        }
    }

    /// The directory at `dir_path`, creating what is missing of it, as
    /// `mkdir -p` would, each part beneath the workspace.
    fn make_dirs(&self, dir_path: &[u8], path: &RelPath) -> Result<Dir, Error> {
        match self.open_dir(dir_path) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            opened => return opened.map_err(|e| write_refusal(path, e)),
        }
        let mut dir = self.open_dir(b"").map_err(|e| write_refusal(path, e))?;
        let mut walked: Vec<u8> = Vec::new();
        for part in dir_path.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
            if !walked.is_empty() {
                walked.push(b'/');
            }
            walked.extend_from_slice(part);
            dir = match self.open_dir(&walked) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    match dir.make_dir(OsStr::from_bytes(part), DIR_MODE) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                            return Err(write_refusal(path, e))
                        }
                        _ => self.open_dir(&walked),
                    }
                }
                opened => opened,
            }
            .map_err(|e| write_refusal(path, e))?;
        }
        Ok(dir)
    }

    /// The directory at `dir_path` ("" for the workspace), as a place for
    /// the `*at` calls of names in it.
    fn open_dir(&self, dir_path: &[u8]) -> io::Result<Dir> {
        let dir_path = if dir_path.is_empty() { b"." } else { dir_path };
        self.open_beneath(dir_path, libc::O_PATH | libc::O_DIRECTORY)
            .map(Dir::from)
    }

    /// `openat2` of `path` beneath the workspace.
    fn open_beneath(&self, path: &[u8], flags: libc::c_int) -> io::Result<File> {
        let path = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: open_how is plain integers, all zero being valid.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.resolve = RESOLVE;
        // A rename anywhere on the system during the walk makes the kernel
        // answer EAGAIN rather than risk a wrong answer; try again.
        for _ in 0..16 {
            // SAFETY: a valid descriptor, a NUL-terminated path and an
            // open_how of the size given; the descriptor returned is ours.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.dir.fd(),
                    path.as_ptr(),
                    &how as *const libc::open_how,
                    std::mem::size_of::<libc::open_how>(),
                )
            };
            if fd >= 0 {
                // SAFETY: a descriptor just opened and owned by no one else.
                return Ok(unsafe { File::from_raw_fd(fd as libc::c_int) });
            }
            let e = io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
                return Err(e);
            }
        }
        Err(io::Error::from_raw_os_error(libc::EAGAIN))
    }
}

/// A written file waiting to be put in place; removed if it never is.
pub struct Pending {
    dir: Dir,
    temp: Vec<u8>,
    name: Vec<u8>,
    shown: String,
    done: bool,
}

impl Pending {
    /// Renames the written file over its target, atomically.
    pub fn commit(mut self) -> Result<(), Error> {
        let renamed = self
            .dir
            .rename(OsStr::from_bytes(&self.temp), OsStr::from_bytes(&self.name));
        match renamed {
            Ok(()) => {
                self.done = true;
                Ok(())
            }
            Err(e) if is_not_empty(&e) || e.raw_os_error() == Some(libc::EISDIR) => Err(
                Error::FileConflict(format!("{} is a directory", self.shown)),
            ),
            // Its directory was removed meanwhile, and the file with it.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(Error::FileConflict(format!(
                "{}: its directory was deleted while it was written",
                self.shown
            ))),
            Err(e) => Err(Error::Internal(format!("{}: {e}", self.shown))),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.dir.remove(OsStr::from_bytes(&self.temp), false);
        }
    }
}

/// A new file with a name of its own in `dir`.
fn create_temp(dir: &Dir) -> io::Result<(Vec<u8>, File)> {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let name = format!(".duet-write-{}-{n}~", std::process::id()).into_bytes();
        match dir.create_file(OsStr::from_bytes(&name), FILE_MODE) {
            Ok(file) => return Ok((name, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

/// Where a symlink found at a name of `dir_path` leads: its target read
/// from that directory, as a path from the workspace.
fn follow(dir_path: &[u8], target: &[u8], path: &RelPath) -> Result<Vec<u8>, Error> {
    if target.starts_with(b"/") {
        return Err(escapes(path));
    }
    let mut joined = dir_path.to_vec();
    if !joined.is_empty() {
        joined.push(b'/');
    }
    joined.extend_from_slice(target);
    Ok(joined)
}

/// A path from the workspace as its directory's path and its last name.
fn split(joined: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match joined.iter().rposition(|&b| b == b'/') {
        Some(at) => (joined[..at].to_vec(), joined[at + 1..].to_vec()),
        None => (Vec::new(), joined.to_vec()),
    }
}

/// The entries of `dir`, sorted by name, the first [`MAX_LIST_ENTRIES`].
fn list(dir: Dir, path: &RelPath) -> Result<FileList, Error> {
    // The smallest names seen so far, one more than listed, so that
    // memory stays bounded however many the directory holds.
    let mut first = std::collections::BinaryHeap::new();
    dir.each_name(|name| {
        first.push(name.as_bytes().to_vec());
        if first.len() > MAX_LIST_ENTRIES + 1 {
            first.pop();
        }
    })
    .map_err(|e| refusal(path, e))?;
    let mut names = first.into_sorted_vec();
    let truncated = names.len() > MAX_LIST_ENTRIES;
    names.truncate(MAX_LIST_ENTRIES);
    let mut entries = Vec::with_capacity(names.len());
    for name in names {
        let stat = match dir.stat(OsStr::from_bytes(&name)) {
            Ok(stat) => stat,
            // Gone since it was read.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(refusal(path, e)),
        };
        entries.push(Entry {
            name: String::from_utf8_lossy(&name).into_owned(),
            kind: match stat.st_mode & libc::S_IFMT {
                libc::S_IFREG => EntryKind::File,
                libc::S_IFDIR => EntryKind::Dir,
                libc::S_IFLNK => EntryKind::Symlink,
                _ => EntryKind::Other,
            },
            size: stat.st_size.max(0) as u64,
            mtime: iso8601_millis(
                UNIX_EPOCH + Duration::new(stat.st_mtime.max(0) as u64, stat.st_mtime_nsec as u32),
            ),
        });
    }
    Ok(FileList {
        path: path.shown(),
        entries,
        truncated,
    })
}

/// Removes the directory `name` in `parent` and everything in it, never
/// following a symlink (one swapped in for a directory is removed itself).
fn remove_tree(parent: &Dir, name: &OsStr, depth: usize) -> io::Result<()> {
    if depth == 0 {
        return Err(io::Error::other("the tree is too deep to delete"));
    }
    let dir = match parent.open_dir(name) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return parent.remove(name, false)
        }
        opened => opened?,
    };
    let mut names = Vec::new();
    dir.each_name(|name| names.push(name.to_os_string()))?;
    // A directory its owner cannot write (as `go mod download` leaves
    // them) is made writable first, as the shell's `rm -rf` cannot.
    let mut unlocked = false;
    for entry in &names {
        let is_dir = dir.kind(entry)? == at::Kind::Dir;
        let removed = match dir.remove(entry, is_dir) {
            Err(e) if e.raw_os_error() == Some(libc::EACCES) && !unlocked => {
                unlocked = true;
                dir.file()
                    .set_permissions(std::fs::Permissions::from_mode(0o700))?;
                dir.remove(entry, is_dir)
            }
            removed => removed,
        };
        match removed {
            Err(e) if is_dir && is_not_empty(&e) => remove_tree(&dir, entry, depth - 1)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            removed => removed?,
        }
    }
    parent.remove(name, true)
}

fn is_not_empty(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST))
}

/// What a failed call on `path` is answered.
fn refusal(path: &RelPath, e: io::Error) -> Error {
    let shown = path.shown();
    match e.raw_os_error() {
        Some(libc::EXDEV) => escapes(path),
        Some(libc::ENOENT | libc::ENOTDIR) => Error::NoFile(shown),
        Some(libc::ELOOP) => too_many_links(path),
        Some(libc::EACCES | libc::EPERM) => Error::Forbidden(format!("{shown}: permission denied")),
        Some(libc::EISDIR) => Error::FileConflict(format!("{shown} is a directory")),
        Some(libc::ENXIO) => not_regular(path),
        Some(libc::ENAMETOOLONG) => Error::BadRequest(format!("{shown}: the name is too long")),
        _ => Error::Internal(format!("{shown}: {e}")),
    }
}

/// As [`refusal`], for the directories of a write, where a file in the
/// way is a conflict.
fn write_refusal(path: &RelPath, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOTDIR | libc::EEXIST) => Error::FileConflict(format!(
            "{}: a part of the path is not a directory",
            path.shown()
        )),
        _ => refusal(path, e),
    }
}

fn escapes(path: &RelPath) -> Error {
    Error::Forbidden(format!(
        "{} leads outside the workspace through a symlink",
        path.shown()
    ))
}

fn too_many_links(path: &RelPath) -> Error {
    Error::BadRequest(format!(
        "{}: too many levels of symbolic links",
        path.shown()
    ))
}

fn not_regular(path: &RelPath) -> Error {
    Error::FileConflict(format!(
        "{} is not a regular file or a directory",
        path.shown()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(raw: &str) -> Result<String, Error> {
        RelPath::parse(raw.as_bytes()).map(|p| p.shown())
    }

    #[test]
    fn paths_are_normalized_as_text() {
        for (raw, shown) in [
            ("", ""),
            (".", ""),
            ("a", "a"),
            ("a/", "a"),
            ("./a//b/./c/", "a/b/c"),
            ("a/../b", "b"),
            ("a/b/../..", ""),
            ("..a/b..", "..a/b.."),
        ] {
            assert_eq!(parts(raw).ok().as_deref(), Some(shown), "{raw}");
        }
    }

    #[test]
    fn paths_leaving_the_workspace_are_refused() {
        let long = "a".repeat(MAX_PATH_BYTES);
        for raw in [
            "..",
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/",
            "a\0b",
            long.as_str(),
        ] {
            assert!(matches!(parts(raw), Err(Error::BadRequest(_))), "{raw:?}");
        }
        assert!(parts(&"a".repeat(MAX_PATH_BYTES - 1)).is_ok());
    }

    #[test]
    fn a_write_whose_directory_goes_meanwhile_is_a_conflict() {
        let root = std::env::temp_dir().join(format!("beneath-{}", std::process::id()));
        std::fs::create_dir_all(root.join("d")).unwrap();
        let workspace = Workspace::open(&root).unwrap();
        let (pending, _file) = workspace
            .start_write(&RelPath::parse(b"d/f").unwrap())
            .unwrap();
        std::fs::remove_dir_all(root.join("d")).unwrap();
        let committed = pending.commit();
        std::fs::remove_dir_all(&root).unwrap();
        assert!(matches!(committed, Err(Error::FileConflict(why)) if why.contains("deleted")));
    }

    #[test]
    fn a_followed_link_is_its_directory_and_target() {
        let path = RelPath::parse(b"l").unwrap();
        let follows = |dir: &str, target: &str| {
            follow(dir.as_bytes(), target.as_bytes(), &path)
                .map(|joined| String::from_utf8(joined).unwrap())
        };
        assert_eq!(follows("", "f").ok().as_deref(), Some("f"));
        assert_eq!(follows("a/b", "../c/f").ok().as_deref(), Some("a/b/../c/f"));
        assert!(matches!(
            follows("a", "/etc/passwd"),
            Err(Error::Forbidden(_))
        ));
        assert_eq!(split(b"a/b/../c/f"), (b"a/b/../c".to_vec(), b"f".to_vec()));
        assert_eq!(split(b"f"), (Vec::new(), b"f".to_vec()));
        assert_eq!(split(b"a/"), (b"a".to_vec(), Vec::new()));
    }
}
