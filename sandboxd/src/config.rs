//! Command-line options.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::rlimits::Limits;

pub const USAGE: &str = "\
usage: sandboxd --listen ADDR --root DIR [options]

Serves one persistent bash session per sandbox name over HTTP/JSON.

  --listen ADDR             address to listen on, e.g. 0.0.0.0:8080 (port 0 picks one)
  --root DIR                directory holding one workspace per sandbox (created if missing)
  --default-timeout-ms N    timeout of a command that names none [20000]
  --max-timeout-ms N        largest timeout a command may ask for [120000]
  --output-limit BYTES      bytes kept per stream of a command [1048576]
  --max-file-bytes BYTES    largest file a command may write (RLIMIT_FSIZE);
                            0 for no limit [1073741824]
  --max-procs N             processes and threads the shells' user may have in
                            all (RLIMIT_NPROC: counts sandboxd and every sandbox
                            of that user; root is exempt); 0 for no limit [0]
  --max-sessions N          most sandboxes holding a shell at once [64]
  --idle-shell-secs N       end a shell after this long without a command
                            (its files stay); 0 for never [900]
  -h, --help                print this help
";

#[derive(Debug, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub root: PathBuf,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub output_limit: usize,
    pub limits: Limits,
    pub max_sessions: usize,
    pub idle_shell_secs: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Cli {
    Run(Config),
    Help,
}

/// Parses the arguments after the program name. Accepts `--flag value` and
/// `--flag=value`.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut listen = None;
    let mut root = None;
    let mut default_timeout_ms = 20_000;
    let mut max_timeout_ms = 120_000;
    let mut output_limit = 1024 * 1024;
    let mut max_file_bytes = 1024 * 1024 * 1024;
    let mut max_procs = 0;
    let mut max_sessions = 64;
    let mut idle_shell_secs = 900;

    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Cli::Help);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                listen = Some(
                    v.parse()
                        .map_err(|_| format!("--listen: not an address: {v}"))?,
                );
            }
            "--root" => root = Some(PathBuf::from(value()?)),
            "--default-timeout-ms" => default_timeout_ms = positive(&flag, &value()?)?,
            "--max-timeout-ms" => max_timeout_ms = positive(&flag, &value()?)?,
            "--output-limit" => output_limit = positive(&flag, &value()?)?,
            "--max-file-bytes" => max_file_bytes = count(&flag, &value()?)?,
            "--max-procs" => max_procs = count(&flag, &value()?)?,
            "--max-sessions" => max_sessions = positive(&flag, &value()?)?,
            "--idle-shell-secs" => idle_shell_secs = count(&flag, &value()?)?,
            _ => return Err(format!("unknown argument: {flag}")),
        }
    }

    let listen = listen.ok_or("--listen is required")?;
    let root = root.ok_or("--root is required")?;
    if default_timeout_ms > max_timeout_ms {
        return Err("--default-timeout-ms must not exceed --max-timeout-ms".into());
    }
    Ok(Cli::Run(Config {
        listen,
        root,
        default_timeout_ms,
        max_timeout_ms,
        output_limit,
        limits: Limits {
            file_bytes: (max_file_bytes > 0).then_some(max_file_bytes),
            procs: (max_procs > 0).then_some(max_procs),
        },
        max_sessions,
        idle_shell_secs,
    }))
}

fn positive<T: std::str::FromStr + Default + PartialEq>(
    flag: &str,
    value: &str,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err(format!(
            "{flag}: expected a positive integer, got {value:?}"
        )),
    }
}

/// A non-negative integer, where 0 means "no limit".
fn count(flag: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: expected a non-negative integer, got {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Cli, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults() {
        let cli = parse_strs(&["--listen", "127.0.0.1:8790", "--root", "/srv/sbx"]);
        assert_eq!(
            cli,
            Ok(Cli::Run(Config {
                listen: "127.0.0.1:8790".parse().unwrap(),
                root: PathBuf::from("/srv/sbx"),
                default_timeout_ms: 20_000,
                max_timeout_ms: 120_000,
                output_limit: 1_048_576,
                limits: Limits {
                    file_bytes: Some(1 << 30),
                    procs: None,
                },
                max_sessions: 64,
                idle_shell_secs: 900,
            }))
        );
    }

    #[test]
    fn all_options_both_spellings() {
        let cli = parse_strs(&[
            "--listen=0.0.0.0:8080",
            "--root",
            "w",
            "--default-timeout-ms=5",
            "--max-timeout-ms",
            "10",
            "--output-limit=64",
            "--max-file-bytes=4096",
            "--max-procs",
            "300",
            "--max-sessions=3",
            "--idle-shell-secs",
            "60",
        ]);
        let Ok(Cli::Run(config)) = cli else {
            panic!("unexpected {cli:?}");
        };
        assert_eq!(config.listen.port(), 8080);
        assert_eq!(config.root, PathBuf::from("w"));
        assert_eq!(
            (
                config.default_timeout_ms,
                config.max_timeout_ms,
                config.output_limit
            ),
            (5, 10, 64)
        );
        assert_eq!(
            config.limits,
            Limits {
                file_bytes: Some(4096),
                procs: Some(300)
            }
        );
        assert_eq!((config.max_sessions, config.idle_shell_secs), (3, 60));
    }

    #[test]
    fn zero_turns_a_limit_off() {
        let cli = parse_strs(&[
            "--listen=127.0.0.1:1",
            "--root=x",
            "--max-file-bytes=0",
            "--max-procs=0",
        ]);
        let Ok(Cli::Run(config)) = cli else {
            panic!("unexpected {cli:?}");
        };
        assert_eq!(config.limits, Limits::default());
    }

    #[test]
    fn help_wins() {
        assert_eq!(parse_strs(&["--root", "x", "--help"]), Ok(Cli::Help));
        assert_eq!(parse_strs(&["-h"]), Ok(Cli::Help));
    }

    #[test]
    fn errors() {
        let err = |args: &[&str]| parse_strs(args).unwrap_err();
        assert_eq!(err(&["--root", "x"]), "--listen is required");
        assert_eq!(err(&["--listen", "127.0.0.1:1"]), "--root is required");
        assert!(err(&["--listen", "nope", "--root", "x"]).contains("not an address"));
        assert_eq!(err(&["--listen"]), "--listen needs a value");
        assert!(err(&["--bogus"]).contains("unknown argument"));
        let base = ["--listen", "127.0.0.1:1", "--root", "x"];
        for bad in [
            ["--output-limit", "0"],
            ["--max-timeout-ms", "-1"],
            ["--default-timeout-ms", "abc"],
            ["--max-sessions", "0"],
        ] {
            let args: Vec<&str> = base.iter().chain(bad.iter()).copied().collect();
            assert!(err(&args).contains("positive integer"), "{bad:?}");
        }
        for bad in [
            ["--max-file-bytes", "-1"],
            ["--max-procs", "lots"],
            ["--idle-shell-secs", "-5"],
        ] {
            let args: Vec<&str> = base.iter().chain(bad.iter()).copied().collect();
            assert!(err(&args).contains("non-negative integer"), "{bad:?}");
        }
        let args = [
            &base[..],
            &["--default-timeout-ms", "9", "--max-timeout-ms", "8"],
        ]
        .concat();
        assert!(err(&args).contains("must not exceed"));
    }
}
