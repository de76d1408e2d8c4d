//! A room always wakes: packing refuses a workspace a restore would refuse
//! or would take too long to restore, a restore takes symlinks whatever
//! they point to and in any order, and a restore is bounded, given up when
//! late or unwanted, one at a time per sandbox, and harmless when it fails.

use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use duet_wire::ExecResult;
use serde_json::Value;

use crate::archive::{archive_path, dir, file, get, get_ok, gzip, link, put, snapshot, tar_of};
use crate::harness::{timed, Server, SLACK};

/// PUTs `body` with `query`; returns status and JSON answer.
fn put_with(server: &Server, name: &str, query: &str, body: &[u8]) -> (u16, Value) {
    let path = format!("{}{query}", archive_path(name));
    let (status, bytes) = server.chunked("PUT", &path, body, 64 * 1024);
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("non-JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// The error of a GET of the archive that must fail with `status`.
fn get_error(server: &Server, name: &str, status: u16) -> String {
    let (got, _, body) = get(server, name, "");
    let value: Value = serde_json::from_slice(&body).expect("JSON error");
    assert_eq!(got, status, "{value}");
    value["error"].as_str().expect("error text").to_string()
}

/// The names under the root: workspaces and any scratch left behind.
fn root_names(server: &Server) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(server.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs `cmd` in the sandbox from a thread of its own, and returns once it
/// has surely started, so that what comes next waits for it.
fn running(server: &Arc<Server>, name: &str, cmd: &str) -> thread::JoinHandle<ExecResult> {
    let (server, name, cmd) = (Arc::clone(server), name.to_string(), cmd.to_string());
    let runner = thread::spawn(move || server.exec(&name, &cmd));
    thread::sleep(Duration::from_millis(200));
    runner
}

/// Bytes of the tar inside a gzipped archive, as a restore counts them.
fn unpacked_len(archive: &[u8]) -> u64 {
    io::copy(&mut flate2::read::GzDecoder::new(archive), &mut io::sink()).expect("gunzip")
}

#[test]
fn packing_refuses_a_workspace_that_unpacks_past_the_restore_bound() {
    // Restores may unpack to 4 MiB; the log packs to a few KiB.
    let server = Server::start_with(&["--max-archive-bytes", "1048576"], &[]);
    let ws = server.workspace("logs");
    let r = server.exec("logs", "yes 'build output' | head -c 6000000 > build.log");
    assert_eq!(r.exit_code, 0, "{r:?}");
    let before = snapshot(&ws);
    assert_eq!(
        get_error(&server, "logs", 422),
        "workspace cannot be restored: it unpacks to more than 4194304 bytes \
         (--max-restore-bytes)"
    );
    assert_eq!(snapshot(&ws), before);
    assert_eq!(root_names(&server), ["logs"], "the scratch file is gone");

    // Within the bound it packs, and comes back.
    server.exec("logs", "truncate -s 3000000 build.log");
    let archive = get_ok(&server, "logs");
    assert_eq!(server.destroy("logs").0, 200);
    let (status, value) = put(&server, "logs", &archive);
    assert_eq!(status, 200, "{value}");
    assert_eq!(fs::metadata(ws.join("build.log")).unwrap().len(), 3_000_000);
}

#[test]
fn packing_and_restoring_agree_on_the_bounds_exactly() {
    // Symlinks leading out and fifos are kept, and counted; sockets are
    // left out, and not counted.
    let setup = "mkdir d && head -c 3000 /dev/urandom > d/f && touch g h && ln -s d/f l \
                 && ln -s .. out && mkfifo p \
                 && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"s\")'";
    let server = Server::start();
    server.exec("edge", setup);
    let archive = get_ok(&server, "edge");
    let bytes = unpacked_len(&archive);
    for (flag, bound, over) in [
        ("--max-restore-bytes", bytes, None),
        (
            "--max-restore-bytes",
            bytes - 1,
            Some(format!(
                "it unpacks to more than {} bytes (--max-restore-bytes)",
                bytes - 1
            )),
        ),
        ("--max-restore-entries", 7, None),
        (
            "--max-restore-entries",
            6,
            Some("it has more than 6 entries (--max-restore-entries)".to_string()),
        ),
    ] {
        let bounded = Server::start_with(&[flag, &bound.to_string()], &[]);
        let label = format!("{flag} {bound}");
        let (status, value) = put(&bounded, "edge", &archive);
        match &over {
            None => assert_eq!(status, 200, "{label}: {value}"),
            Some(why) => {
                assert_eq!(status, 413, "{label}: {value}");
                assert_eq!(value["error"], format!("archive refused: {why}"), "{label}");
            }
        }
        // The same workspace, made afresh, packs exactly when it restores.
        bounded.exec("fresh", setup);
        match &over {
            None => {
                get_ok(&bounded, "fresh");
            }
            Some(why) => assert_eq!(
                get_error(&bounded, "fresh", 422),
                format!("workspace cannot be restored: {why}"),
                "{label}"
            ),
        }
    }
}

#[test]
fn packing_refuses_a_workspace_whose_restore_would_take_too_long() {
    // 100 empty files: entries of one 512-byte header each, and the end of
    // the tar.
    let setup = "touch $(seq -f f%03g 100)";
    let whole = duet_wire::restore_ms(100, 100 * 512 + 1024);
    let server = Server::start_with(&["--max-restore-ms", &whole.to_string()], &[]);
    server.exec("fits", setup);
    let (_, head, _) = get(&server, "fits", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    for max in [whole - 1, duet_wire::RESTORE_BASE_MS + 1] {
        let server = Server::start_with(&["--max-restore-ms", &max.to_string()], &[]);
        server.exec("slow", setup);
        // Refused at the first entry that takes the estimate over, or at
        // the end of the tar.
        let (n, bytes) = (1..=100)
            .map(|n| (n, n * 512))
            .chain([(100, 100 * 512 + 1024)])
            .find(|(n, bytes)| duet_wire::restore_ms(*n, *bytes) > max)
            .expect("over");
        assert_eq!(
            get_error(&server, "slow", 422),
            format!(
                "workspace cannot be restored: its restore would take longer than {max} ms \
                 (--max-restore-ms): {n} entries unpacking to {bytes} bytes, packed so far, are \
                 estimated at {} ms",
                duet_wire::restore_ms(n, bytes)
            )
        );
        assert_eq!(root_names(&server), ["slow"], "the scratch file is gone");
        assert_eq!(server.exec("slow", "ls | wc -l").stdout, "100\n");
    }
}

#[test]
fn symlinks_are_taken_whatever_they_point_to_in_any_order() {
    let server = Server::start();
    let ws = server.workspace("links");
    let r = server.exec(
        "links",
        "mkdir -p a/b/c && ln -s a/b/c m && ln -s m/../.. l && ln -s m/../../../../.. far",
    );
    assert_eq!(r.exit_code, 0, "{r:?}");
    let archive = get_ok(&server, "links");
    assert_eq!(server.destroy("links").0, 200);
    let (status, value) = put(&server, "links", &archive);
    assert_eq!(status, 200, "{value}");
    let r = server.exec("links", "(cd l && pwd -P); readlink far");
    assert_eq!(
        r.stdout,
        format!("{}\nm/../../../../..\n", ws.join("a").display())
    );

    // `l` before `m` exists, leading in or out: a symlink is data.
    let tree = |l: &str| {
        gzip(&tar_of(&[
            link("l", l),
            dir("a"),
            dir("a/b"),
            dir("a/b/c"),
            link("m", "a/b/c"),
        ]))
    };
    for target in ["m/../..", "m/../../../..", "/", "../../.."] {
        let (status, value) = put(&server, "order", &tree(target));
        assert_eq!(status, 200, "{target}: {value}");
        let got = fs::read_link(server.workspace("order").join("l")).unwrap();
        assert_eq!(got, Path::new(target));
    }
}

/// Makes a file whose path in the workspace is `len` bytes long, through
/// directories of 200 bytes, entered one by one as no single path could be.
fn deep_file(server: &Server, name: &str, len: usize) {
    let dirs = (len - 1) / 201;
    let last = len - dirs * 201;
    let component = "d".repeat(200);
    let cmd = format!(
        "for i in $(seq {dirs}); do mkdir {component} && cd {component} || exit 1; done; \
         touch {}; cd ~",
        "f".repeat(last)
    );
    let r = server.exec(name, &cmd);
    assert_eq!(r.exit_code, 0, "{r:?}");
}

#[test]
fn packing_refuses_a_path_too_long_to_restore() {
    let server = Server::start();
    // A restore creates `<root>/<name>~restore/<path>`, within PATH_MAX.
    let staging = |name: &str| format!("{}~restore", server.workspace(name).display());
    let room = 4095 - staging("deep1").len() - 1;

    deep_file(&server, "deep1", room);
    let archive = get_ok(&server, "deep1");
    assert_eq!(server.destroy("deep1").0, 200);
    let (status, value) = put(&server, "deep1", &archive);
    assert_eq!(status, 200, "{value}");

    // Past PATH_MAX in the workspace too: the first path too long is named,
    // here one of the directories on the way.
    let first_dir_over = (room + 1) / 201 * 201 + 200;
    for (name, len, named) in [
        ("deep2", room + 1, room + 1),
        ("deep3", 5000, first_dir_over),
    ] {
        assert_eq!(staging(name).len(), staging("deep1").len());
        deep_file(&server, name, len);
        let error = get_error(&server, name, 422);
        assert!(
            error.starts_with(&format!(
                "workspace cannot be restored: {}",
                "d".repeat(100)
            )),
            "{error}"
        );
        assert!(
            error.ends_with(&format!(
                "...: the path is {named} bytes long, and a restore here creates paths of at \
                 most {room} bytes"
            )),
            "{error}"
        );
        // The sandbox stays as it was.
        assert_eq!(server.exec(name, "echo up").stdout, "up\n");
    }
    assert_eq!(root_names(&server), ["deep1", "deep2", "deep3"]);
}

#[test]
fn a_restore_waiting_past_its_timeout_is_given_up() {
    let server = Arc::new(Server::start());
    server.exec("late", "echo kept > f");
    let archive = gzip(&tar_of(&[file("new", b"x")]));
    let runner = running(&server, "late", "sleep 1; echo done > done");
    let ((status, value), took) = timed(|| put_with(&server, "late", "?timeoutMs=300", &archive));
    assert_eq!(status, 504, "{value}");
    assert_eq!(value["error"], "the restore did not finish within 300 ms");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(300) + SLACK, "{took:?}");
    assert!(runner.join().unwrap().success);
    // Given up for good: it does not run once the command is done.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(server.exec("late", "ls").stdout, "done\nf\n");
    assert_eq!(root_names(&server), ["late"]);
}

#[test]
fn a_restore_unpacking_past_its_timeout_is_given_up_and_leaves_nothing() {
    let server = Server::start();
    // Far more than 50 ms of work.
    let entries: Vec<_> = (0..20_000)
        .map(|i| file(&format!("d{}/f{i}", i / 100), b""))
        .collect();
    let archive = gzip(&tar_of(&entries));
    let ((status, value), took) = timed(|| put_with(&server, "slow", "?timeoutMs=50", &archive));
    assert_eq!(status, 504, "{value}");
    assert_eq!(value["error"], "the restore did not finish within 50 ms");
    assert!(took < Duration::from_millis(50) + SLACK, "{took:?}");
    assert_eq!(root_names(&server), Vec::<String>::new(), "no scratch left");
    // The sandbox works, in an empty workspace.
    let r = server.exec("slow", "ls -A | wc -l");
    assert_eq!(r.stdout.trim(), "0");
    // Without a timeout the same archive goes in.
    let (status, value) = put(&server, "slow", &archive);
    assert_eq!(status, 200, "{value}");
    assert_eq!(value["files"], 20_000);
}

#[test]
fn a_restore_whose_body_stalls_is_given_up_at_its_timeout() {
    let server = Server::start();
    let ws = server.workspace("stall");
    server.exec("stall", "echo kept > f");
    let before = snapshot(&ws);
    let archive = gzip(&tar_of(&[file("new", &[7; 200_000])]));
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let head = format!(
        "PUT {}?timeoutMs=300 HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\n\r\n",
        archive_path("stall"),
        archive.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&archive[..archive.len() / 2]).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (mut answer, took) = timed(|| {
        let mut answer = vec![0; 4096];
        let n = stream
            .read(&mut answer)
            .expect("an answer before the body ends");
        answer.truncate(n);
        answer
    });
    answer.retain(|b| *b != b'\r');
    let answer = String::from_utf8(answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 504 "), "{answer}");
    assert!(
        answer.ends_with(r#"{"error":"the restore did not finish within 300 ms"}"#),
        "{answer}"
    );
    assert!(took < Duration::from_millis(300) + SLACK, "{took:?}");
    assert_eq!(snapshot(&ws), before);
    assert_eq!(root_names(&server), ["stall"]);
    assert_eq!(server.exec("stall", "cat f").stdout, "kept\n");
}

#[test]
fn a_restore_whose_client_goes_away_is_given_up() {
    let server = Arc::new(Server::start());
    server.exec("gone", "echo kept > f");
    let pid = server.shell_pid("gone");
    let runner = running(&server, "gone", "sleep 1");
    // Sent whole; the client hangs up while the restore waits its turn.
    let archive = gzip(&tar_of(&[file("new", b"x")]));
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\n\r\n",
        archive_path("gone"),
        archive.len()
    );
    stream
        .write_all(&[head.as_bytes(), &archive].concat())
        .unwrap();
    thread::sleep(Duration::from_millis(200));
    drop(stream);
    assert!(runner.join().unwrap().success);
    // Had it gone on, it would have replaced the files and ended the shell.
    thread::sleep(Duration::from_millis(500));
    assert_eq!(server.shell_pid("gone"), pid);
    assert_eq!(server.exec("gone", "ls").stdout, "f\n");
    assert_eq!(root_names(&server), ["gone"]);
}

#[test]
fn one_restore_of_a_sandbox_at_a_time() {
    let server = Arc::new(Server::start());
    server.exec("two", "echo kept > f");
    let archive = gzip(&tar_of(&[file("new", b"x")]));
    let runner = running(&server, "two", "sleep 1");
    let first = {
        let (server, archive) = (Arc::clone(&server), archive.clone());
        thread::spawn(move || put(&server, "two", &archive))
    };
    thread::sleep(Duration::from_millis(200));
    let (status, value) = put(&server, "two", &archive);
    assert_eq!(status, 409, "{value}");
    assert_eq!(value["error"], "sandbox two is already being restored");
    // Another sandbox is not held up.
    assert_eq!(put(&server, "other", &archive).0, 200);

    let (status, value) = first.join().unwrap();
    assert_eq!(status, 200, "{value}");
    assert!(runner.join().unwrap().success);
    assert_eq!(server.exec("two", "ls").stdout, "new\n");
    // Once one is done, the next may run.
    assert_eq!(put(&server, "two", &archive).0, 200);
}

#[test]
fn restore_query_errors_and_a_refused_restore_leave_a_working_sandbox() {
    let server = Server::start();
    let archive = gzip(&tar_of(&[file("new", b"x")]));
    for (query, needle) in [
        ("?timeoutMs=0", "timeoutMs must be a positive integer"),
        ("?timeoutMs=soon", "timeoutMs must be a positive integer"),
        ("?maxBytes=10", "only timeoutMs is accepted"),
        ("?timeoutMs=5&x=1", "only timeoutMs is accepted"),
    ] {
        let (status, value) = put_with(&server, "fresh", query, &archive);
        assert_eq!(status, 400, "{query}: {value}");
        let error = value["error"].as_str().unwrap();
        assert!(error.contains(needle), "{query}: {error}");
    }
    let (status, _, _) = get(&server, "fresh", "?timeoutMs=10");
    assert_eq!(status, 400);

    // A refused archive into a sandbox that has no workspace yet.
    let hostile = gzip(&tar_of(&[
        file("ok", b"x"),
        link("l", ".."),
        file("l/x", b"x"),
    ]));
    let (status, value) = put_with(&server, "fresh", "?timeoutMs=5000", &hostile);
    assert_eq!(status, 400, "{value}");
    assert_eq!(root_names(&server), Vec::<String>::new());
    let r = server.exec("fresh", "ls -A; pwd");
    assert_eq!(
        r.stdout,
        format!("{}\n", server.workspace("fresh").display())
    );
    assert!(Path::new(&server.workspace("fresh")).is_dir());
}
