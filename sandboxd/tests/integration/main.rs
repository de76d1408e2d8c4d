//! Integration tests: the real sandboxd binary driving real bash.

mod api;
mod harness;
mod limits;
mod shell;
