//! Workspace archives: a round trip through GET and PUT, and every kind of
//! hostile archive refused without touching the workspace.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Value};
use tar::{EntryType, Header};

use crate::harness::{pid_is_gone, timed, Server};

const FRESH_NOTE: &str = "sandboxd: the shell ended (its workspace was restored from an \
     archive); this command ran in a fresh shell in the same workspace (files kept; working \
     directory, variables and background jobs reset)\n";

pub fn archive_path(name: &str) -> String {
    format!("/v1/sandboxes/{name}/archive")
}

/// GETs the archive; returns status, head and body.
pub fn get(server: &Server, name: &str, query: &str) -> (u16, String, Vec<u8>) {
    let request = format!(
        "GET {}{query} HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n",
        archive_path(name)
    );
    server.send_with_head(request.as_bytes())
}

pub fn get_ok(server: &Server, name: &str) -> Vec<u8> {
    let (status, head, body) = get(server, name, "");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: application/gzip"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", body.len())),
        "{head}"
    );
    body
}

/// GETs the archive, which must be sent; returns its head and body.
pub fn get_with_head(server: &Server, name: &str) -> (String, Vec<u8>) {
    let (status, head, body) = get(server, name, "");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    (head, body)
}

/// The value of the response header `name` in `head`, if there.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}

pub fn put(server: &Server, name: &str, body: &[u8]) -> (u16, Value) {
    let (status, bytes) = server.chunked("PUT", &archive_path(name), body, 64 * 1024);
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("non-JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// What a tree holds, entry by entry: kind, mode, mtime and content (a
/// hash of a file's bytes, a symlink's target).
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, (char, u32, i64, String)> {
    let mut entries = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("lstat");
            let (kind, content) = if meta.is_dir() {
                dirs.push(path.clone());
                ('d', String::new())
            } else if meta.is_symlink() {
                let target = fs::read_link(&path).expect("readlink");
                ('l', target.display().to_string())
            } else {
                let mut hasher = DefaultHasher::new();
                fs::read(&path).expect("read").hash(&mut hasher);
                ('f', format!("{:x}", hasher.finish()))
            };
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            entries.insert(rel, (kind, meta.mode() & 0o7777, meta.mtime(), content));
        }
    }
    entries
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut bytes = vec![0; n];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("urandom");
    bytes
}

/// Entries of a gzipped tar: path, type, link target.
pub fn entries(archive: &[u8]) -> Vec<(String, EntryType, Option<String>)> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    tar.entries()
        .expect("entries")
        .map(|e| {
            let e = e.expect("entry");
            let path = String::from_utf8(e.path_bytes().into_owned()).expect("utf-8");
            let link = e
                .link_name_bytes()
                .map(|l| String::from_utf8(l.into_owned()).expect("utf-8"));
            (path, e.header().entry_type(), link)
        })
        .collect()
}

#[test]
fn a_workspace_survives_a_round_trip_through_an_archive() {
    let server = Server::start();
    let ws = server.workspace("trip");
    let setup = "mkdir -p src/nested/deeper empty 'ünï cödé' \
         && printf 'hello\\n' > src/a.txt && chmod 640 src/a.txt \
         && printf '#!/bin/sh\\necho ran\\n' > src/run.sh && chmod 755 src/run.sh \
         && ln -s ../a.txt src/nested/link && ln -s nested src/dirlink \
         && echo 🌍 > 'ünï cödé/文件.txt' && head -c 20000000 /dev/urandom > big.bin \
         && touch -d '2020-01-02 03:04:05' src/a.txt \
         && touch -h -d '2021-06-07 08:09:10' src/nested/link \
         && chmod 750 src/nested/deeper && touch -d '2019-05-05' src/nested empty";
    let r = server.exec("trip", setup);
    assert_eq!(r.exit_code, 0, "{r:?}");
    let before = snapshot(&ws);
    assert_eq!(before.len(), 11, "{before:?}");
    let bytes: u64 = before
        .iter()
        .filter(|(_, (kind, ..))| *kind == 'f')
        .map(|(path, _)| fs::metadata(ws.join(path)).unwrap().len())
        .sum();

    let archive = get_ok(&server, "trip");
    let listed = entries(&archive);
    assert!(listed
        .iter()
        .all(|(p, ..)| !p.starts_with('/') && !p.starts_with("./")));
    assert!(listed.contains(&(
        "src/nested/link".into(),
        EntryType::Symlink,
        Some("../a.txt".into())
    )));

    assert_eq!(server.destroy("trip").0, 200);
    assert!(!ws.exists());
    let (status, value) = put(&server, "trip", &archive);
    assert_eq!(status, 200, "{value}");
    assert_eq!(
        value,
        json!({ "restored": true, "files": 4, "bytes": bytes })
    );
    assert_eq!(snapshot(&ws), before);
    // Nothing else is left under the root.
    assert_eq!(fs::read_dir(server.root()).unwrap().count(), 1);

    let r = server.exec(
        "trip",
        "cat src/nested/link src/dirlink/link; ./src/run.sh; cat 'ünï cödé/文件.txt'; \
         ls -A empty; echo \"$PWD\"",
    );
    assert_eq!(
        r.stdout,
        format!("hello\nhello\nran\n🌍\n{}\n", ws.display())
    );
    assert_eq!(r.stderr, "", "a sandbox without a shell gets no note");
}

#[test]
fn packing_keeps_every_symlink_and_fifo_and_names_what_it_leaves_out() {
    let server = Server::start();
    let ws = server.workspace("odd");
    let r = server.exec(
        "odd",
        "mkdir sub && echo x > sub/f && mkfifo fifo && ln -s /etc abs && ln -s ../.. up \
         && ln -s sub inner && ln -s inner/../.. through && ln -s missing dangling",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).expect("socket");
    let (head, archive) = get_with_head(&server, "odd");
    let mut names: Vec<(String, EntryType)> = entries(&archive)
        .into_iter()
        .map(|(p, kind, _)| (p, kind))
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let symlink = EntryType::Symlink;
    assert_eq!(
        names,
        [
            ("abs".to_string(), symlink),
            ("dangling".into(), symlink),
            ("fifo".into(), EntryType::Fifo),
            ("inner".into(), symlink),
            ("sub".into(), EntryType::Directory),
            ("sub/f".into(), EntryType::Regular),
            ("through".into(), symlink),
            ("up".into(), symlink),
        ]
    );
    assert_eq!(
        header(&head, "x-duet-left-out").as_deref(),
        Some("1 entry not kept (sockets and device files cannot be archived): sock (socket)")
    );
}

#[test]
fn a_restore_ends_a_live_shell_and_the_next_command_is_told() {
    let server = Server::start();
    let ws = server.workspace("live");
    server.exec("live", "echo one > f; mkdir sub; cd sub; X=1");
    let pid = server.shell_pid("live");
    let archive = get_ok(&server, "live");
    server.exec("live", "echo two > ../f; touch ../new");

    let (status, value) = put(&server, "live", &archive);
    assert_eq!(status, 200, "{value}");
    assert!(pid_is_gone(pid, Duration::from_secs(1)), "old shell lives");
    let r = server.exec("live", "cat f; ls; echo ${X:-fresh} \"$PWD\"");
    assert_eq!(r.stdout, format!("one\nf\nsub\nfresh {}\n", ws.display()));
    assert_eq!(r.stderr, FRESH_NOTE);
    // Said once.
    assert_eq!(server.exec("live", "true").stderr, "");
}

#[test]
fn a_restore_waits_for_the_running_command() {
    let server = Arc::new(Server::start());
    server.exec("queue", "echo kept > f");
    let archive = get_ok(&server, "queue");
    let runner = {
        let server = Arc::clone(&server);
        thread::spawn(move || server.exec("queue", "sleep 0.6; echo late > late"))
    };
    thread::sleep(Duration::from_millis(200));
    let ((status, value), took) = timed(|| put(&server, "queue", &archive));
    assert_eq!(status, 200, "{value}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(runner.join().unwrap().success);
    let r = server.exec("queue", "ls");
    assert_eq!(r.stdout, "f\n", "the command ran before the restore");
}

#[test]
fn archive_errors() {
    let server = Server::start_with(&["--max-archive-bytes", "5000"], &[]);
    let (status, _, body) = get(&server, "nobody", "");
    assert_eq!(status, 404);
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(value["error"], "sandbox nobody has no workspace");
    assert_eq!(fs::read_dir(server.root()).unwrap().count(), 0);

    server.exec("big", "head -c 200000 /dev/urandom > noise");
    for (query, cap) in [
        ("", 5000),
        ("?maxBytes=1000", 1000),
        ("?maxBytes=99999", 5000),
    ] {
        let (status, _, body) = get(&server, "big", query);
        assert_eq!(status, 413, "{query}");
        let value: Value = serde_json::from_slice(&body).unwrap();
        let error = value["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("larger than {cap} bytes")),
            "{error}"
        );
    }
    for query in ["?maxBytes=0", "?maxBytes=lots", "?max=1"] {
        assert_eq!(get(&server, "big", query).0, 400, "{query}");
    }
    let (status, value) = server.json("POST", &archive_path("big"), "");
    assert_eq!(status, 405, "{value}");
    assert!(value["error"].as_str().unwrap().contains("GET, PUT"));
    // Only the workspace: the scratch file is gone.
    assert_eq!(fs::read_dir(server.root()).unwrap().count(), 1);
}

/// A tar entry with a raw name, built below the checks of the tar crate's
/// convenience API.
pub fn raw_entry(
    name: &str,
    kind: EntryType,
    link: Option<&str>,
    data: &[u8],
) -> (Header, Vec<u8>) {
    let mut header = Header::new_gnu();
    let gnu = header.as_gnu_mut().expect("gnu header");
    gnu.name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(1_700_000_000);
    if let Some(link) = link {
        header.set_link_name(link).expect("link name");
    }
    if matches!(kind, EntryType::Char | EntryType::Block) {
        header.set_device_major(1).unwrap();
        header.set_device_minor(3).unwrap();
    }
    header.set_cksum();
    (header, data.to_vec())
}

pub fn tar_of(entries: &[(Header, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (header, data) in entries {
        builder.append(header, data.as_slice()).expect("append");
    }
    builder.into_inner().expect("finish tar")
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(bytes).expect("gzip");
    gz.finish().expect("gzip")
}

pub fn file(name: &str, data: &[u8]) -> (Header, Vec<u8>) {
    raw_entry(name, EntryType::Regular, None, data)
}

pub fn link(name: &str, target: &str) -> (Header, Vec<u8>) {
    raw_entry(name, EntryType::Symlink, Some(target), b"")
}

pub fn dir(name: &str) -> (Header, Vec<u8>) {
    raw_entry(name, EntryType::Directory, None, b"")
}

#[test]
fn hostile_archives_are_refused_and_change_nothing() {
    // Restores may unpack to 4 MiB.
    let server = Server::start_with(&["--max-archive-bytes", "1048576"], &[]);
    let ws = server.workspace("victim");
    server.exec("victim", "echo precious > keep.txt; mkdir sub; X=still");
    let pid = server.shell_pid("victim");
    let before = snapshot(&ws);
    // Where an archive's symlinks lead, to show that nothing is written there:
    // a sibling of the server's root, which is `..` from the restore's
    // scratch directory.
    let outside_dir = tempfile::tempdir().expect("tempdir");
    let outside = outside_dir.path().canonicalize().unwrap();
    assert_eq!(outside.parent(), server.root().parent());
    let outside_name = outside.file_name().unwrap().to_str().unwrap().to_string();
    let outside = outside.to_str().unwrap().to_string();

    let ok = file("fine.txt", b"fine");
    let valid = gzip(&tar_of(&[
        ok.clone(),
        file("noise", &random_bytes(100_000)),
    ]));
    let mut corrupt = valid.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    let cut_tar = tar_of(&[ok.clone(), file("f", &[7; 5000])]);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "parent",
            gzip(&tar_of(&[ok.clone(), file("../x", b"x")])),
            400,
            "../x: the path contains ..",
        ),
        (
            "absolute",
            gzip(&tar_of(&[file("/etc/x", b"x")])),
            400,
            "/etc/x: the path is absolute",
        ),
        (
            "climb",
            gzip(&tar_of(&[file("a/../../x", b"x")])),
            400,
            "a/../../x: the path contains ..",
        ),
        (
            "below a link to /",
            gzip(&tar_of(&[
                link("a", "/"),
                file(&format!("a{outside}/x"), b"x"),
            ])),
            400,
            "a is a symlink",
        ),
        (
            "below an absolute link",
            gzip(&tar_of(&[link("l", &outside), file("l/x", b"x")])),
            400,
            "l/x: l is a symlink",
        ),
        (
            "below a link out",
            gzip(&tar_of(&[
                link("a", "../.."),
                file(&format!("a/{outside_name}/x"), b"x"),
            ])),
            400,
            "a is a symlink",
        ),
        (
            "a directory below a link to ..",
            gzip(&tar_of(&[link("l", ".."), dir("l/d")])),
            400,
            "l/d: l is a symlink",
        ),
        (
            "deep below a link",
            gzip(&tar_of(&[
                dir("d"),
                link("d/up", &outside),
                file("d/up/x/y", b"x"),
            ])),
            400,
            "d/up/x/y: d/up is a symlink",
        ),
        (
            "below a link inside",
            gzip(&tar_of(&[dir("d"), link("l", "d"), file("l/x", b"x")])),
            400,
            "l/x: l is a symlink",
        ),
        (
            "a link then a directory of its name",
            gzip(&tar_of(&[link("l", &outside), dir("l"), file("l/x", b"x")])),
            400,
            "l: listed twice",
        ),
        (
            "a link then a file of its name",
            gzip(&tar_of(&[
                link("l", &format!("{outside}/x")),
                file("l", b"x"),
            ])),
            400,
            "l: listed twice",
        ),
        (
            "a link over a directory",
            gzip(&tar_of(&[dir("d"), file("d/f", b"x"), link("d", &outside)])),
            400,
            "d: listed twice",
        ),
        (
            "a NUL in a link's target",
            gzip(&tar_of(&[
                raw_entry("././@LongLink", EntryType::GNULongLink, None, b"a\0b\0"),
                link("nul", "x"),
            ])),
            400,
            "nul: the name contains a NUL byte",
        ),
        (
            "a link over a file",
            gzip(&tar_of(&[
                ok.clone(),
                link("fine.txt", &format!("{outside}/x")),
            ])),
            400,
            "fine.txt: listed twice",
        ),
        (
            "hard link",
            gzip(&tar_of(&[
                ok.clone(),
                raw_entry("h", EntryType::Link, Some("fine.txt"), b""),
            ])),
            400,
            "h: hard links are not accepted",
        ),
        (
            "char device",
            gzip(&tar_of(&[raw_entry("null", EntryType::Char, None, b"")])),
            400,
            "null: device files are not accepted",
        ),
        (
            "block device",
            gzip(&tar_of(&[raw_entry("sda", EntryType::Block, None, b"")])),
            400,
            "sda: device files are not accepted",
        ),
        (
            "a fifo over a file",
            gzip(&tar_of(&[
                ok.clone(),
                raw_entry("fine.txt", EntryType::Fifo, None, b""),
            ])),
            400,
            "fine.txt: listed twice",
        ),
        (
            "a file below a fifo",
            gzip(&tar_of(&[
                raw_entry("p", EntryType::Fifo, None, b""),
                file("p/x", b"x"),
            ])),
            400,
            "p/x: p is not a directory",
        ),
        (
            "odd type",
            gzip(&tar_of(&[raw_entry("c", EntryType::Continuous, None, b"")])),
            400,
            "c: entry type '7' is not accepted",
        ),
        (
            "twice",
            gzip(&tar_of(&[ok.clone(), ok.clone()])),
            400,
            "fine.txt: listed twice",
        ),
        (
            "file over dir",
            gzip(&tar_of(&[dir("d"), file("d", b"x")])),
            400,
            "d: listed twice",
        ),
        (
            "bomb",
            gzip(&tar_of(&[file("zeros", &vec![0; 20 << 20])])),
            413,
            "unpacks to more than 4194304 bytes",
        ),
        (
            "truncated gzip",
            valid[..valid.len() / 2].to_vec(),
            400,
            "archive refused: the gzip stream is not valid",
        ),
        (
            "corrupt gzip",
            corrupt,
            400,
            "archive refused: the gzip stream is not valid",
        ),
        (
            "not gzip",
            b"just some text".to_vec(),
            400,
            "archive refused: the gzip stream is not valid",
        ),
        (
            "empty body",
            Vec::new(),
            400,
            "archive refused: the gzip stream is not valid",
        ),
        (
            "trailing data",
            [valid.as_slice(), b"junk"].concat(),
            400,
            "data follows the end of the gzip stream",
        ),
        (
            "cut tar",
            gzip(&cut_tar[..2048]),
            400,
            "f: the archive ends inside this file",
        ),
        (
            "oversize body",
            gzip(&tar_of(&[file("noise", &random_bytes(2 << 20))])),
            413,
            "larger than 1048576 bytes",
        ),
    ];
    for (label, body, status, needle) in cases {
        let (got, value) = put(&server, "victim", &body);
        assert_eq!(got, status, "{label}: {value}");
        let error = value["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{label}: {error}");
        assert_eq!(snapshot(&ws), before, "{label}");
        let names: Vec<_> = fs::read_dir(server.root())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["victim"], "{label}");
    }
    // A declared length over the cap is refused before any of it is read.
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: s\r\nConnection: close\r\nContent-Length: 1048577\r\n\r\n",
        archive_path("victim")
    );
    let (status, body) = server.send(head.as_bytes());
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));

    // Nothing was written outside either.
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    // The shell was never touched.
    assert_eq!(server.shell_pid("victim"), pid);
    assert_eq!(server.exec("victim", "echo $X").stdout, "still\n");
    // And a good archive still goes in.
    let (status, value) = put(&server, "victim", &valid);
    assert_eq!(status, 200, "{value}");
    assert_eq!(fs::read_to_string(ws.join("fine.txt")).unwrap(), "fine");
}

#[test]
fn restored_permissions_are_sane() {
    let server = Server::start();
    let mode = |mode: u32, entry: (Header, Vec<u8>)| {
        let (mut header, data) = entry;
        header.set_mode(mode);
        header.set_uid(0);
        header.set_cksum();
        (header, data)
    };
    let archive = gzip(&tar_of(&[
        mode(0o4755, file("setuid", b"x")),
        mode(0o2644, file("setgid", b"x")),
        mode(0o000, file("locked", b"x")),
        mode(0o1777, dir("sticky")),
        mode(0o000, dir("closed")),
        mode(0o644, file("closed/inside", b"x")),
    ]));
    let (status, value) = put(&server, "perm", &archive);
    assert_eq!(status, 200, "{value}");
    let ws = server.workspace("perm");
    let uid = fs::metadata(server.root()).unwrap().uid();
    for (name, want) in [
        ("setuid", 0o755),
        ("setgid", 0o644),
        ("locked", 0o400),
        ("sticky", 0o777),
        ("closed", 0o500),
        ("closed/inside", 0o644),
    ] {
        let meta = fs::symlink_metadata(ws.join(name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, want, "{name}");
        assert_eq!(meta.uid(), uid, "{name}");
    }
    // And it can be archived again, and destroyed.
    get_ok(&server, "perm");
    assert_eq!(server.destroy("perm").0, 200);
}
