//! Workspace archives, so that a room's sandbox can be stopped while idle
//! and its files brought back into a fresh one.
//!
//! An archive is a gzipped tar of a workspace's contents, paths relative to
//! it: regular files with their permissions, directories, symlinks as
//! symlinks, modification times. Packing leaves out what no restore would
//! take: sockets, fifos and devices, which cannot be archived meaningfully,
//! and symlinks leading out of the workspace. It is written to an unlinked
//! scratch file, not to memory, and abandoned as soon as it outgrows its cap.
//!
//! A restore trusts nothing in the archive. It unpacks into a new scratch
//! directory, which takes the workspace's place only once every entry was
//! accepted (see `workspace::replace`); the first entry refused ends it and
//! removes that directory, so a refused archive never touches a workspace.
//! It never follows a symlink while writing: every directory above an entry
//! must be a real directory (missing ones are created), and files are
//! created anew, never opened through a link. Refused:
//! * absolute paths and paths with a `..` component;
//! * symlinks whose target is absolute or leads out of the workspace,
//!   checked as the kernel would resolve them, through the symlinks of the
//!   archive itself, once more when everything is written;
//! * entries below a symlink, and entries listed twice;
//! * hard links (all of them: simplest, and safe), devices, fifos, sockets
//!   and every other entry type;
//! * more than the restore bound of unpacked data, counted as it is read, so
//!   a small archive cannot fill the disk;
//! * a stream that is not gzip, is corrupt or cut short (checked up to the
//!   gzip trailer's checksum and length, and each file's length), or has
//!   data after its end.
//!
//! Written entries belong to sandboxd's user whatever the archive says, lose
//! setuid, setgid and sticky bits, and stay readable by their owner
//! (directories enterable too), so that a restored workspace can always be
//! archived again. Modification times are restored, directories' last.
//!
//! A hostile archive can still make sandboxd hold one long path name or
//! extended header in memory, up to the restore bound: the tar reader reads
//! those whole.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use filetime::FileTime;
use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, EntryType, Header, HeaderMode};

use crate::error::Error;
use crate::workspace::{remove_blocking, workspace_error};

/// Most symlinks followed while resolving one target, as in Linux.
const MAX_LINK_HOPS: usize = 40;
const WRITE_BUFFER: usize = 64 * 1024;

/// What a restore wrote: regular files and their total size.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub files: u64,
    pub bytes: u64,
}

/// Writes the gzipped tar of `workspace`'s contents to a new file at
/// `scratch`, unlinked at once, and returns it rewound with its size. Fails
/// with [`Error::ArchiveTooLarge`] as soon as it outgrows `cap` bytes.
pub fn pack(workspace: &Path, scratch: &Path, cap: u64) -> Result<(File, u64), Error> {
    // Left by a sandboxd that died while packing.
    remove_stale(scratch)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(scratch)
        .map_err(|e| workspace_error(scratch, e))?;
    remove_stale(scratch)?;
    let mut sink = Capped {
        file,
        written: 0,
        cap,
    };
    let packed = pack_into(workspace, &mut sink);
    if sink.written > cap {
        return Err(Error::ArchiveTooLarge { cap });
    }
    packed.map_err(|e| workspace_error(workspace, e))?;
    let mut file = sink.file;
    file.rewind().map_err(|e| workspace_error(scratch, e))?;
    Ok((file, sink.written))
}

fn remove_stale(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(workspace_error(path, e)),
        _ => Ok(()),
    }
}

fn pack_into(workspace: &Path, sink: &mut Capped) -> io::Result<()> {
    // The default level: about three times the time of the fastest, and a
    // third smaller on source trees. An archive is made while its room is
    // idle, and a smaller one comes back sooner when the room wakes.
    let mut tar = Builder::new(GzEncoder::new(sink, Compression::default()));
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        let mut names = fs::read_dir(workspace.join(&dir))?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<io::Result<Vec<_>>>()?;
        names.sort();
        for name in names {
            let path = dir.join(name);
            if append(&mut tar, workspace, &path)? {
                dirs.push(path);
            }
        }
    }
    tar.into_inner()?.finish()?;
    Ok(())
}

/// Adds the entry at `path` (relative to `workspace`) if it is one a
/// restore takes; returns whether it is a directory to descend into.
fn append<W: Write>(tar: &mut Builder<W>, workspace: &Path, path: &Path) -> io::Result<bool> {
    let full = workspace.join(path);
    let meta = match fs::symlink_metadata(&full) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        meta => meta?,
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        tar.append_data(&mut header(&meta), path, io::empty())?;
        return Ok(true);
    }
    if kind.is_symlink() {
        let target = fs::read_link(&full)?;
        if resolve(workspace, path, &target).is_ok() {
            tar.append_link(&mut header(&meta), path, target)?;
        }
        return Ok(false);
    }
    if kind.is_file() {
        // Neither a symlink nor a fifo that replaced the file since can be
        // opened this way; what was opened is described by its own metadata.
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&full)
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            file => file?,
        };
        let meta = file.metadata()?;
        if meta.is_file() {
            // Exactly the size in the header, should the file change: cut if
            // it grew, padded with zeros if it shrank.
            let size = meta.len();
            let data = file.take(size).chain(io::repeat(0)).take(size);
            tar.append_data(&mut header(&meta), path, data)?;
        }
    }
    Ok(false)
}

fn header(meta: &fs::Metadata) -> Header {
    let mut header = Header::new_gnu();
    header.set_metadata_in_mode(meta, HeaderMode::Complete);
    header.set_mode(meta.mode() & 0o7777);
    header
}

/// The archive's file: counts what is written and fails once past `cap`.
struct Capped {
    file: File,
    written: u64,
    cap: u64,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len() as u64;
        if self.written > self.cap {
            return Err(io::Error::other("the archive outgrew its cap"));
        }
        self.file.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Unpacks the gzipped tar read from `body` into the new directory `dest`
/// (see the module docs for what is refused), reading no more than `limit`
/// unpacked bytes. On any failure `dest` is removed.
pub fn unpack(body: impl Read, dest: &Path, limit: u64) -> Result<Restored, Error> {
    // Left by a sandboxd that died while unpacking.
    remove_blocking(dest)?;
    fs::create_dir(dest).map_err(|e| workspace_error(dest, e))?;
    let unpacked = unpack_into(body, dest, limit);
    if unpacked.is_err() {
        let _ = remove_blocking(dest);
    }
    unpacked
}

fn unpack_into(body: impl Read, dest: &Path, limit: u64) -> Result<Restored, Error> {
    let mut archive = Archive::new(Counted {
        inner: GzDecoder::new(BufReader::new(body)),
        left: limit,
        over: false,
        broken: None,
    });
    let extracted = extract(&mut archive, dest);
    let mut stream = archive.into_inner();
    // Reading on to the end of the gzip data checks its trailer, which
    // tells whether anything was corrupted or cut short.
    let result = extracted.and_then(|restored| {
        io::copy(&mut stream, &mut io::sink()).map_err(|e| refused(e.to_string()))?;
        Ok(restored)
    });
    // What went wrong in the stream explains any other failure it caused.
    if stream.over {
        return Err(Error::RestoreTooLarge { limit });
    }
    if let Some(why) = stream.broken {
        return Err(refused(format!("the gzip stream is not valid: {why}")));
    }
    let restored = result?;
    let rest = stream
        .inner
        .into_inner()
        .fill_buf()
        .map_err(|e| refused(e.to_string()))?
        .is_empty();
    if !rest {
        return Err(refused("data follows the end of the gzip stream".into()));
    }
    Ok(restored)
}

fn refused(why: String) -> Error {
    Error::BadRequest(format!("archive refused: {why}"))
}

/// The unpacked stream: counts it, fails past `left` bytes, and remembers
/// how reading it failed.
struct Counted<R> {
    inner: R,
    left: u64,
    over: bool,
    broken: Option<String>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) => {
                self.broken.get_or_insert_with(|| e.to_string());
                return Err(e);
            }
        };
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(n)
            }
            None => {
                self.over = true;
                Err(io::Error::other("the archive unpacks to more than allowed"))
            }
        }
    }
}

/// Why one entry cannot be unpacked.
enum Fault {
    Refused(String),
    Io(io::Error),
}

impl From<io::Error> for Fault {
    fn from(e: io::Error) -> Self {
        Fault::Io(e)
    }
}

/// What is done once every entry is written.
#[derive(Default)]
struct Deferred {
    /// Symlinks to check again, now that all the others exist.
    links: Vec<(PathBuf, PathBuf)>,
    /// Directories' modes and times, set last: writing inside a directory
    /// changes its time.
    dirs: Vec<(PathBuf, u32, u64)>,
}

fn extract<R: Read>(archive: &mut Archive<R>, dest: &Path) -> Result<Restored, Error> {
    let not_tar = |e: io::Error| refused(format!("not a valid tar stream: {e}"));
    let mut restored = Restored::default();
    let mut deferred = Deferred::default();
    for entry in archive.entries().map_err(not_tar)? {
        let mut entry = entry.map_err(not_tar)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let written = unpack_entry(&mut entry, dest, &mut restored, &mut deferred);
        written.map_err(|fault| match fault {
            Fault::Refused(why) => refused(format!("{name}: {why}")),
            Fault::Io(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                refused(format!("{name}: {e}"))
            }
            Fault::Io(e) => workspace_error(&dest.join(&name), e),
        })?;
    }
    for (path, target) in &deferred.links {
        resolve(dest, path, target).map_err(|why| {
            refused(format!(
                "{}: {why}",
                String::from_utf8_lossy(path.as_os_str().as_bytes())
            ))
        })?;
    }
    for (path, mode, mtime) in &deferred.dirs {
        fs::set_permissions(path, Permissions::from_mode(mode & 0o777 | 0o500))
            .map_err(|e| workspace_error(path, e))?;
        set_mtime(path, *mtime);
    }
    Ok(restored)
}

fn unpack_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    dest: &Path,
    restored: &mut Restored,
    deferred: &mut Deferred,
) -> Result<(), Fault> {
    let kind = entry.header().entry_type();
    if kind == EntryType::XGlobalHeader {
        // Metadata about the whole archive (`git archive` writes one).
        return Ok(());
    }
    let path = relative(&entry.path_bytes())?;
    let full = dest.join(&path);
    let header = entry.header();
    let (mode, mtime) = header
        .mode()
        .and_then(|mode| Ok((mode, header.mtime()?)))
        .map_err(|e| Fault::Refused(e.to_string()))?;
    if path.as_os_str().is_empty() {
        return match kind {
            // The workspace itself, which is sandboxd's.
            EntryType::Directory => Ok(()),
            _ => Err(Fault::Refused(
                "only a directory may name the workspace itself".into(),
            )),
        };
    }
    let refuse = |why: &str| Err(Fault::Refused(why.into()));
    match kind {
        EntryType::Directory => {
            make_parents(dest, &path)?;
            match fs::symlink_metadata(&full) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return refuse("listed twice"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&full)?,
                Err(e) => return Err(e.into()),
            }
            deferred.dirs.push((full, mode, mtime));
        }
        EntryType::Regular => {
            make_parents(dest, &path)?;
            let file = match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&full)
            {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return refuse("listed twice")
                }
                file => file?,
            };
            let mut out = BufWriter::with_capacity(WRITE_BUFFER, file);
            let size = io::copy(entry, &mut out)?;
            if size != entry.size() {
                return refuse("the archive ends inside this file");
            }
            restored.bytes += size;
            let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
            file.set_permissions(Permissions::from_mode(mode & 0o777 | 0o400))?;
            drop(file);
            set_mtime(&full, mtime);
            restored.files += 1;
        }
        EntryType::Symlink => {
            let target = match entry.link_name_bytes() {
                Some(target) if !target.is_empty() => PathBuf::from(OsStr::from_bytes(&target)),
                _ => return refuse("a symlink without a target"),
            };
            resolve(dest, &path, &target).map_err(|why| Fault::Refused(why.into()))?;
            make_parents(dest, &path)?;
            match std::os::unix::fs::symlink(&target, &full) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return refuse("listed twice")
                }
                linked => linked?,
            }
            set_mtime(&full, mtime);
            deferred.links.push((path, target));
        }
        EntryType::Link => return refuse("hard links are not accepted"),
        EntryType::Char | EntryType::Block => return refuse("device files are not accepted"),
        EntryType::Fifo => return refuse("fifos are not accepted"),
        other => {
            return Err(Fault::Refused(format!(
                "entry type {:?} is not accepted, only files, directories and symlinks",
                char::from(other.as_byte())
            )))
        }
    }
    Ok(())
}

/// An entry's path as plain names relative to the workspace; empty for the
/// workspace itself.
fn relative(raw: &[u8]) -> Result<PathBuf, Fault> {
    let mut path = PathBuf::new();
    for component in Path::new(OsStr::from_bytes(raw)).components() {
        match component {
            Component::Normal(name) => path.push(name),
            Component::CurDir => {}
            Component::ParentDir => return Err(Fault::Refused("the path contains ..".into())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(Fault::Refused("the path is absolute".into()))
            }
        }
    }
    Ok(path)
}

/// Makes sure every directory above `path` exists in `dest` as a real
/// directory, creating missing ones, so nothing is written through a
/// symlink.
fn make_parents(dest: &Path, path: &Path) -> Result<(), Fault> {
    let mut at = PathBuf::new();
    for name in path.parent().into_iter().flat_map(Path::iter) {
        at.push(name);
        let full = dest.join(&at);
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) => {
                let what = if meta.is_symlink() {
                    "a symlink"
                } else {
                    "not a directory"
                };
                return Err(Fault::Refused(format!("{} is {what}", at.display())));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&full)?,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Follows `target`, as the kernel would for a symlink at `link` (relative
/// to `root`), through the tree under `root` as it stands; fails if that
/// leaves `root`. Missing names are taken as they are, since only what
/// exists can redirect the path.
pub fn resolve(root: &Path, link: &Path, target: &Path) -> Result<(), &'static str> {
    let mut at = link.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut todo: VecDeque<OsString> = steps(target).collect();
    let mut hops = 0;
    while let Some(step) = todo.pop_front() {
        match step.as_bytes() {
            b"/" => return Err("the symlink's target is absolute"),
            b"." => {}
            b".." => {
                if !at.pop() {
                    return Err("the symlink leads out of the workspace");
                }
            }
            _ => {
                at.push(&step);
                if let Ok(next) = fs::read_link(root.join(&at)) {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        return Err("the symlink goes through too many symlinks");
                    }
                    at.pop();
                    for step in steps(&next).rev() {
                        todo.push_front(step);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A path's components as names, `/` for the root (never a name).
fn steps(path: &Path) -> impl DoubleEndedIterator<Item = OsString> + '_ {
    path.components().map(|c| c.as_os_str().to_owned())
}

/// Best effort: a time the file system cannot store is no reason to refuse
/// an archive.
fn set_mtime(path: &Path, mtime: u64) {
    let time = FileTime::from_unix_time(i64::try_from(mtime).unwrap_or(i64::MAX), 0);
    let _ = filetime::set_symlink_file_times(path, time, time);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn resolved(root: &Path, link: &str, target: &str) -> Result<(), &'static str> {
        resolve(root, Path::new(link), Path::new(target))
    }

    #[test]
    fn symlinks_resolve_inside_or_are_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path();
        fs::create_dir_all(root.join("d/e")).unwrap();
        for (link, target) in [
            ("l", "d"),
            ("d/l", ".."),
            ("d/e/l", "../../d/./e"),
            ("l", "missing/x"),
            ("l", "missing/.."),
            ("d/l", "e/../../d"),
        ] {
            assert_eq!(resolved(root, link, target), Ok(()), "{link} -> {target}");
        }
        for (link, target) in [
            ("l", "/etc"),
            ("l", ".."),
            ("d/l", "../.."),
            ("l", "d/../.."),
            ("l", "missing/../.."),
        ] {
            assert!(resolved(root, link, target).is_err(), "{link} -> {target}");
        }
    }

    #[test]
    fn symlinks_are_followed_through_other_symlinks() {
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path();
        fs::create_dir_all(root.join("d")).unwrap();
        // d/up -> .. is inside; d/up/.. through it is not.
        symlink("..", root.join("d/up")).unwrap();
        assert_eq!(resolved(root, "d/up", ".."), Ok(()));
        assert!(resolved(root, "l", "d/up/..").is_err());
        assert_eq!(
            resolved(root, "l", "d/up/up/x"),
            Ok(()),
            "root/up is missing"
        );
        assert!(resolved(root, "l", "d/up/d/up/..").is_err());
        symlink("/etc", root.join("abs")).unwrap();
        assert!(resolved(root, "l", "abs/passwd").is_err());
        symlink("loop", root.join("loop")).unwrap();
        assert_eq!(
            resolved(root, "l", "loop"),
            Err("the symlink goes through too many symlinks")
        );
    }

    #[test]
    fn entry_paths_must_be_plain_and_relative() {
        for (raw, want) in [
            ("a/b", Some("a/b")),
            ("./a//./b/", Some("a/b")),
            ("./", Some("")),
            ("", Some("")),
            ("../x", None),
            ("a/../../x", None),
            ("a/..", None),
            ("/etc/x", None),
        ] {
            let got = relative(raw.as_bytes()).ok();
            assert_eq!(got.as_deref(), want.map(Path::new), "{raw}");
        }
    }
}
