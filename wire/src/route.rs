//! sandboxd's routes: the paths the worker builds and sandboxd parses,
//! written in one place.

use std::fmt;

/// A route, with the sandbox it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    Health,
    Exec(&'a str),
    ExecStream(&'a str),
    Archive(&'a str),
    /// The sandbox itself (`DELETE` ends it).
    Sandbox(&'a str),
    /// The sandbox's jobs (`POST` starts one, `GET` lists them).
    Jobs(&'a str),
    /// One job, by its id (`GET` tells of it, `DELETE` stops it).
    Job(&'a str, &'a str),
    /// One job's output stream.
    JobOutput(&'a str, &'a str),
    /// The workspace's files, by the `path` query parameter.
    Files(&'a str),
    /// The shared terminal: its screen, its output stream, what is typed
    /// into it, its size.
    Terminal(&'a str),
    TerminalOutput(&'a str),
    TerminalInput(&'a str),
    TerminalSize(&'a str),
}

const SANDBOXES: &str = "/v1/sandboxes/";

impl<'a> Route<'a> {
    /// The route `path` (without its query) names, if any. The name is taken
    /// as it comes: sandboxd judges it.
    pub fn parse(path: &'a str) -> Option<Self> {
        if path == "/health" {
            return Some(Route::Health);
        }
        let rest = path.strip_prefix(SANDBOXES)?;
        match rest.split_once('/') {
            None => Some(Route::Sandbox(rest)),
            Some((name, "exec")) => Some(Route::Exec(name)),
            Some((name, "exec/stream")) => Some(Route::ExecStream(name)),
            Some((name, "archive")) => Some(Route::Archive(name)),
            Some((name, "jobs")) => Some(Route::Jobs(name)),
            Some((name, "files")) => Some(Route::Files(name)),
            Some((name, "terminal")) => Some(Route::Terminal(name)),
            Some((name, "terminal/output")) => Some(Route::TerminalOutput(name)),
            Some((name, "terminal/input")) => Some(Route::TerminalInput(name)),
            Some((name, "terminal/size")) => Some(Route::TerminalSize(name)),
            Some((name, rest)) => match rest.strip_prefix("jobs/")?.split_once('/') {
                None => Some(Route::Job(name, rest.strip_prefix("jobs/")?)),
                Some((id, "output")) => Some(Route::JobOutput(name, id)),
                Some(_) => None,
            },
        }
    }
}

/// The route's path.
impl fmt::Display for Route<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Health => f.write_str("/health"),
            Route::Exec(name) => write!(f, "{SANDBOXES}{name}/exec"),
            Route::ExecStream(name) => write!(f, "{SANDBOXES}{name}/exec/stream"),
            Route::Archive(name) => write!(f, "{SANDBOXES}{name}/archive"),
            Route::Sandbox(name) => write!(f, "{SANDBOXES}{name}"),
            Route::Jobs(name) => write!(f, "{SANDBOXES}{name}/jobs"),
            Route::Job(name, id) => write!(f, "{SANDBOXES}{name}/jobs/{id}"),
            Route::JobOutput(name, id) => write!(f, "{SANDBOXES}{name}/jobs/{id}/output"),
            Route::Files(name) => write!(f, "{SANDBOXES}{name}/files"),
            Route::Terminal(name) => write!(f, "{SANDBOXES}{name}/terminal"),
            Route::TerminalOutput(name) => write!(f, "{SANDBOXES}{name}/terminal/output"),
            Route::TerminalInput(name) => write!(f, "{SANDBOXES}{name}/terminal/input"),
            Route::TerminalSize(name) => write!(f, "{SANDBOXES}{name}/terminal/size"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths() {
        assert_eq!(Route::parse("/health"), Some(Route::Health));
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/exec"),
            Some(Route::Exec("r1"))
        );
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/exec/stream"),
            Some(Route::ExecStream("r1"))
        );
        assert_eq!(Route::parse("/v1/sandboxes/r1"), Some(Route::Sandbox("r1")));
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/archive"),
            Some(Route::Archive("r1"))
        );
        assert_eq!(Route::parse("/v1/sandboxes//exec"), Some(Route::Exec("")));
        assert_eq!(Route::parse("/v1/sandboxes/r1/run"), None);
        assert_eq!(Route::parse("/v1/sandboxes/r1/exec/x"), None);
        assert_eq!(Route::parse("/v1/sandboxes"), None);
        assert_eq!(Route::parse("/"), None);
        assert_eq!(Route::parse("/health/"), None);
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/jobs"),
            Some(Route::Jobs("r1"))
        );
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/jobs/j-1"),
            Some(Route::Job("r1", "j-1"))
        );
        assert_eq!(
            Route::parse("/v1/sandboxes/r1/jobs/j-1/output"),
            Some(Route::JobOutput("r1", "j-1"))
        );
        assert_eq!(Route::parse("/v1/sandboxes/r1/jobs/j-1/x"), None);
        assert_eq!(Route::parse("/v1/sandboxes/r1/jobs/j-1/output/x"), None);
        assert_eq!(Route::parse("/v1/sandboxes/r1/terminal/x"), None);
    }

    #[test]
    fn a_built_path_parses_back_to_its_route() {
        let name = "sandbox-r_1";
        for route in [
            Route::Health,
            Route::Exec(name),
            Route::ExecStream(name),
            Route::Archive(name),
            Route::Sandbox(name),
            Route::Jobs(name),
            Route::Job(name, "j1"),
            Route::JobOutput(name, "j1"),
            Route::Files(name),
            Route::Terminal(name),
            Route::TerminalOutput(name),
            Route::TerminalInput(name),
            Route::TerminalSize(name),
        ] {
            assert_eq!(Route::parse(&route.to_string()), Some(route));
        }
        assert_eq!(Route::Exec("r").to_string(), "/v1/sandboxes/r/exec");
    }
}
