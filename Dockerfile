# Duet sandbox image: the shared shell of a Duet room.
#
# Runs sandboxd, which keeps one persistent bash session per sandbox name,
# each in its own directory under /workspace, and serves them over HTTP/JSON
# on port 8080. The worker's Sandbox Durable Object talks to that port.
#
# Build from the repository root: docker build -t duet-sandbox .
# scripts/image-check builds it on the tests' own Docker engine, runs the
# image and checks what a room needs of it (see the README).

FROM rust:1-slim-bookworm AS build
WORKDIR /src
# Cargo loads the whole workspace: the worker package's and the test
# sidecar's manifests come along with empty sources in place of theirs (only
# sandboxd and the wire crate it shares with the worker are compiled, so a
# change to the worker alone does not rebuild sandboxd), and the patched
# crate the workspace's manifest names (vendor/).
COPY Cargo.toml Cargo.lock ./
COPY vendor ./vendor
COPY sidecar/Cargo.toml ./sidecar/
RUN mkdir -p src sidecar/src && touch src/lib.rs sidecar/src/main.rs
COPY wire ./wire
COPY sandboxd ./sandboxd
RUN cargo build --release -p sandboxd --locked \
    && install -m 0755 target/release/sandboxd /usr/local/bin/sandboxd

FROM debian:bookworm-slim
# What a pair-programming room needs to clone, build and test a project:
# git and curl; C and C++ (build-essential, pkg-config: also what native
# Python and Node packages compile with); Python with pip and venv; Node.js
# with npm; and the usual archive and text tools. Go and Rust toolchains are
# large and versioned per project: a room installs the one it needs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bash ca-certificates coreutils curl git tini \
        build-essential pkg-config \
        python3 python3-pip python3-venv \
        nodejs npm \
        jq less procps unzip xz-utils zip file \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --shell /bin/bash sandbox \
    && mkdir /workspace \
    && chown sandbox:sandbox /workspace
COPY --from=build /usr/local/bin/sandboxd /usr/local/bin/sandboxd
USER sandbox
WORKDIR /workspace
EXPOSE 8080
# tini is PID 1: it forwards SIGTERM to sandboxd and reaps orphaned
# processes of the shells.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sandboxd", "--listen", "0.0.0.0:8080", "--root", "/workspace", "--max-procs", "512"]
