# ordo in a container: a Rust builder stage, then a distroless runtime (glibc, CA certificates, nothing
# else: no shell, no package manager) running as the unprivileged `nonroot` user (uid 65532).
#
#   docker build -t ordo .
#   docker run --rm -p 8080:8080 ordo                      # the synthetic backend, examples/container/ordo.toml
#   docker run --rm -p 8080:8080 -v $PWD/my.toml:/etc/ordo/ordo.toml:ro ordo
#
# ordo is PID 1 and needs no init: it installs its own handlers for SIGTERM/SIGINT (graceful stop within
# `shutdown_grace`, a second signal cuts it short), SIGHUP (re-read the configuration) and SIGUSR1 (reopen
# the access log), so the kernel's "PID 1 ignores unhandled signals" rule never applies to them; `ordo serve`
# starts no child processes, so there are no zombies to reap. `docker stop` sends SIGTERM and waits 10 s by
# default: set `shutdown_grace` below it (or `docker stop -t`).

# --- build ---------------------------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src
# a C compiler and make are in the image already (zstd-sys, the vendored Lua and ring compile C)
COPY . .
# no debug info and a stripped binary: the release profile keeps line tables for backtraces on a
# developer's machine; the image does not need them (about a tenth of the size)
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=true
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin ordo \
    && cp target/release/ordo /usr/local/bin/ordo

# --- run -----------------------------------------------------------------------------------------------
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/ordo /usr/local/bin/ordo
COPY examples/container/ordo.toml /etc/ordo/ordo.toml
USER nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/ordo"]
CMD ["serve", "--config", "/etc/ordo/ordo.toml"]
