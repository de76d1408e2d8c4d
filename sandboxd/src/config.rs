//! Command-line options.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use duet_wire::RESTORE_MAX_MS;

use crate::rlimits::Limits;

/// Serves one persistent bash session per sandbox name over HTTP/JSON.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on, e.g. 0.0.0.0:8080 (port 0 picks one)
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Directory holding one workspace per sandbox (created if missing)
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Timeout of a command that names none
    #[arg(long, value_name = "N", default_value_t = 20_000, value_parser = positive())]
    default_timeout_ms: u64,
    /// Largest timeout a command may ask for
    #[arg(long, value_name = "N", default_value_t = 120_000, value_parser = positive())]
    max_timeout_ms: u64,
    /// Bytes kept per stream of a command
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024, value_parser = positive())]
    output_limit: u64,
    /// Largest file a command may write (RLIMIT_FSIZE); 0 for no limit
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024 * 1024)]
    max_file_bytes: u64,
    /// Processes and threads the shells' user may have in all (RLIMIT_NPROC:
    /// counts sandboxd and every sandbox of that user; root is exempt); 0 for
    /// no limit
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_procs: u64,
    /// Most sandboxes holding a shell at once
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_SESSIONS))]
    max_sessions: u64,
    /// End a shell after this long without a command (its files stay); 0
    /// for never
    #[arg(long, value_name = "N", default_value_t = 900)]
    idle_shell_secs: u64,
    /// Largest gzipped workspace archive sent or accepted
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024, value_parser = positive())]
    max_archive_bytes: u64,
    /// Most bytes a restored archive may unpack to, tar headers included; a
    /// workspace over it is not archived [default: 4 × --max-archive-bytes]
    #[arg(long, value_name = "BYTES", value_parser = positive())]
    max_restore_bytes: Option<u64>,
    /// Most entries (files, directories, symlinks) a restored archive may
    /// hold; a workspace with more is not archived
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RESTORE_ENTRIES, value_parser = positive())]
    max_restore_entries: u64,
    /// Longest restore a workspace may need, as estimated from its entries
    /// and bytes (the wire crate's restore_ms); a workspace over it is not
    /// archived
    #[arg(long, value_name = "N", default_value_t = RESTORE_MAX_MS, value_parser = positive())]
    max_restore_ms: u64,
}

/// A restore of this many empty files took about 1 s into fresh inodes and
/// up to 30 s just after as many were removed (docs/sandbox-limits.md); the
/// estimate of a restore this large (`duet_wire::restore_ms`), with the
/// default byte bound full too, stays within `RESTORE_MAX_MS`.
const DEFAULT_RESTORE_ENTRIES: u64 = 30_000;

/// Far beyond any machine, and within what tokio's semaphore can count.
const MAX_SESSIONS: u64 = 1 << 20;

fn positive() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(1..)
}

#[derive(Debug, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub root: PathBuf,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub output_limit: usize,
    pub limits: Limits,
    pub max_sessions: usize,
    /// `None`: shells are never ended for being idle.
    pub idle_shell: Option<Duration>,
    pub max_archive_bytes: u64,
    pub max_restore_bytes: u64,
    pub max_restore_entries: u64,
    pub max_restore_ms: u64,
}

/// Parses the command line, program name first. `--help` and `--version`
/// come back as errors too; `clap::Error::exit` prints each as it should.
pub fn parse<I, T>(args: I) -> Result<Config, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::try_parse_from(args)?;
    if args.default_timeout_ms > args.max_timeout_ms {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "--default-timeout-ms must not exceed --max-timeout-ms\n",
        ));
    }
    let too_large = |flag: &str| {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("{flag} is too large for this machine\n"),
        )
    };
    Ok(Config {
        listen: args.listen,
        root: args.root,
        default_timeout_ms: args.default_timeout_ms,
        max_timeout_ms: args.max_timeout_ms,
        output_limit: usize::try_from(args.output_limit)
            .map_err(|_| too_large("--output-limit"))?,
        limits: Limits {
            file_bytes: (args.max_file_bytes > 0).then_some(args.max_file_bytes),
            procs: (args.max_procs > 0).then_some(args.max_procs),
        },
        max_sessions: usize::try_from(args.max_sessions)
            .map_err(|_| too_large("--max-sessions"))?,
        idle_shell: (args.idle_shell_secs > 0).then(|| Duration::from_secs(args.idle_shell_secs)),
        max_archive_bytes: args.max_archive_bytes,
        max_restore_bytes: args
            .max_restore_bytes
            .unwrap_or(args.max_archive_bytes.saturating_mul(4)),
        max_restore_entries: args.max_restore_entries,
        max_restore_ms: args.max_restore_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse_strs(args: &[&str]) -> Result<Config, clap::Error> {
        parse(std::iter::once("sandboxd").chain(args.iter().copied()))
    }

    fn err(args: &[&str]) -> (ErrorKind, String) {
        let e = parse_strs(args).unwrap_err();
        (e.kind(), e.to_string())
    }

    #[test]
    fn args_are_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let config = parse_strs(&["--listen", "127.0.0.1:8790", "--root", "/srv/sbx"]);
        assert_eq!(
            config.unwrap(),
            Config {
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
                idle_shell: Some(Duration::from_secs(900)),
                max_archive_bytes: 64 << 20,
                max_restore_bytes: 256 << 20,
                max_restore_entries: DEFAULT_RESTORE_ENTRIES,
                max_restore_ms: RESTORE_MAX_MS,
            }
        );
    }

    #[test]
    fn the_default_bounds_restore_within_the_longest_restore_accepted() {
        let config = parse_strs(&["--listen=127.0.0.1:1", "--root=x"]).unwrap();
        let longest = duet_wire::restore_ms(config.max_restore_entries, config.max_restore_bytes);
        assert!(longest <= config.max_restore_ms, "{longest} ms");
    }

    #[test]
    fn all_options_both_spellings() {
        let config = parse_strs(&[
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
            "--max-archive-bytes=1000",
            "--max-restore-bytes",
            "3000",
            "--max-restore-entries=40",
            "--max-restore-ms",
            "700",
        ])
        .unwrap();
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
        assert_eq!(config.max_sessions, 3);
        assert_eq!(config.idle_shell, Some(Duration::from_secs(60)));
        assert_eq!(
            (
                config.max_archive_bytes,
                config.max_restore_bytes,
                config.max_restore_entries
            ),
            (1000, 3000, 40)
        );
        assert_eq!(config.max_restore_ms, 700);
        let config = parse_strs(&["--listen=127.0.0.1:1", "--root=x", "--max-archive-bytes=7"]);
        assert_eq!(config.unwrap().max_restore_bytes, 28, "4 × the archive cap");
    }

    #[test]
    fn zero_turns_a_limit_off() {
        let config = parse_strs(&[
            "--listen=127.0.0.1:1",
            "--root=x",
            "--max-file-bytes=0",
            "--max-procs=0",
            "--idle-shell-secs=0",
        ])
        .unwrap();
        assert_eq!(config.limits, Limits::default());
        assert_eq!(config.idle_shell, None);
    }

    #[test]
    fn help_and_version() {
        assert_eq!(err(&["--root", "x", "--help"]).0, ErrorKind::DisplayHelp);
        let (kind, help) = err(&["-h"]);
        assert_eq!(kind, ErrorKind::DisplayHelp);
        for flag in [
            "--listen <ADDR>",
            "--max-sessions <N>",
            "--idle-shell-secs <N>",
        ] {
            assert!(help.contains(flag), "{flag} missing from {help}");
        }
        let (kind, version) = err(&["--version"]);
        assert_eq!(kind, ErrorKind::DisplayVersion);
        assert_eq!(version, format!("sandboxd {}\n", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn errors() {
        let (kind, msg) = err(&["--root", "x"]);
        assert_eq!(kind, ErrorKind::MissingRequiredArgument);
        assert!(msg.contains("--listen"), "{msg}");
        assert!(err(&["--listen", "127.0.0.1:1"]).1.contains("--root"));
        assert!(err(&["--listen", "nope", "--root", "x"])
            .1
            .contains("invalid"));
        assert!(err(&["--listen"]).1.contains("a value is required"));
        assert_eq!(err(&["--bogus"]).0, ErrorKind::UnknownArgument);
        let base = ["--listen", "127.0.0.1:1", "--root", "x"];
        // (A negative number needs the `=` form; alone it reads as a flag.)
        for bad in [
            "--output-limit=0",
            "--max-timeout-ms=-1",
            "--default-timeout-ms=abc",
            "--max-sessions=0",
            "--max-sessions=99999999",
            "--max-file-bytes=-1",
            "--max-procs=lots",
            "--idle-shell-secs=-5",
            "--max-archive-bytes=0",
            "--max-restore-bytes=0",
            "--max-restore-entries=0",
            "--max-restore-ms=0",
        ] {
            let args: Vec<&str> = base.iter().copied().chain([bad]).collect();
            let (kind, msg) = err(&args);
            assert_eq!(kind, ErrorKind::ValueValidation, "{bad}: {msg}");
            let flag = bad.split('=').next().unwrap();
            assert!(msg.contains(flag), "{bad}: {msg}");
        }
        let args = [
            &base[..],
            &["--default-timeout-ms", "9", "--max-timeout-ms", "8"],
        ]
        .concat();
        assert!(err(&args).1.contains("must not exceed"));
    }
}
