//! Files by path: round trips, listings, ranges, atomic writes, deletes,
//! and every way out of the workspace refused.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use duet_wire::file::{EntryKind, FileList, MAX_FILE_BYTES, MAX_LIST_ENTRIES};
use serde_json::Value;

use crate::archive::header;
use crate::harness::Server;

const MIB: usize = 1024 * 1024;

/// The route for `path`, percent-encoded (`/` kept).
fn files_path(name: &str, path: &str) -> String {
    let mut encoded = String::new();
    for &b in path.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("/v1/sandboxes/{name}/files?path={encoded}")
}

/// GETs `path` (with a `Range` header if given): status, head, body.
fn get(server: &Server, name: &str, path: &str, range: Option<&str>) -> (u16, String, Vec<u8>) {
    let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: s\r\nConnection: close\r\n{range}\r\n",
        files_path(name, path)
    );
    server.send_with_head(request.as_bytes())
}

fn read(server: &Server, name: &str, path: &str) -> Vec<u8> {
    let (status, head, body) = get(server, name, path, None);
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    assert_eq!(
        header(&head, "content-length").as_deref(),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(
        header(&head, "content-type").as_deref(),
        Some("application/octet-stream")
    );
    body
}

fn list(server: &Server, name: &str, path: &str) -> FileList {
    let (status, _, body) = get(server, name, path, None);
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("a listing")
}

fn put(server: &Server, name: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let (status, body) = server.raw("PUT", &files_path(name, path), body);
    (status, serde_json::from_slice(&body).expect("JSON"))
}

fn write(server: &Server, name: &str, path: &str, body: &[u8]) {
    let (status, value) = put(server, name, path, body);
    assert_eq!(status, 200, "{path}: {value}");
    assert_eq!(value["size"], body.len() as u64, "{value}");
}

fn delete(server: &Server, name: &str, path: &str, recursive: bool) -> (u16, Value) {
    let mut route = files_path(name, path);
    if recursive {
        route.push_str("&recursive=true");
    }
    server.json("DELETE", &route, "")
}

/// A sandboxd whose sandbox `r` holds `files`, written through the route,
/// and then what its shell's `setup` made.
fn room(files: &[(&str, &[u8])], setup: &str) -> Server {
    let server = Server::start();
    for (path, body) in files {
        write(&server, "r", path, body);
    }
    let ran = server.exec("r", setup);
    assert_eq!(ran.exit_code, 0, "{ran:?}");
    server
}

/// Every status of a GET, a PUT and a DELETE of `path`.
fn statuses(server: &Server, name: &str, path: &str) -> [u16; 3] {
    [
        get(server, name, path, None).0,
        put(server, name, path, b"x").0,
        delete(server, name, path, false).0,
    ]
}

#[test]
fn files_round_trip_whole_and_exact() {
    let server = Server::start();
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let max = vec![0xA5; MAX_FILE_BYTES as usize];
    let cases: [(&str, &[u8]); 5] = [
        ("hello.txt", b"hello, world\n"),
        ("bin/every-byte", &all_bytes),
        ("deep/er/still/empty", b""),
        ("name with spaces & %.txt", b"odd name"),
        ("max.bin", &max),
    ];
    for (path, body) in cases {
        write(&server, "r", path, body);
        assert_eq!(read(&server, "r", path), body, "{path}");
        assert_eq!(fs::read(server.workspace("r").join(path)).unwrap(), body);
    }
    // Overwritten, shorter.
    write(&server, "r", "hello.txt", b"bye");
    assert_eq!(read(&server, "r", "./hello.txt"), b"bye");

    // As the shell would create it: same owner, same mode.
    server.exec("r", "touch by-shell");
    let ws = server.workspace("r");
    let (mine, shells) = (
        fs::metadata(ws.join("hello.txt")).unwrap(),
        fs::metadata(ws.join("by-shell")).unwrap(),
    );
    assert_eq!(mine.mode() & 0o7777, shells.mode() & 0o7777);
    assert_eq!((mine.uid(), mine.gid()), (shells.uid(), shells.gid()));
    // An existing file keeps its mode.
    fs::set_permissions(ws.join("hello.txt"), fs::Permissions::from_mode(0o750)).unwrap();
    write(&server, "r", "hello.txt", b"#!/bin/sh\n");
    assert_eq!(
        fs::metadata(ws.join("hello.txt")).unwrap().mode() & 0o7777,
        0o750
    );

    // One byte over, streamed (no length said) or declared: 413, nothing
    // written, nothing left behind.
    let over = vec![1u8; MAX_FILE_BYTES as usize + 1];
    let (status, body) = server.chunked("PUT", &files_path("r", "over.bin"), &over, 256 * 1024);
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: s\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        files_path("r", "over.bin"),
        over.len()
    );
    assert_eq!(server.send(head.as_bytes()).0, 413);
    assert!(!ws.join("over.bin").exists());
    write(&server, "r", "max.bin", b"small again");
    let names: Vec<String> = list(&server, "r", "")
        .entries
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        [
            "bin",
            "by-shell",
            "deep",
            "hello.txt",
            "max.bin",
            "name with spaces & %.txt"
        ]
    );

    // A file larger than a whole read takes: 413, asking for a range.
    fs::write(ws.join("big"), vec![0; MAX_FILE_BYTES as usize + 1]).unwrap();
    let (status, _, body) = get(&server, "r", "big", None);
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("range"));

    // Writing where a directory is, or under a file: 409. Missing: 404.
    assert_eq!(put(&server, "r", "deep", b"x").0, 409);
    assert_eq!(put(&server, "r", "", b"x").0, 409);
    assert_eq!(put(&server, "r", "hello.txt/x", b"x").0, 409);
    assert_eq!(get(&server, "r", "nope", None).0, 404);
    assert_eq!(get(&server, "r", "hello.txt/x", None).0, 404);
    // A fifo is neither read (without blocking) nor written.
    server.exec("r", "mkfifo pipe");
    assert_eq!(get(&server, "r", "pipe", None).0, 409);
    assert_eq!(put(&server, "r", "pipe", b"x").0, 409);

    // A sandbox never used has an empty workspace, made on first use.
    let fresh = list(&server, "new-room", "");
    assert_eq!((fresh.path.as_str(), fresh.entries.len()), ("", 0));
    assert!(server.workspace("new-room").is_dir());
    // Bad sandbox names, methods and queries.
    assert_eq!(
        server.json("GET", "/v1/sandboxes/a%2Fb/files?path=x", "").0,
        400
    );
    assert_eq!(server.json("POST", &files_path("r", "x"), "").0, 405);
    assert_eq!(server.json("GET", "/v1/sandboxes/r/files", "").0, 400);
    assert_eq!(
        server
            .json("GET", &(files_path("r", "x") + "&recursive=true"), "")
            .0,
        400
    );
}

#[test]
fn listings_are_sorted_typed_and_bounded() {
    let server = room(
        &[("d/b.txt", b"12345"), ("d/a.txt", b""), ("d/sub/x", b"x")],
        "cd d && ln -s a.txt link && mkfifo fifo && touch -d @0 a.txt",
    );
    let listing = list(&server, "r", "./d/");
    assert_eq!(listing.path, "d");
    assert!(!listing.truncated);
    let seen: Vec<(&str, EntryKind, u64)> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        seen,
        [
            ("a.txt", EntryKind::File, 0),
            ("b.txt", EntryKind::File, 5),
            ("fifo", EntryKind::Other, 0),
            ("link", EntryKind::Symlink, 5),
            ("sub", EntryKind::Dir, seen[4].2),
        ]
    );
    assert_eq!(listing.entries[0].mtime, "1970-01-01T00:00:00.000Z");
    // A link to a directory inside is followed.
    server.exec("r", "cd .. && ln -s d/sub subl");
    assert_eq!(list(&server, "r", "subl").entries[0].name, "x");

    // Truncated at the first MAX_LIST_ENTRIES names.
    let many = server.workspace("r").join("many");
    fs::create_dir(&many).unwrap();
    for i in 0..=MAX_LIST_ENTRIES {
        fs::write(many.join(format!("f{i:04}")), "").unwrap();
    }
    let listing = list(&server, "r", "many");
    assert!(listing.truncated);
    assert_eq!(listing.entries.len(), MAX_LIST_ENTRIES);
    assert_eq!(listing.entries[0].name, "f0000");
    assert_eq!(listing.entries[MAX_LIST_ENTRIES - 1].name, "f0999");
}

#[test]
fn ranges_read_parts_of_any_size() {
    let server = Server::start();
    let digits: Vec<u8> = b"0123456789".to_vec();
    write(&server, "r", "ten", &digits);
    for (range, part, content_range) in [
        ("bytes=2-5", &b"2345"[..], "bytes 2-5/10"),
        ("bytes=7-", b"789", "bytes 7-9/10"),
        ("bytes=-3", b"789", "bytes 7-9/10"),
        ("bytes=0-99", b"0123456789", "bytes 0-9/10"),
        ("bytes=9-9", b"9", "bytes 9-9/10"),
    ] {
        let (status, head, body) = get(&server, "r", "ten", Some(range));
        assert_eq!(status, 206, "{range}");
        assert_eq!(body, part, "{range}");
        assert_eq!(
            header(&head, "content-range").as_deref(),
            Some(content_range)
        );
        assert_eq!(
            header(&head, "content-length").as_deref(),
            Some(part.len().to_string().as_str())
        );
    }
    for range in ["bytes=10-", "bytes=50-60", "bytes=-0"] {
        let (status, head, _) = get(&server, "r", "ten", Some(range));
        assert_eq!(status, 416, "{range}");
        assert_eq!(
            header(&head, "content-range").as_deref(),
            Some("bytes */10")
        );
    }
    assert_eq!(get(&server, "r", "ten", Some("bytes=0-1,4-5")).0, 400);
    assert_eq!(get(&server, "r", "ten", Some("lines=1-2")).0, 400);

    // A file larger than a whole read, read in parts.
    let size = MAX_FILE_BYTES as usize + 3 * MIB;
    let big: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    fs::write(server.workspace("r").join("big"), &big).unwrap();
    let (status, head, body) = get(&server, "r", "big", Some("bytes=9437184-"));
    assert_eq!(status, 206);
    assert_eq!(body, &big[9 * MIB..]);
    assert_eq!(
        header(&head, "content-range"),
        Some(format!("bytes {}-{}/{size}", 9 * MIB, size - 1))
    );
    let (status, _, body) = get(&server, "r", "big", Some("bytes=-100"));
    assert_eq!((status, &body[..]), (206, &big[size - 100..]));
}

#[test]
fn a_reader_sees_the_old_file_or_the_new_one_whole() {
    let server = Server::start();
    let old = vec![b'o'; 3 * MIB];
    let new = vec![b'n'; 2 * MIB + 17];
    write(&server, "r", "f", &old);
    let server = Arc::new(server);
    let writing = {
        let (server, old, new) = (Arc::clone(&server), old.clone(), new.clone());
        thread::spawn(move || {
            for i in 0..12 {
                write(&server, "r", "f", if i % 2 == 0 { &new } else { &old });
            }
        })
    };
    let mut reads = 0;
    while !writing.is_finished() || reads < 5 {
        let body = read(&server, "r", "f");
        assert!(body == old || body == new, "a read of {} bytes", body.len());
        reads += 1;
    }
    writing.join().unwrap();
    // No temporary file is left beside it.
    let names: Vec<_> = fs::read_dir(server.workspace("r")).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn deletes_take_files_links_and_empty_directories_and_trees_when_asked() {
    let server = room(
        &[("f", b"x"), ("tree/a/b/c", b"x"), ("tree/top", b"x")],
        "mkdir empty && ln -s f link && ln -s tree tree/loop && chmod 500 tree/a/b",
    );
    let ws = server.workspace("r");
    let deleted = |path, recursive| {
        let (status, value) = delete(&server, "r", path, recursive);
        assert_eq!(status, 200, "{path}: {value}");
        assert_eq!(value["deleted"], true);
        assert_eq!(value["path"], path);
    };
    deleted("link", false);
    assert!(ws.join("f").exists(), "the link went, not its target");
    deleted("f", false);
    deleted("empty", false);
    let (status, value) = delete(&server, "r", "tree", false);
    assert_eq!(status, 409, "{value}");
    assert!(value["error"].as_str().unwrap().contains("recursive"));
    deleted("tree", true);
    assert_eq!(fs::read_dir(&ws).unwrap().count(), 0);
    assert_eq!(delete(&server, "r", "tree", true).0, 404);
    assert_eq!(delete(&server, "r", "", true).0, 400);
    assert_eq!(delete(&server, "r", ".", true).0, 400);
    assert!(ws.is_dir());
}

/// A directory outside every workspace, with a secret in it.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("secret"), "SECRET").unwrap();
    dir
}

fn untouched(dir: &Path) {
    let mut names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["secret"], "something was written outside");
    assert_eq!(fs::read_to_string(dir.join("secret")).unwrap(), "SECRET");
}

#[test]
fn no_path_leads_outside_the_workspace() {
    let server = Server::start();
    let out = outside();
    let o = out.path().display().to_string();
    write(&server, "victim", "secret.txt", b"other room");
    write(&server, "r", "sub/real.txt", b"inside");
    let setup = format!(
        "ln -s / root && ln -s /etc/passwd pw && ln -s {o} mid && ln -s {o}/secret abs \
         && ln -s l2 l1 && ln -s mid/secret l2 && ln -s ../../.. sub/up \
         && ln -s ../victim/secret.txt peek && ln -s {o}/new dangling \
         && ln -s ../victim/new.txt dangling2 && ln -s sub/real.txt alias \
         && ln -s alias alias2 && ln -s sub sublink && ln -s loop loop"
    );
    let ran = server.exec("r", &setup);
    assert_eq!(ran.exit_code, 0, "{ran:?}");
    let passwd = fs::read("/etc/passwd").unwrap();

    // Refused as paths: 400 for every method.
    for path in [
        "..",
        "../x",
        "a/../../x",
        "sub/../../victim/secret.txt",
        "/etc/passwd",
        "/",
        "a\0b",
    ] {
        assert_eq!(statuses(&server, "r", path), [400; 3], "{path:?}");
    }
    assert_eq!(statuses(&server, "r", &"a".repeat(5000)), [400; 3]);

    // Through a symlink, in any position: 403 to read or write, whatever
    // is (or is not) there.
    for path in [
        "root",
        "root/etc/passwd",
        "root/tmp/x",
        "pw",
        "mid",
        "mid/secret",
        "mid/new",
        "abs",
        "l1",
        "sub/up/x",
        "sub/up",
        "peek",
        "sublink/up/etc/passwd",
        "dangling",
        "dangling2",
    ] {
        let (status, _, body) = get(&server, "r", path, None);
        assert_eq!(
            status,
            403,
            "GET {path}: {}",
            String::from_utf8_lossy(&body)
        );
        let (status, value) = put(&server, "r", path, b"pwned");
        assert_eq!(status, 403, "PUT {path}: {value}");
        assert!(
            value["error"].as_str().unwrap().contains("outside"),
            "{value}"
        );
    }
    // Deleting under a link that leads out is refused; deleting the link
    // itself removes the link only.
    for path in ["mid/secret", "root/etc/passwd", "sub/up/x"] {
        assert_eq!(delete(&server, "r", path, true).0, 403, "{path}");
    }
    for path in ["mid", "pw", "abs", "dangling"] {
        assert_eq!(delete(&server, "r", path, true).0, 200, "{path}");
        assert!(!server.workspace("r").join(path).exists());
    }
    // A workspace that is itself a symlink is not followed either.
    symlink(out.path(), server.workspace("gone")).unwrap();
    assert_eq!(statuses(&server, "gone", "secret"), [403; 3]);
    assert_eq!(get(&server, "gone", "", None).0, 403);
    untouched(out.path());
    assert_eq!(fs::read("/etc/passwd").unwrap(), passwd);
    assert_eq!(
        fs::read(server.workspace("victim").join("secret.txt")).unwrap(),
        b"other room"
    );
    assert!(!server.workspace("victim").join("new.txt").exists());

    // Links that stay inside are followed, to read and to write.
    assert_eq!(read(&server, "r", "alias2"), b"inside");
    assert_eq!(read(&server, "r", "sublink/real.txt"), b"inside");
    write(&server, "r", "alias2", b"written through");
    assert_eq!(read(&server, "r", "sub/real.txt"), b"written through");
    assert!(fs::symlink_metadata(server.workspace("r").join("alias"))
        .unwrap()
        .is_symlink());
    write(&server, "r", "sublink/new/deeper.txt", b"made");
    assert_eq!(read(&server, "r", "sub/new/deeper.txt"), b"made");
    // A loop is a 400, not a hang.
    assert_eq!(get(&server, "r", "loop", None).0, 400);
    assert_eq!(put(&server, "r", "loop", b"x").0, 400);
}

/// Swaps the names `a` and `b` in `dir` (one a directory or file inside,
/// the other a symlink out) as fast as it can until `stop`.
fn swapper(dir: &Path, a: &str, b: &str, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    let dir = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let (a, b) = (CString::new(a).unwrap(), CString::new(b).unwrap());
    thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: NUL-terminated paths; renameat2 only renames.
            let done = unsafe {
                let at = libc::open(dir.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
                let r = libc::renameat2(at, a.as_ptr(), at, b.as_ptr(), libc::RENAME_EXCHANGE);
                libc::close(at);
                r
            };
            assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
            swaps += 1;
        }
        swaps
    })
}

#[test]
fn a_link_swapped_in_between_check_and_use_leads_nowhere() {
    let server = Server::start();
    let out = outside();
    write(&server, "r", "d/secret", b"inside");
    write(&server, "r", "f", b"inside");
    let ws = server.workspace("r");
    symlink(out.path(), ws.join("d-out")).unwrap();
    symlink(out.path().join("secret"), ws.join("f-out")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swappers = [
        swapper(&ws, "d", "d-out", Arc::clone(&stop)),
        swapper(&ws, "f", "f-out", Arc::clone(&stop)),
    ];
    let until = Instant::now() + Duration::from_millis(1500);
    let mut seen = [0u32; 2];
    while Instant::now() < until {
        for path in ["d/secret", "f", "d"] {
            let (status, _, body) = get(&server, "r", path, None);
            assert!(
                !String::from_utf8_lossy(&body).contains("SECRET"),
                "GET {path} read outside"
            );
            assert!(matches!(status, 200 | 403 | 404), "GET {path}: {status}");
            seen[usize::from(status != 200)] += 1;
        }
        for path in ["d/secret", "d/new", "f"] {
            let (status, value) = put(&server, "r", path, b"pwned");
            assert!(
                matches!(status, 200 | 403 | 404 | 409),
                "PUT {path}: {value}"
            );
        }
        let status = delete(&server, "r", "d/secret", false).0;
        assert!(matches!(status, 200 | 403 | 404), "DELETE: {status}");
    }
    stop.store(true, Ordering::Relaxed);
    for swapper in swappers {
        assert!(swapper.join().unwrap() > 100, "the swaps ran");
    }
    untouched(out.path());
    // Both sides were met: reads inside that worked and ones refused.
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}
