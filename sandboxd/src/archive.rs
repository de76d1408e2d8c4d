//! Workspace archives, so that a room's sandbox can be stopped while idle
//! and its files brought back into a fresh one.
//!
//! An archive is a gzipped tar of a workspace's contents, paths relative to
//! it: directories and regular files with their permissions, then symlinks
//! as symlinks, modification times. Packing leaves out what no restore
//! would take: sockets, fifos and devices, which cannot be archived
//! meaningfully, and symlinks leading out of the workspace in the tree the
//! archive holds (see `links`). It is written to an unlinked scratch file,
//! not to memory, and abandoned as soon as it outgrows its cap.
//!
//! Packing refuses, before anything is sent, a workspace that a restore
//! under the same root and [`Bounds`] would refuse: more unpacked bytes or
//! entries than the bounds, or a path too long to create below the
//! restore's scratch directory. A room that cannot come back whole is kept
//! awake rather than put to sleep.
//!
//! A restore trusts nothing in the archive. It unpacks into a new scratch
//! directory, which takes the workspace's place only once every entry was
//! accepted (see `workspace::replace`); the first entry refused, or the
//! restore being given up (see `abandon`, looked at between entries and
//! between chunks of a file), ends it and removes that directory, so a
//! refused archive never touches a workspace. It never follows a symlink
//! while writing: every directory above an entry must be a real directory
//! (missing ones are created), and files are created anew, never opened
//! through a link. Refused:
//! * absolute paths and paths with a `..` component;
//! * symlinks whose target is absolute or leads out of the workspace,
//!   followed as the kernel would through the symlinks of the archive
//!   itself: at once when nothing written later could change that, else
//!   once everything is written, so the order of entries does not matter;
//! * entries below a symlink, and entries listed twice;
//! * hard links (all of them: simplest, and safe), devices, fifos, sockets
//!   and every other entry type;
//! * more entries, or more unpacked data, than the bounds, counted as they
//!   are read, so a small archive cannot fill the disk or keep sandboxd busy;
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

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use filetime::FileTime;
use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, EntryType, Header, HeaderMode};

use crate::abandon::Abandon;
use crate::error::{Error, Over};
use crate::links::{self, Links};
use crate::workspace::{remove_blocking, workspace_error};

/// Bytes of a file written at once; a restore given up stops between them.
const CHUNK: usize = 64 * 1024;
/// The longest path a system call takes (PATH_MAX less the NUL).
const PATH_MAX: usize = libc::PATH_MAX as usize - 1;

/// What a restore unpacks at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Unpacked bytes, tar headers included.
    pub bytes: u64,
    pub entries: u64,
}

/// What a restore wrote: regular files and their total size.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub files: u64,
    pub bytes: u64,
}

/// Writes the gzipped tar of `workspace`'s contents to a new file at
/// `scratch`, unlinked at once, and returns it rewound with its size. Fails
/// with [`Error::ArchiveTooLarge`] as soon as it outgrows `cap` bytes, and
/// with [`Error::Unrestorable`] as soon as it holds what a restore into the
/// scratch directory `restore_into` within `bounds` would refuse.
pub fn pack(
    workspace: &Path,
    scratch: &Path,
    cap: u64,
    restore_into: &Path,
    bounds: Bounds,
) -> Result<(File, u64), Error> {
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
    // The default level: about three times the time of the fastest, and a
    // third smaller on source trees. An archive is made while its room is
    // idle, and a smaller one comes back sooner when the room wakes.
    let gzip = GzEncoder::new(Capped::new(file, cap), Compression::default());
    let mut packer = Packer {
        workspace,
        tar: Builder::new(Capped::new(gzip, bounds.bytes)),
        bounds,
        entries: 0,
        room: PATH_MAX.saturating_sub(restore_into.as_os_str().len() + 1),
        links: Vec::new(),
    };
    let packed = packer.run();
    // A cap passed explains the write that failed on it. The archive's cap
    // goes first, judged on all the data read so far: a workspace whose
    // archive is too large cannot be kept, restorable or not.
    let tar = packer.tar.get_mut();
    if tar.over() {
        let _ = tar.inner.flush();
    }
    if tar.inner.get_ref().over() {
        return Err(Error::ArchiveTooLarge { cap });
    }
    if tar.over() {
        return Err(Error::Unrestorable(Over::Bytes(bounds.bytes).to_string()));
    }
    packed?;
    let finished = packer.tar.into_inner().and_then(|tar| tar.inner.finish());
    let Capped {
        inner: mut file,
        written,
        ..
    } = finished.map_err(|e| workspace_error(workspace, e))?;
    file.rewind().map_err(|e| workspace_error(scratch, e))?;
    Ok((file, written))
}

fn remove_stale(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(workspace_error(path, e)),
        _ => Ok(()),
    }
}

/// Packing one workspace.
struct Packer<'a> {
    workspace: &'a Path,
    /// The tar stream, capped at the restore bound, gzipped into the file,
    /// capped at the archive's.
    tar: Builder<Capped<GzEncoder<Capped<File>>>>,
    bounds: Bounds,
    entries: u64,
    /// The longest path (relative to the workspace) a restore can create.
    room: usize,
    /// The symlinks found (path, target, header), added last: which to keep
    /// is known only once all are found.
    links: Vec<(PathBuf, PathBuf, Header)>,
}

impl Packer<'_> {
    fn run(&mut self) -> Result<(), Error> {
        let workspace = self.workspace;
        let io = |e| workspace_error(workspace, e);
        let mut dirs = vec![PathBuf::new()];
        while let Some(dir) = dirs.pop() {
            let mut names = fs::read_dir(self.workspace.join(&dir))
                .and_then(|entries| {
                    entries
                        .map(|entry| entry.map(|e| e.file_name()))
                        .collect::<io::Result<Vec<_>>>()
                })
                .map_err(io)?;
            names.sort();
            for name in names {
                let path = dir.join(name);
                if self.append(&path)? {
                    dirs.push(path);
                }
            }
        }
        self.append_links()?;
        self.tar.finish().map_err(io)?;
        self.tar.get_mut().inner.try_finish().map_err(io)
    }

    /// Adds the entry at `path` (relative to the workspace) if it is one a
    /// restore takes, keeping a symlink for later; returns whether it is a
    /// directory to descend into.
    fn append(&mut self, path: &Path) -> Result<bool, Error> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() > self.room {
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(100)]);
            return Err(Error::Unrestorable(format!(
                "{shown}...: the path is {} bytes long, and a restore here creates paths of at \
                 most {} bytes",
                bytes.len(),
                self.room
            )));
        }
        let full = self.workspace.join(path);
        let io = |e| workspace_error(&full, e);
        let meta = match fs::symlink_metadata(&full) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            meta => meta.map_err(io)?,
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            self.count()?;
            let header = &mut header(&meta);
            self.tar
                .append_data(header, path, io::empty())
                .map_err(io)?;
            return Ok(true);
        }
        if kind.is_symlink() {
            let target = fs::read_link(&full).map_err(io)?;
            self.links.push((path.to_path_buf(), target, header(&meta)));
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
                file => file.map_err(io)?,
            };
            let meta = file.metadata().map_err(io)?;
            if meta.is_file() {
                self.count()?;
                // Exactly the size in the header, should the file change: cut if
                // it grew, padded with zeros if it shrank.
                let size = meta.len();
                let data = file.take(size).chain(io::repeat(0)).take(size);
                self.tar
                    .append_data(&mut header(&meta), path, data)
                    .map_err(io)?;
            }
        }
        Ok(false)
    }

    /// Adds the symlinks that stay inside the workspace, judged in the tree
    /// of all the symlinks found, as a restore judges them in the tree of
    /// those kept. The two agree: a symlink through one left out would lead
    /// out the same way, so none kept goes through one left out.
    fn append_links(&mut self) -> Result<(), Error> {
        let found = std::mem::take(&mut self.links);
        let tree = Links::new(found.iter().map(|(p, t, _)| (p.as_path(), t.as_path())));
        let kept: Vec<bool> = found
            .iter()
            .map(|(path, target, _)| tree.resolve(path, target).is_ok())
            .collect();
        for ((path, target, mut header), keep) in found.into_iter().zip(kept) {
            if keep {
                self.count()?;
                self.tar
                    .append_link(&mut header, &path, target)
                    .map_err(|e| workspace_error(&self.workspace.join(&path), e))?;
            }
        }
        Ok(())
    }

    /// Counts one more entry against the restore's bound.
    fn count(&mut self) -> Result<(), Error> {
        self.entries += 1;
        if self.entries > self.bounds.entries {
            return Err(Error::Unrestorable(
                Over::Entries(self.bounds.entries).to_string(),
            ));
        }
        Ok(())
    }
}

fn header(meta: &fs::Metadata) -> Header {
    let mut header = Header::new_gnu();
    header.set_metadata_in_mode(meta, HeaderMode::Complete);
    header.set_mode(meta.mode() & 0o7777);
    header
}

/// A writer that counts what is written and fails once past `cap`.
struct Capped<W> {
    inner: W,
    written: u64,
    cap: u64,
}

impl<W> Capped<W> {
    fn new(inner: W, cap: u64) -> Self {
        Capped {
            inner,
            written: 0,
            cap,
        }
    }

    fn over(&self) -> bool {
        self.written > self.cap
    }
}

impl<W: Write> Write for Capped<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len() as u64;
        if self.over() {
            return Err(io::Error::other("past its cap"));
        }
        self.inner.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Unpacks the gzipped tar read from `body` into the new directory `dest`
/// (see the module docs for what is refused) within `bounds`, until
/// `abandon` says to stop. On any failure `dest` is removed.
pub fn unpack(
    body: impl Read,
    dest: &Path,
    bounds: Bounds,
    abandon: &Abandon,
) -> Result<Restored, Error> {
    // Left by a sandboxd that died while unpacking.
    remove_blocking(dest)?;
    fs::create_dir(dest).map_err(|e| workspace_error(dest, e))?;
    // Giving up explains any failure it caused (a body cut off, say).
    let unpacked =
        unpack_into(body, dest, bounds, abandon).map_err(|e| abandon.check().err().unwrap_or(e));
    if unpacked.is_err() {
        let _ = remove_blocking(dest);
    }
    unpacked
}

fn unpack_into(
    body: impl Read,
    dest: &Path,
    bounds: Bounds,
    abandon: &Abandon,
) -> Result<Restored, Error> {
    let mut archive = Archive::new(Counted {
        inner: GzDecoder::new(BufReader::new(body)),
        left: bounds.bytes,
        over: false,
        broken: None,
    });
    let mut unpacker = Unpacker {
        dest,
        abandon,
        restored: Restored::default(),
        made: HashSet::new(),
        links: Vec::new(),
        dirs: Vec::new(),
        buf: vec![0; CHUNK],
    };
    let extracted = unpacker.extract(&mut archive, bounds.entries);
    let mut stream = archive.into_inner();
    // Reading on to the end of the gzip data checks its trailer, which
    // tells whether anything was corrupted or cut short.
    let result = extracted
        .and_then(|()| io::copy(&mut stream, &mut io::sink()).map_err(|e| refused(e.to_string())));
    // What went wrong in the stream explains any other failure it caused.
    if stream.over {
        return Err(Error::RestoreTooLarge(Over::Bytes(bounds.bytes)));
    }
    if let Some(why) = stream.broken {
        return Err(refused(format!("the gzip stream is not valid: {why}")));
    }
    result?;
    let rest = stream
        .inner
        .into_inner()
        .fill_buf()
        .map_err(|e| refused(e.to_string()))?
        .is_empty();
    if !rest {
        return Err(refused("data follows the end of the gzip stream".into()));
    }
    unpacker.finish()?;
    Ok(unpacker.restored)
}

fn refused(why: String) -> Error {
    Error::BadRequest(format!("archive refused: {why}"))
}

fn lossy(path: &Path) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path.as_os_str().as_bytes())
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

/// Unpacking one archive.
struct Unpacker<'a> {
    dest: &'a Path,
    abandon: &'a Abandon,
    restored: Restored,
    /// Directories (relative to `dest`) known to be real ones: entries are
    /// never replaced, so entries below them need no look-up.
    made: HashSet<PathBuf>,
    /// Symlinks (path, target) to judge once all the others exist.
    links: Vec<(PathBuf, PathBuf)>,
    /// Directories' modes and times, set last: writing inside a directory
    /// changes its time.
    dirs: Vec<(PathBuf, u32, u64)>,
    /// For copying files' data.
    buf: Vec<u8>,
}

impl Unpacker<'_> {
    fn extract<R: Read>(
        &mut self,
        archive: &mut Archive<R>,
        max_entries: u64,
    ) -> Result<(), Error> {
        let not_tar = |e: io::Error| refused(format!("not a valid tar stream: {e}"));
        let mut entries = 0u64;
        for entry in archive.entries().map_err(not_tar)? {
            self.abandon.check()?;
            let mut entry = entry.map_err(not_tar)?;
            entries += 1;
            if entries > max_entries {
                return Err(Error::RestoreTooLarge(Over::Entries(max_entries)));
            }
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            self.entry(&mut entry).map_err(|fault| match fault {
                Fault::Refused(why) => refused(format!("{name}: {why}")),
                Fault::Io(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                    refused(format!("{name}: {e}"))
                }
                Fault::Io(e) => workspace_error(&self.dest.join(&name), e),
            })?;
        }
        Ok(())
    }

    /// What is done once every entry is written: the symlinks judged in the
    /// whole tree, the directories' modes and times set.
    fn finish(&self) -> Result<(), Error> {
        let tree = Links::new(self.links.iter().map(|(p, t)| (p.as_path(), t.as_path())));
        for (path, target) in &self.links {
            self.abandon.check()?;
            tree.resolve(path, target)
                .map_err(|why| refused(format!("{}: {why}", lossy(path))))?;
        }
        for (path, mode, mtime) in &self.dirs {
            self.abandon.check()?;
            fs::set_permissions(path, Permissions::from_mode(mode & 0o777 | 0o500))
                .map_err(|e| workspace_error(path, e))?;
            set_mtime(path, *mtime);
        }
        Ok(())
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), Fault> {
        let kind = entry.header().entry_type();
        if kind == EntryType::XGlobalHeader {
            // Metadata about the whole archive (`git archive` writes one).
            return Ok(());
        }
        let path = relative(&entry.path_bytes())?;
        let full = self.dest.join(&path);
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
                self.make_parents(&path)?;
                if !self.made.contains(&path) {
                    if make_dir(&full)?.is_some() {
                        return refuse("listed twice");
                    }
                    self.made.insert(path);
                }
                self.dirs.push((full, mode, mtime));
            }
            EntryType::Regular => {
                self.make_parents(&path)?;
                let mut file = match OpenOptions::new()
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
                let size = self.copy(entry, &mut file)?;
                if size != entry.size() {
                    return refuse("the archive ends inside this file");
                }
                self.restored.bytes += size;
                file.set_permissions(Permissions::from_mode(mode & 0o777 | 0o400))?;
                // Best effort, as for every time.
                let time = file_time(mtime);
                let _ = filetime::set_file_handle_times(&file, Some(time), Some(time));
                self.restored.files += 1;
            }
            EntryType::Symlink => {
                let target = match entry.link_name_bytes() {
                    Some(target) if !target.is_empty() => PathBuf::from(OsStr::from_bytes(&target)),
                    _ => return refuse("a symlink without a target"),
                };
                match links::resolve(links::on_disk(self.dest), &path, &target) {
                    Err(out) if !out.provisional => return refuse(out.why),
                    _ => {}
                }
                self.make_parents(&path)?;
                match std::os::unix::fs::symlink(&target, &full) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return refuse("listed twice")
                    }
                    linked => linked?,
                }
                set_mtime(&full, mtime);
                self.links.push((path, target));
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

    /// Copies a file's data in chunks of [`CHUNK`], stopping if the restore
    /// is given up; returns its length.
    fn copy(&mut self, from: &mut impl Read, to: &mut File) -> io::Result<u64> {
        let mut copied = 0;
        loop {
            let mut filled = 0;
            while filled < self.buf.len() {
                match from.read(&mut self.buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if filled == 0 {
                return Ok(copied);
            }
            if self.abandon.check().is_err() {
                return Err(io::Error::other("the restore was given up"));
            }
            to.write_all(&self.buf[..filled])?;
            copied += filled as u64;
        }
    }

    /// Makes sure every directory above `path` exists as a real directory,
    /// creating missing ones, so nothing is written through a symlink.
    fn make_parents(&mut self, path: &Path) -> Result<(), Fault> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        if parent.as_os_str().is_empty() || self.made.contains(parent) {
            return Ok(());
        }
        let mut at = PathBuf::new();
        for name in parent {
            at.push(name);
            if self.made.contains(&at) {
                continue;
            }
            if let Some(kind) = make_dir(&self.dest.join(&at))? {
                let what = if kind.is_symlink() {
                    "a symlink"
                } else {
                    "not a directory"
                };
                return Err(Fault::Refused(format!("{} is {what}", at.display())));
            }
            self.made.insert(at.clone());
        }
        Ok(())
    }
}

/// Creates the directory `full` unless one is there (never following a
/// symlink); returns what is there instead, if anything.
fn make_dir(full: &Path) -> io::Result<Option<fs::FileType>> {
    match fs::create_dir(full) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let kind = fs::symlink_metadata(full)?.file_type();
            Ok((!kind.is_dir()).then_some(kind))
        }
        made => made.map(|()| None),
    }
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

fn file_time(mtime: u64) -> FileTime {
    FileTime::from_unix_time(i64::try_from(mtime).unwrap_or(i64::MAX), 0)
}

/// Best effort: a time the file system cannot store is no reason to refuse
/// an archive.
fn set_mtime(path: &Path, mtime: u64) {
    let time = file_time(mtime);
    let _ = filetime::set_symlink_file_times(path, time, time);
}

#[cfg(test)]
mod tests {
    use super::*;

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
