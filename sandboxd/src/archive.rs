//! Workspace archives, so that a room's sandbox can be stopped while idle
//! and its files brought back into a fresh one.
//!
//! An archive is a gzipped tar of a workspace's contents, paths relative to
//! it: directories, regular files and fifos with their permissions, symlinks
//! as symlinks whatever they point to, modification times. A symlink is
//! data: `.venv/bin/python -> /usr/bin/python3` comes back as it was, as
//! does one leading out of the workspace or nowhere; what must be confined
//! is following one, which a restore never does (below). Sockets and device
//! files cannot be archived: packing leaves them out and says which (see
//! [`Packed::note`]). The archive is written to an unlinked scratch file,
//! not to memory, and abandoned as soon as it outgrows its cap.
//!
//! Packing refuses, before anything is sent, a workspace that a restore
//! under the same root and [`Bounds`] would refuse or could not finish in
//! time: more unpacked bytes or entries than the bounds, a path too long to
//! create below the restore's scratch directory, or an estimated restore
//! time (`duet_wire::restore_ms` of the entries and bytes packed so far)
//! over the bound. A room that cannot come back whole is kept awake rather
//! than put to sleep.
//!
//! A restore trusts nothing in the archive. It unpacks into a new scratch
//! directory, which takes the workspace's place only once every entry was
//! accepted (see `workspace::replace`); the first entry refused, or the
//! restore being given up (see `abandon`, looked at between entries and
//! between chunks of a file), ends it and removes that directory, so a
//! refused archive never touches a workspace.
//!
//! It never follows a symlink while writing, whether the archive made it or
//! a process of the sandbox did. Those processes run as sandboxd's user and
//! can reach the scratch directory (a sibling of their workspace) while the
//! restore runs, so the walk is one that no swap can redirect: it holds the
//! scratch directory open (opened, without following a symlink, as soon as
//! it is made) and goes down one name at a time from an open directory
//! (see `at`), opening each with `O_NOFOLLOW | O_DIRECTORY`
//! (creating it first if missing), so every directory above an entry is a
//! real one, made by the restore or found as a directory; files, fifos and
//! symlinks are created anew (`O_CREAT | O_EXCL` and the like), never
//! opened through a link. A name that is a symlink ends the restore, and so
//! does a directory moved away each time it is made; a
//! directory moved after it was opened is still the one written to, which
//! gives those processes nothing they could not write themselves. Refused:
//! * absolute paths and paths with a `..` component;
//! * entries below a symlink, and entries listed twice (a symlink, then a
//!   directory or a file of the same name, included);
//! * hard links (all of them: simplest, and safe), devices, and every other
//!   entry type but directories, files, symlinks and fifos;
//! * a path longer than a restore here creates (`PATH_MAX` with the scratch
//!   directory in front), as packing judges it;
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
//! Each entry costs the system calls that creating it takes and little
//! more: a file is one `openat` (with its mode, set again only where the
//! umask took bits away), its data's writes, one `futimens` and one
//! `close`; a directory above an entry is looked up only when the entry
//! before went into another directory.
//!
//! A hostile archive can still make sandboxd hold one long path name or
//! extended header in memory, up to the restore bound (the tar reader reads
//! those whole), and make it look the directories above every entry up
//! again (entries alternating between deep directories): the restore's
//! deadline bounds that.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use filetime::FileTime;
use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, EntryType, Header, HeaderMode};

use crate::abandon::Abandon;
use crate::at::{self, Dir, Kind};
use crate::error::{Error, Over};
use crate::workspace::{remove_blocking, workspace_error};

/// Bytes of a file written at once; a restore given up stops between them.
const CHUNK: usize = 64 * 1024;
/// The longest path a system call takes (PATH_MAX less the NUL).
const PATH_MAX: usize = libc::PATH_MAX as usize - 1;
/// The longest note of what packing left out, in bytes.
const NOTE_MAX: usize = 1024;
/// The longest name in that note, escaped.
const NOTE_NAME_MAX: usize = 200;

/// What a restore unpacks at most, and how long packing lets it take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Unpacked bytes, tar headers included.
    pub bytes: u64,
    pub entries: u64,
    /// The longest estimated restore (`duet_wire::restore_ms`) packing
    /// accepts. A restore itself is bounded by its caller's `timeoutMs`.
    pub ms: u64,
}

/// What a restore wrote: regular files and their total size.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub files: u64,
    pub bytes: u64,
}

/// An archive made, and what it holds.
pub struct Packed {
    /// The gzipped tar, unlinked, rewound.
    pub file: File,
    /// Its size.
    pub len: u64,
    /// Its entries and the bytes it unpacks to, as a restore counts them.
    pub entries: u64,
    pub unpacked: u64,
    /// What of the workspace it does not hold (path, and what it is).
    pub left_out: Vec<(PathBuf, &'static str)>,
}

impl Packed {
    /// One line of printable ASCII, at most [`NOTE_MAX`] bytes, naming what
    /// was left out, if anything was.
    pub fn note(&self) -> Option<String> {
        let n = self.left_out.len();
        if n == 0 {
            return None;
        }
        let entries = if n == 1 { "entry" } else { "entries" };
        let mut note =
            format!("{n} {entries} not kept (sockets and device files cannot be archived)");
        for (i, (path, kind)) in self.left_out.iter().enumerate() {
            let sep = if i == 0 { ": " } else { ", " };
            let item = format!("{sep}{} ({kind})", escaped(path.as_os_str().as_bytes()));
            // Room kept for saying how many more.
            if note.len() + item.len() > NOTE_MAX - 24 {
                note.push_str(&format!("{sep}and {} more", n - i));
                break;
            }
            note.push_str(&item);
        }
        Some(note)
    }
}

/// `name` as printable ASCII: other bytes, and `\`, written `\xNN`; cut
/// to about [`NOTE_NAME_MAX`] bytes.
fn escaped(name: &[u8]) -> String {
    let mut out = String::new();
    for &b in name {
        if out.len() >= NOTE_NAME_MAX {
            out.push_str("...");
            break;
        }
        match b {
            b' '..=b'~' if b != b'\\' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// Writes the gzipped tar of `workspace`'s contents to a new file at
/// `scratch`, unlinked at once, and returns it rewound with what it holds.
/// Fails with [`Error::ArchiveTooLarge`] as soon as it outgrows `cap`
/// bytes, and with [`Error::Unrestorable`] as soon as it holds what a
/// restore into the scratch directory `restore_into` within `bounds` would
/// refuse, or would take longer than `bounds.ms` by its estimate.
pub fn pack(
    workspace: &Path,
    scratch: &Path,
    cap: u64,
    restore_into: &Path,
    bounds: Bounds,
) -> Result<Packed, Error> {
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
        room: room(restore_into),
        left_out: Vec::new(),
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
    let unpacked = packer.tar.get_ref().written;
    let finished = packer.tar.into_inner().and_then(|tar| tar.inner.finish());
    let Capped {
        inner: mut file,
        written,
        ..
    } = finished.map_err(|e| workspace_error(workspace, e))?;
    file.rewind().map_err(|e| workspace_error(scratch, e))?;
    Ok(Packed {
        file,
        len: written,
        entries: packer.entries,
        unpacked,
        left_out: packer.left_out,
    })
}

/// The longest path (relative to the directory `into`) a restore there
/// creates.
fn room(into: &Path) -> usize {
    PATH_MAX.saturating_sub(into.as_os_str().len() + 1)
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
    /// What cannot be archived, found so far.
    left_out: Vec<(PathBuf, &'static str)>,
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
        self.tar.finish().map_err(io)?;
        // The end of the tar counts as a restore reads it.
        self.check_estimate()?;
        self.tar.get_mut().inner.try_finish().map_err(io)
    }

    /// Adds the entry at `path` (relative to the workspace), or notes it as
    /// left out; returns whether it is a directory to descend into.
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
        if kind.is_dir() || kind.is_fifo() {
            self.count()?;
            self.tar
                .append_data(&mut header(&meta), path, io::empty())
                .map_err(io)?;
        } else if kind.is_symlink() {
            self.count()?;
            let target = fs::read_link(&full).map_err(io)?;
            self.append_symlink(path, target.as_os_str().as_bytes(), &meta)
                .map_err(io)?;
        } else if kind.is_file() {
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
            if !meta.is_file() {
                return Ok(false);
            }
            self.count()?;
            // Exactly the size in the header, should the file change: cut if
            // it grew, padded with zeros if it shrank.
            let size = meta.len();
            let data = file.take(size).chain(io::repeat(0)).take(size);
            self.tar
                .append_data(&mut header(&meta), path, data)
                .map_err(io)?;
        } else {
            let what = if kind.is_socket() { "socket" } else { "device" };
            self.left_out.push((path.to_path_buf(), what));
            return Ok(false);
        }
        self.check_estimate()?;
        Ok(kind.is_dir())
    }

    /// Adds the symlink `path` to `target`, byte for byte (the tar crate's
    /// own way tidies a target up: `a//b` would come back as `a/b`).
    fn append_symlink(
        &mut self,
        path: &Path,
        target: &[u8],
        meta: &fs::Metadata,
    ) -> io::Result<()> {
        let mut header = header(meta);
        let field = header.as_old().linkname.len();
        if target.len() > field {
            // A target too long for the header goes in an entry of its own
            // just before, as GNU tar writes it.
            let mut long = Header::new_gnu();
            let name = b"././@LongLink";
            long.as_gnu_mut()
                .ok_or_else(|| io::Error::other("not a GNU header"))?
                .name[..name.len()]
                .copy_from_slice(name);
            long.set_entry_type(EntryType::GNULongLink);
            long.set_mode(0o644);
            long.set_size(target.len() as u64 + 1);
            long.set_cksum();
            self.tar.append(&long, target.chain(&[0][..]))?;
        }
        header.set_link_name_literal(&target[..target.len().min(field)])?;
        self.tar.append_data(&mut header, path, io::empty())
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

    /// Fails once the restore of what is packed so far would take longer
    /// than the bound by its estimate.
    fn check_estimate(&self) -> Result<(), Error> {
        let bytes = self.tar.get_ref().written;
        let ms = duet_wire::restore_ms(self.entries, bytes);
        if ms <= self.bounds.ms {
            return Ok(());
        }
        Err(Error::Unrestorable(format!(
            "its restore would take longer than {} ms (--max-restore-ms): {} entries unpacking \
             to {bytes} bytes, packed so far, are estimated at {ms} ms",
            self.bounds.ms, self.entries
        )))
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
    let unpacked = Dir::open(dest)
        .map_err(|e| workspace_error(dest, e))
        .and_then(|root| unpack_into(body, dest, root, bounds, abandon))
        .map_err(|e| abandon.check().err().unwrap_or(e));
    if unpacked.is_err() {
        let _ = remove_blocking(dest);
    }
    unpacked
}

fn unpack_into(
    body: impl Read,
    dest: &Path,
    root: Dir,
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
        root,
        room: room(dest),
        abandon,
        restored: Restored::default(),
        last: None,
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

/// A directory of the archive, to finish once everything is written:
/// writing inside a directory changes its time, and its mode may forbid it.
struct ListedDir {
    path: PathBuf,
    /// The mode it was created with, if this entry created it.
    created: Option<u32>,
    mode: u32,
    mtime: u64,
}

/// Unpacking one archive.
struct Unpacker<'a> {
    dest: &'a Path,
    /// `dest`, open.
    root: Dir,
    /// The longest path (relative to `dest`) created.
    room: usize,
    abandon: &'a Abandon,
    restored: Restored,
    /// The directory (relative to `dest`) the last entry went into, open:
    /// entries come directory by directory, so most need no look-up.
    last: Option<(PathBuf, Dir)>,
    dirs: Vec<ListedDir>,
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
            self.entry(&mut entry)
                .map_err(|fault| self.error(&name, fault))?;
        }
        Ok(())
    }

    fn error(&self, name: &str, fault: Fault) -> Error {
        match fault {
            Fault::Refused(why) => refused(format!("{name}: {why}")),
            Fault::Io(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                refused(format!("{name}: {e}"))
            }
            Fault::Io(e) => workspace_error(&self.dest.join(name), e),
        }
    }

    /// What is done once every entry is written: the directories' modes and
    /// times set.
    fn finish(&mut self) -> Result<(), Error> {
        for listed in std::mem::take(&mut self.dirs) {
            self.abandon.check()?;
            self.finish_dir(&listed)
                .map_err(|fault| self.error(&listed.path.to_string_lossy(), fault))?;
        }
        Ok(())
    }

    fn finish_dir(&mut self, listed: &ListedDir) -> Result<(), Fault> {
        let name = file_name(&listed.path)?;
        let dir = match enter(self.parent_of(&listed.path)?, name, &listed.path, false) {
            // Moved away or removed by a process of the sandbox meanwhile.
            Err(Fault::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            dir => dir?,
        };
        let wanted = listed.mode & 0o777 | 0o500;
        match listed.created {
            Some(created) => at::set_mode(dir.file(), created, wanted)?,
            None => dir.file().set_permissions(Permissions::from_mode(wanted))?,
        }
        let time = file_time(listed.mtime);
        let _ = filetime::set_file_handle_times(dir.file(), Some(time), Some(time));
        Ok(())
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), Fault> {
        let kind = entry.header().entry_type();
        if kind == EntryType::XGlobalHeader {
            // Metadata about the whole archive (`git archive` writes one).
            return Ok(());
        }
        let path = relative(&entry.path_bytes())?;
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
        let len = path.as_os_str().len();
        if len > self.room {
            return Err(Fault::Refused(format!(
                "the path is {len} bytes long, and a restore here creates paths of at most {} \
                 bytes",
                self.room
            )));
        }
        let name = file_name(&path)?;
        let twice = |e: io::Error| match e.kind() {
            io::ErrorKind::AlreadyExists => Fault::Refused("listed twice".into()),
            _ => Fault::Io(e),
        };
        match kind {
            EntryType::Directory => {
                let parent = self.parent_of(&path)?;
                let created = mode & 0o777 | 0o700;
                let created = match parent.make_dir(name, created) {
                    Ok(()) => Some(created),
                    // Listed again, or made as a directory above an entry
                    // before: still a directory, and taken.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        if parent.kind(name)? != Kind::Dir {
                            return Err(twice(e));
                        }
                        None
                    }
                    Err(e) => return Err(e.into()),
                };
                self.dirs.push(ListedDir {
                    path,
                    created,
                    mode,
                    mtime,
                });
            }
            EntryType::Regular => {
                let wanted = mode & 0o777 | 0o400;
                let mut file = self
                    .parent_of(&path)?
                    .create_file(name, wanted)
                    .map_err(twice)?;
                let size = self.copy(entry, &mut file)?;
                if size != entry.size() {
                    return Err(Fault::Refused("the archive ends inside this file".into()));
                }
                self.restored.bytes += size;
                at::set_mode(&file, wanted, wanted)?;
                // Best effort, as for every time.
                let time = file_time(mtime);
                let _ = filetime::set_file_handle_times(&file, Some(time), Some(time));
                self.restored.files += 1;
            }
            EntryType::Symlink => {
                let target = match entry.link_name_bytes() {
                    Some(target) if !target.is_empty() => target.into_owned(),
                    _ => return Err(Fault::Refused("a symlink without a target".into())),
                };
                let parent = self.parent_of(&path)?;
                parent
                    .symlink(OsStr::from_bytes(&target), name)
                    .map_err(twice)?;
                let _ = parent.set_times_of(name, seconds(mtime));
            }
            EntryType::Fifo => {
                let wanted = mode & 0o777 | 0o400;
                let parent = self.parent_of(&path)?;
                parent.make_fifo(name, wanted).map_err(twice)?;
                let fifo = parent.open_fifo(name)?;
                at::set_mode(&fifo, wanted, wanted)?;
                let time = file_time(mtime);
                let _ = filetime::set_file_handle_times(&fifo, Some(time), Some(time));
            }
            EntryType::Link => return Err(Fault::Refused("hard links are not accepted".into())),
            EntryType::Char | EntryType::Block => {
                return Err(Fault::Refused("device files are not accepted".into()))
            }
            other => {
                return Err(Fault::Refused(format!(
                    "entry type {:?} is not accepted, only directories, files, symlinks and \
                     fifos",
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

    /// The directory `path` (relative to `dest`) goes into, open, every
    /// directory on the way a real one (missing ones are created).
    fn parent_of(&mut self, path: &Path) -> Result<&Dir, Fault> {
        let parent = path.parent().unwrap_or(Path::new(""));
        if parent.as_os_str().is_empty() {
            return Ok(&self.root);
        }
        // The one before is closed once this one is open: a restore holds
        // a few directories open, however deep the tree.
        let last = match self.last.take() {
            Some((last, dir)) if last == parent => (last, dir),
            _ => (parent.to_path_buf(), self.walk(parent)?),
        };
        Ok(&self.last.insert(last).1)
    }

    /// Opens the directory `path` (relative to `dest`, not empty) name by
    /// name, creating missing ones, never following a symlink.
    fn walk(&self, path: &Path) -> Result<Dir, Fault> {
        let mut dir = self.root.try_clone()?;
        let mut at = PathBuf::new();
        for name in path {
            at.push(name);
            dir = enter(&dir, name, &at, true)?;
        }
        Ok(dir)
    }
}

/// Opens the directory `name` in `dir` (`at` in the archive), creating it
/// first if missing and `make`; refuses a symlink or anything else there.
/// A process of the sandbox may move a directory away between its making
/// and its opening: it is made again, [`MAKE_TRIES`] times at most.
fn enter(dir: &Dir, name: &OsStr, at: &Path, make: bool) -> Result<Dir, Fault> {
    let mut tries = 0;
    let opened = loop {
        match dir.open_dir(name) {
            Err(e) if make && e.kind() == io::ErrorKind::NotFound && tries < MAKE_TRIES => {
                tries += 1;
                match dir.make_dir(name, 0o777) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => break Err(e),
                    _ => continue,
                }
            }
            opened => break opened,
        }
    };
    opened.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) if make => Fault::Refused(format!(
            "{} was moved away while it was restored",
            at.display()
        )),
        Some(libc::ELOOP | libc::ENOTDIR) => {
            let what = match dir.kind(name) {
                Ok(Kind::Symlink) => "a symlink",
                _ => "not a directory",
            };
            Fault::Refused(format!("{} is {what}", at.display()))
        }
        _ => Fault::Io(e),
    })
}

/// How often a directory moved away as it is made is made again.
const MAKE_TRIES: u32 = 8;

/// The last name of a path that has one.
fn file_name(path: &Path) -> Result<&OsStr, Fault> {
    path.file_name()
        .ok_or_else(|| Fault::Refused("the path has no name".into()))
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

fn seconds(mtime: u64) -> i64 {
    i64::try_from(mtime).unwrap_or(i64::MAX)
}

fn file_time(mtime: u64) -> FileTime {
    FileTime::from_unix_time(seconds(mtime), 0)
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
