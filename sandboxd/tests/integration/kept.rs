//! What an archive keeps and says: every symlink as it is, fifos as fifos,
//! sockets and devices named as left out, its entries and unpacked bytes in
//! headers; and a restore that nothing can make write through a symlink,
//! not even a process of the sandbox swapping one in while it runs.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::archive::{dir, entries, file, get, get_with_head, gzip, header, put, snapshot, tar_of};
use crate::harness::Server;

/// Bytes of the tar inside a gzipped archive, as a restore counts them.
fn unpacked_len(archive: &[u8]) -> u64 {
    io::copy(&mut flate2::read::GzDecoder::new(archive), &mut io::sink()).expect("gunzip")
}

/// Packs the sandbox `name`, checks that its headers say what it holds,
/// destroys it and restores the archive; returns the archive's head.
fn round_trip(server: &Server, name: &str) -> String {
    let (head, archive) = get_with_head(server, name);
    let count = entries(&archive).len().to_string();
    assert_eq!(header(&head, "x-duet-entries"), Some(count), "{head}");
    let bytes = unpacked_len(&archive).to_string();
    assert_eq!(
        header(&head, "x-duet-unpacked-bytes"),
        Some(bytes),
        "{head}"
    );
    assert_eq!(server.destroy(name).0, 200);
    let (status, value) = put(server, name, &archive);
    assert_eq!(status, 200, "{value}");
    head
}

#[test]
fn a_virtualenv_and_every_kind_of_symlink_come_back_as_they_were() {
    let server = Server::start();
    let ws = server.workspace("venv");
    let long = format!("{}/x", "long-name".repeat(14));
    let setup = format!(
        "mkdir -p .venv/bin lib/pkg outside-target && echo v > lib/pkg/mod.py \
         && ln -s /usr/bin/python3 .venv/bin/python && ln -s python .venv/bin/python3 \
         && ln -s python3 .venv/bin/python3.11 && ln -s ../lib/pkg .venv/pkg \
         && ln -s nowhere/at/all dangling && ln -s / root && ln -s /usr/lib usrlib \
         && ln -s ../.. up && ln -s './a//b/../c/' odd && ln -s '{long}' long \
         && ln -s 'ünï/文件' unicode && touch -h -d '2021-06-07 08:09:10' dangling"
    );
    let r = server.exec("venv", &setup);
    assert_eq!(r.exit_code, 0, "{r:?}");
    let before = snapshot(&ws);
    let head = round_trip(&server, "venv");
    assert_eq!(header(&head, "x-duet-left-out"), None, "{head}");
    assert_eq!(snapshot(&ws), before);
    for (link, target) in [
        (".venv/bin/python", "/usr/bin/python3"),
        (".venv/bin/python3.11", "python3"),
        ("dangling", "nowhere/at/all"),
        ("root", "/"),
        ("up", "../.."),
        ("odd", "./a//b/../c/"),
        ("long", long.as_str()),
    ] {
        let got = fs::read_link(ws.join(link)).unwrap();
        assert_eq!(got.as_os_str().as_bytes(), target.as_bytes(), "{link}");
    }
    let r = server.exec(
        "venv",
        "cat .venv/pkg/mod.py && ls usrlib >/dev/null && .venv/bin/python3.11 -c 'print(1)'",
    );
    assert_eq!(r.stdout, "v\n1\n", "{r:?}");

    // A real virtualenv, made by Python itself.
    let r = server.exec(
        "real",
        "python3 -m venv --without-pip .venv && .venv/bin/python -c 'print(2)'",
    );
    if r.exit_code != 0 {
        println!("skipped the real virtualenv: python3 -m venv failed here: {r:?}");
        return;
    }
    let before = snapshot(&server.workspace("real"));
    round_trip(&server, "real");
    assert_eq!(snapshot(&server.workspace("real")), before);
    let r = server.exec(
        "real",
        ".venv/bin/python -c 'import sys; print(sys.prefix)'",
    );
    assert_eq!(
        r.stdout,
        format!("{}\n", server.workspace("real").join(".venv").display())
    );
}

#[test]
fn a_fifo_comes_back_as_a_fifo() {
    let server = Server::start();
    let ws = server.workspace("fifo");
    let r = server.exec(
        "fifo",
        "mkdir run && mkfifo run/pipe && mkfifo -m 600 private && chmod 000 run/pipe \
         && touch -d '2020-01-02 03:04:05' private",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");
    let head = round_trip(&server, "fifo");
    assert_eq!(header(&head, "x-duet-entries").as_deref(), Some("3"));
    for (name, mode) in [("run/pipe", 0o400), ("private", 0o600)] {
        let meta = fs::symlink_metadata(ws.join(name)).unwrap();
        assert!(meta.file_type().is_fifo(), "{name}");
        assert_eq!(meta.permissions().mode() & 0o7777, mode, "{name}");
    }
    let private = fs::symlink_metadata(ws.join("private")).unwrap();
    assert_eq!(private.mtime(), 1_577_934_245);
    // And it works as one.
    let r = server.exec("fifo", "(echo through > private &) ; cat private");
    assert_eq!(r.stdout, "through\n");
}

#[test]
fn sockets_and_devices_are_left_out_and_named() {
    let server = Server::start();
    let ws = server.workspace("dev");
    let r = server.exec(
        "dev",
        "mkdir run dev && echo kept > run/file && touch $'caf\\xc3\\xa9\\n\\\\'",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");
    let _app = std::os::unix::net::UnixListener::bind(ws.join("run/app.sock")).expect("socket");
    let _odd = std::os::unix::net::UnixListener::bind(ws.join("run/\u{e9}t\u{e9}\n.sock"))
        .expect("socket");
    let mknod = Command::new("mknod")
        .arg(ws.join("dev/tty9"))
        .args(["c", "4", "9"])
        .output()
        .expect("mknod");
    let device = mknod.status.success();
    if !device {
        println!(
            "no device file in this test: mknod is not permitted here: {}",
            String::from_utf8_lossy(&mknod.stderr)
        );
    }
    let (head, archive) = get_with_head(&server, "dev");
    let mut names: Vec<String> = entries(&archive).into_iter().map(|(p, ..)| p).collect();
    names.sort();
    assert_eq!(names, ["caf\u{e9}\n\\", "dev", "run", "run/file"]);
    let left = header(&head, "x-duet-left-out").expect("a note");
    // In the order met: a directory's names sorted, the last directory
    // first.
    let want = if device {
        "3 entries not kept (sockets and device files cannot be archived): run/app.sock \
         (socket), run/\\xc3\\xa9t\\xc3\\xa9\\x0a.sock (socket), dev/tty9 (device)"
    } else {
        "2 entries not kept (sockets and device files cannot be archived): \
         run/app.sock (socket), run/\\xc3\\xa9t\\xc3\\xa9\\x0a.sock (socket)"
    };
    assert_eq!(left, want);
    assert!(left.bytes().all(|b| (b' '..=b'~').contains(&b)));
    // The workspace itself stays as it was.
    assert!(fs::symlink_metadata(ws.join("run/app.sock"))
        .unwrap()
        .file_type()
        .is_socket());

    // A long list is cut to about 1 KiB and says how many it leaves unnamed.
    let sockets: Vec<_> = (0..100)
        .map(|i| {
            std::os::unix::net::UnixListener::bind(ws.join(format!("run/socket-number-{i:03}")))
                .expect("socket")
        })
        .collect();
    let (head, _) = get_with_head(&server, "dev");
    let left = header(&head, "x-duet-left-out").expect("a note");
    assert!(left.len() <= 1024, "{}", left.len());
    let total = if device { 103 } else { 102 };
    assert!(
        left.starts_with(&format!(
            "{total} entries not kept (sockets and device files"
        )),
        "{left}"
    );
    let named = left.matches(" (socket)").count() + left.matches(" (device)").count();
    assert!(named > 10, "{left}");
    assert!(
        left.ends_with(&format!(", and {} more", total - named)),
        "{left}"
    );
    drop(sockets);
}

#[test]
fn the_headers_say_what_the_archive_holds() {
    let server = Server::start();
    let r = server.exec(
        "sizes",
        "mkdir -p a/b && head -c 100000 /dev/urandom > a/b/data && echo hi > a/hi \
         && ln -s b/data a/link && mkfifo a/pipe",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");
    let (head, archive) = get_with_head(&server, "sizes");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nx-duet-entries: 6\r\n"), "{head}");
    // Six headers of 512 bytes, the data in whole blocks, two blocks at
    // the end.
    let bytes = 6 * 512 + 100_352 + 512 + 1024;
    assert!(
        lower.contains(&format!("\r\nx-duet-unpacked-bytes: {bytes}\r\n")),
        "{head}"
    );
    assert_eq!(unpacked_len(&archive), bytes);
    assert!(!lower.contains("x-duet-left-out"), "{head}");
    // An empty workspace: no entry, the end of the tar.
    server.exec("empty", "true");
    let (head, archive) = get_with_head(&server, "empty");
    assert_eq!(header(&head, "x-duet-entries").as_deref(), Some("0"));
    assert_eq!(
        header(&head, "x-duet-unpacked-bytes").as_deref(),
        Some("1024")
    );
    assert_eq!(unpacked_len(&archive), 1024);
    // A refusal has none of them.
    let (status, head, _) = get(&server, "nobody", "");
    assert_eq!(status, 404);
    assert_eq!(header(&head, "x-duet-entries"), None);
}

#[test]
fn a_symlink_swapped_in_while_restoring_is_not_written_through() {
    let server = Server::start();
    let outside = tempfile::tempdir().expect("tempdir");
    let target = outside.path().canonicalize().unwrap();
    // Entries alternate between two directories, so that the restore looks
    // each one up again for every entry.
    let mut tree = vec![dir("d"), dir("e")];
    for i in 0..3000 {
        tree.push(file(&format!("d/f{i}"), b"x"));
        tree.push(file(&format!("e/f{i}"), b"x"));
    }
    let archive = gzip(&tar_of(&tree));
    // A process of the sandbox moves the restore's `d` away and puts a
    // symlink to `target` in its place, again and again.
    let swap = format!(
        "cd .. && (while :; do if [ -d swap~restore/d ] && [ ! -L swap~restore/d ]; then \
         mv swap~restore/d swap~restore/moved-$RANDOM$RANDOM 2>/dev/null; \
         ln -s {} swap~restore/d 2>/dev/null; fi; done) >/dev/null 2>&1 &",
        target.display()
    );
    let mut swapped = 0;
    for _ in 0..5 {
        let r = server.exec("swap", &swap);
        assert_eq!(r.exit_code, 0, "{r:?}");
        let (status, value) = put(&server, "swap", &archive);
        let ws = server.workspace("swap");
        match status {
            400 => {
                let error = value["error"].as_str().unwrap();
                let refused = error.ends_with(": d is a symlink")
                    || error.ends_with(": d was moved away while it was restored");
                assert!(refused, "{error}");
                swapped += 1;
            }
            200 => {
                let moved = fs::read_dir(&ws)
                    .unwrap()
                    .flatten()
                    .any(|e| e.file_name().as_bytes().starts_with(b"moved-"));
                swapped += usize::from(moved);
            }
            _ => panic!("{status}: {value}"),
        }
        assert_eq!(
            fs::read_dir(&target).unwrap().count(),
            0,
            "written through the symlink"
        );
        // The restore ended the shell and its loop; a refused one did not.
        server.destroy("swap");
        if swapped > 0 {
            break;
        }
    }
    assert!(swapped > 0, "the swap never happened during a restore");
    assert!(Path::new(&target).is_dir());
}
