//! The floor for running a command: start /bin/true and wait for it, N times.
//! Two ways: fork + execv + waitpid (what a shell does for an external
//! command) and std::process::Command (posix_spawn / clone(CLONE_VFORK), what
//! sandboxd's tokio uses to start bash). Prints JSON of the latencies in ms.
//!
//!   spawn [count] [max_seconds]
//!
//! Built with plain rustc (no crates): `rustc -O spawn.rs`.

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::process::Command;
use std::time::{Duration, Instant};

extern "C" {
    fn fork() -> c_int;
    fn execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(code: c_int) -> !;
}

fn fork_exec(path: &CString, argv: &[*const c_char]) {
    // SAFETY: the child only calls execv and _exit (async-signal-safe).
    unsafe {
        let pid = fork();
        if pid == 0 {
            execv(path.as_ptr(), argv.as_ptr());
            _exit(127);
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        waitpid(pid, &mut status, 0);
        assert!(status == 0, "/bin/true failed: {status}");
    }
}

fn measure(count: usize, budget: Duration, mut f: impl FnMut()) -> Vec<f64> {
    for _ in 0..20 {
        f(); // warm-up
    }
    let started = Instant::now();
    let mut out = Vec::with_capacity(count);
    while out.len() < count && started.elapsed() < budget {
        let t = Instant::now();
        f();
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    out
}

fn json(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.4}")).collect();
    format!("[{}]", items.join(","))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let budget = Duration::from_secs(secs);
    let path = CString::new("/bin/true").unwrap();
    let argv = [path.as_ptr(), std::ptr::null()];
    let forked = measure(count, budget, || fork_exec(&path, &argv));
    let spawned = measure(count, budget, || {
        let status = Command::new("/bin/true").status().expect("spawn /bin/true");
        assert!(status.success());
    });
    println!("{{\"forkExec\":{},\"commandSpawn\":{}}}", json(&forked), json(&spawned));
}
