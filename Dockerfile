# syntax=docker/dockerfile:1
#
# Nexus, in two stages:
#   build  installs every dependency and runs scripts/release.sh, which compiles src/ and migrations/ and
#          assembles in /release what production runs (dist/, the bundled contract, production dependencies);
#   final  node on Debian slim with /release, run as the unprivileged `node` user.
#
#   docker build -t nexus .
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://... -e NEXUS_ENCRYPTION_KEY=$(openssl rand -base64 32) nexus
#
# test/spine/release.test.ts runs the same script and this file's CMD and HEALTHCHECK as plain processes
# (it reads them from here), where no container runtime is available.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The dependencies alone, in a layer of their own (kept while the lockfile is unchanged). The project's own
# `prepare` (a build) waits for the sources: scripts are skipped here, the dependencies' own run by rebuild.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund && npm rebuild
COPY . .
RUN scripts/release.sh /release

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    NEXUS_DATA_DIR=/var/lib/nexus
WORKDIR /app
COPY --from=build /release /app
# The code belongs to root and is read-only to the server; only the data directory (the outage spool of call
# records, and the embedded database when DATABASE_URL is unset) is the node user's.
RUN mkdir -p /var/lib/nexus && chown node:node /var/lib/nexus
USER node
EXPOSE 8080
# node, not curl (the image has none): dist/healthcheck.js asks /readyz on the configured port.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["node", "dist/healthcheck.js"]
# node is PID 1: src/server.ts installs its SIGTERM and SIGINT handlers before anything else (PID 1 has no
# default action for them), drains in-flight requests within NEXUS_SHUTDOWN_TIMEOUT_MS and exits 0. Nexus
# starts no child processes, so there are no zombies to reap and no init is needed.
STOPSIGNAL SIGTERM
# --max-semi-space-size=16 (MiB): V8's young generation as on Node 20; Node 24 sizes it from the machine's memory,
# up to 64 MiB a semi-space, which held about 70 MiB more of a process's resident set. --heap-growing-percent=30: a
# full collection once the old generation has grown 30% past what survived the last one, not the fourfold V8 allows
# on a host with gigabytes of memory, where a loaded process let the calls it promoted pile up to about 200 MiB of
# garbage (docs/performance.md, "Memory").
CMD ["node", "--max-semi-space-size=16", "--heap-growing-percent=30", "--enable-source-maps", "dist/server.js"]
