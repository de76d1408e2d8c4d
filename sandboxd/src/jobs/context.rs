//! The working directory and exported environment a job starts with: the
//! room's shell's, at the moment the job starts.
//!
//! Only bash knows its exported variables (`/proc/PID/environ` holds what
//! it started with), so it is asked, between commands, like any command:
//! [`SCRIPT`] prints `pwd -P`, a NUL, then `name=value` and a NUL for each
//! exported variable that is set, which is exactly what a command it
//! started would get. It runs in a subshell, so it leaves nothing behind
//! (no variable, no `$?` a user would see), with bash's builtins only, so
//! neither PATH nor a function can change what it prints.
//!
//! A job waits for the shell's turn at most [`TURN_WAIT`]: a command that
//! runs longer must not hold up the job's start. It then starts with what
//! the shell said last time it was asked, if that shell still runs (a `cd`
//! the running command made is not seen), and otherwise with what a fresh
//! shell starts with, which is also what it gets when the sandbox has no
//! shell or its shell died: the next command would run in a fresh one.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::procs;

/// How long a job waits for the shell's turn.
pub const TURN_WAIT: Duration = Duration::from_millis(2000);
/// How long the shell may take to answer [`SCRIPT`]; it takes milliseconds.
pub const TIMEOUT: Duration = Duration::from_millis(3000);

/// Run by the shell; see the module docs.
pub const SCRIPT: &str = "( IFS=$' \\t\\n'; builtin set +o nounset +o xtrace; \
     builtin pwd -P && builtin printf '\\0' && \
     for n in $(builtin compgen -e); do \
     [[ -v $n ]] && builtin printf '%s=%s\\0' \"$n\" \"${!n}\"; done )";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Context {
    /// What a fresh shell in `workspace` starts with (see `Session::spawn`).
    pub fn fresh(workspace: &Path, shell_env: &[(String, String)]) -> Self {
        let mut env = shell_env.to_vec();
        env.push(("HOME".into(), workspace.display().to_string()));
        Context {
            cwd: workspace.to_path_buf(),
            env,
        }
    }

    /// What [`SCRIPT`] printed, if it printed it all.
    pub fn parse(stdout: &str) -> Option<Self> {
        let (cwd, vars) = stdout.split_once('\0')?;
        let cwd = cwd.strip_suffix('\n')?;
        // Each variable ends in a NUL; without it the answer was cut.
        let env = match vars {
            "" => Vec::new(),
            vars => vars
                .strip_suffix('\0')?
                .split('\0')
                .map(|var| var.split_once('=').map(|(k, v)| (k.into(), v.into())))
                .collect::<Option<_>>()?,
        };
        Some(Context {
            cwd: cwd.into(),
            env,
        })
    }
}

/// What a sandbox's shell said last, and which shell (its pid) said it.
#[derive(Default)]
pub struct Last(Mutex<Option<(i32, Context)>>);

impl Last {
    pub fn set(&self, shell: i32, context: &Context) {
        *self.lock() = Some((shell, context.clone()));
    }

    /// The last answer, if the shell that gave it still runs.
    pub fn get(&self) -> Option<Context> {
        let last = self.lock().clone()?;
        procs::is_alive(last.0).then_some(last.1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(i32, Context)>> {
        // Nothing panics while holding this lock; the value stays usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_script_prints() {
        let out = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-c"])
            .arg(format!(
                "cd /tmp; export X='a b=c'; declare -x UNSET; Y=1; {SCRIPT}"
            ))
            .env_clear()
            .env("KEEP", "1\n2")
            .output()
            .expect("run bash");
        let context = Context::parse(&String::from_utf8(out.stdout).unwrap()).expect("parsed");
        let tmp = Path::new("/tmp").canonicalize().unwrap();
        assert_eq!(context.cwd, tmp);
        let get = |name: &str| {
            context
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("X"), Some("a b=c"));
        assert_eq!(get("KEEP"), Some("1\n2"));
        assert_eq!((get("UNSET"), get("Y")), (None, None));
    }

    #[test]
    fn refuses_what_was_cut_short() {
        assert_eq!(Context::parse("/tmp\n"), None);
        assert_eq!(Context::parse("/tmp\n\0A=1\0B"), None);
        let empty = Context::parse("/\n\0").expect("no variables");
        assert!(empty.env.is_empty());
    }
}
