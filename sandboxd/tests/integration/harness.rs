//! Test harness: starts the real sandboxd binary on a free loopback port
//! with a temporary root and talks HTTP/1.1 to it over plain TCP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use duet_wire::ExecResult;
use serde_json::Value;

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    root: tempfile::TempDir,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&[], &[])
    }

    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_in(tempfile::tempdir().expect("temp root"), args, env)
    }

    /// SIGKILLs sandboxd, as a crash would, and starts another on the same
    /// root.
    pub fn crash_and_restart(mut self) -> Server {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let root = std::mem::replace(&mut self.root, tempfile::tempdir().expect("temp root"));
        Server::start_in(root, &[], &[])
    }

    fn start_in(root: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
            .args(["--listen", "127.0.0.1:0", "--root"])
            .arg(root.path())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sandboxd");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let addr = loop {
            line.clear();
            if stderr.read_line(&mut line).expect("read stderr") == 0 {
                panic!("sandboxd exited before listening");
            }
            if let Some(addr) = line.trim().strip_prefix("sandboxd listening on ") {
                break addr.parse().expect("listen address");
            }
        };
        // Keep draining stderr so sandboxd never blocks on logging.
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            addr,
            root,
            logs,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.root.path().canonicalize().expect("canonical root")
    }

    pub fn workspace(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends one request on a fresh connection; returns status and body.
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: sandboxd\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send(&[head.as_bytes(), body].concat())
    }

    /// Writes `request` bytes as they are and parses the response.
    pub fn send(&self, request: &[u8]) -> (u16, Vec<u8>) {
        let (status, _, body) = self.send_with_head(request);
        (status, body)
    }

    /// Like `send`, also returning the response's status line and headers.
    pub fn send_with_head(&self, request: &[u8]) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        stream.write_all(request).expect("send request");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("read response");
        split_response(&response)
    }

    /// Sends `body` chunked (without Content-Length), in chunks of `chunk`
    /// bytes, from a thread of its own so that a server answering before
    /// the end is seen; returns the response.
    pub fn chunked(&self, method: &str, path: &str, body: &[u8], chunk: usize) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: sandboxd\r\nConnection: close\r\n\
             Transfer-Encoding: chunked\r\n\r\n"
        );
        let mut request = head.into_bytes();
        for piece in body.chunks(chunk) {
            request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            request.extend_from_slice(piece);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let mut writer = stream.try_clone().expect("clone stream");
        // The server may stop reading and answer first: ignore write errors.
        let sending = thread::spawn(move || {
            let _ = writer.write_all(&request);
        });
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("read response");
        let _ = stream.shutdown(std::net::Shutdown::Both);
        sending.join().expect("sender");
        let (status, _, body) = split_response(&response);
        (status, body)
    }

    pub fn json(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let (status, body) = self.raw(method, path, body.as_bytes());
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("non-JSON body ({e}): {}", String::from_utf8_lossy(&body)));
        (status, value)
    }

    pub fn exec(&self, name: &str, cmd: &str) -> ExecResult {
        self.exec_body(name, &serde_json::json!({ "cmd": cmd }))
    }

    pub fn exec_timeout(&self, name: &str, cmd: &str, timeout_ms: u64) -> ExecResult {
        self.exec_body(
            name,
            &serde_json::json!({ "cmd": cmd, "timeoutMs": timeout_ms }),
        )
    }

    fn exec_body(&self, name: &str, body: &Value) -> ExecResult {
        let path = format!("/v1/sandboxes/{name}/exec");
        let (status, bytes) = self.raw("POST", &path, body.to_string().as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        serde_json::from_slice(&bytes).expect("exec response")
    }

    /// The pid of the sandbox's shell (starting one if needed), which is
    /// also its session id.
    pub fn shell_pid(&self, name: &str) -> i32 {
        let r = self.exec(name, "echo $$");
        r.stdout
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no pid from {name}: {r:?}"))
    }

    pub fn destroy(&self, name: &str) -> (u16, Value) {
        self.json("DELETE", &format!("/v1/sandboxes/{name}"), "")
    }

    /// The log lines so far, once `ready` holds for them (or after 5 s):
    /// lines reach the reader thread slightly after the responses.
    pub fn logs_when(&self, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let logs = self.logs.lock().unwrap().clone();
            if ready(&logs) || Instant::now() >= deadline {
                return logs;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM and waits (bounded) for sandboxd to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "sandboxd ignored SIGTERM");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Status, status line and headers, and body of a raw HTTP/1.1 response.
fn split_response(response: &[u8]) -> (u16, String, Vec<u8>) {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    (status, head, response[split + 4..].to_vec())
}

/// Reads the status line and headers.
pub fn read_head(reader: &mut impl BufRead) -> (u16, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("head");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    (status.expect("status"), head)
}

/// Reads one chunk of a chunked body; `None` at its end.
pub fn read_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut size = String::new();
    reader.read_line(&mut size).expect("chunk size");
    let size = usize::from_str_radix(size.trim(), 16).expect("hex size");
    if size == 0 {
        return None;
    }
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk).expect("chunk");
    chunk.truncate(size);
    Some(chunk)
}

/// Reads a chunked NDJSON body line by line, handing each line to `each`
/// until the body ends or `each` answers false (a reader that goes away).
pub fn read_ndjson(reader: &mut impl BufRead, mut each: impl FnMut(Value) -> bool) {
    let mut pending = Vec::new();
    while let Some(chunk) = read_chunk(reader) {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let value = serde_json::from_slice(&line[..end]).expect("one JSON object a line");
            if !each(value) {
                return;
            }
        }
    }
    assert!(pending.is_empty(), "unterminated line");
}

/// True once `pid` no longer runs (gone, or a zombie nobody reaped yet),
/// polling up to `within`.
pub fn pid_is_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat_field(&stat, 0) == Some("Z") => return true,
            Ok(_) if Instant::now() >= deadline => return false,
            Ok(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Live processes whose session id is `sid`.
pub fn live_session_members(sid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat_field(&stat, 0) != Some("Z")
                    && stat_field(&stat, 3) == Some(sid.to_string().as_str())
            })
        })
        .collect()
}

/// Field `n` counted from the state field of a `/proc/PID/stat` line.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(n)
}

/// How much later than its limit a bounded wait may end. What the tests
/// check is that the limit holds (what outlives it would run for 30 s, or
/// for ever), not how fast a machine is whose two cores other work shares.
pub const SLACK: Duration = Duration::from_millis(3000);

/// Runs `f` and returns its result and how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}
