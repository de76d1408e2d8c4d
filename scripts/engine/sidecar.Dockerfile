# The networking sidecar workerd starts beside each container (see
# sidecar/src/main.rs), from the binary `cargo build --release -p sidecar`
# makes on this machine, whose Debian is the base's.
FROM debian:bookworm-slim
COPY sidecar /usr/local/bin/sidecar
ENTRYPOINT ["/usr/local/bin/sidecar"]
