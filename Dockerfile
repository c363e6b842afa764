# docker build -t billing-service .
# Sandbox, data in a volume:  docker run -p 3000:3000 -v billing-data:/app/data billing-service
# Live, on PostgreSQL:        docker run -p 3000:3000 -e DATABASE_URL=postgres://... -e APP_ENV=live \
#                               -e ENCRYPTION_KEY=<64 hex> billing-service
#
# Build stage: Node and npm install the production dependencies from the lockfile (Bun among them) by the same
# script test/container.test.ts runs into a temporary directory (scripts/build-image-fs.sh, which says how
# reproducible npm makes this).
FROM node:20-bookworm-slim AS build
WORKDIR /build
COPY package.json package-lock.json .npmrc ./
COPY scripts/build-image-fs.sh scripts/
COPY src ./src
RUN sh scripts/build-image-fs.sh . /out 10001:10001

# Final stage: what it adds to debian:bookworm-slim (the distribution of the build stage, so Bun's glibc binary
# runs) is one system user `billing` (uid/gid 10001, no shell, no home), /app (package.json, the lockfile, src/ and
# node_modules with the Bun binary, owned by root: read-only to the service) and /app/data (the user's, a volume).
# No Node, no npm: Bun runs the service and its health check.
FROM debian:bookworm-slim
RUN groupadd --system --gid 10001 billing \
  && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin billing
WORKDIR /app
COPY --from=build /out/app /app
COPY --from=build --chown=10001:10001 /out/app/data /app/data
# JavaScriptCore sizes its heap from the machine's RAM; sized as for 1 GiB it collects sooner and the service stays
# near 200 MB under load instead of 300+ on a large machine. Bun's allocator (mimalloc) hands freed native memory back
# to the kernel after 10 s unused instead of 100 ms, so that under load it is not returned and faulted in again: less
# CPU per request, the same resident size (docs/decisions.md, "Performance").
ENV NODE_ENV=production PORT=3000 DATA_DIR=/app/data \
  BUN_JSC_forceRAMSize=1073741824 MIMALLOC_PURGE_DELAY=10000 MIMALLOC_PURGE_HOLES=0
VOLUME /app/data
USER billing
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s CMD ["/app/node_modules/.bin/bun", "/app/src/healthcheck.ts"]
# exec form: the service receives SIGTERM directly and drains in-flight requests.
CMD ["/app/node_modules/.bin/bun", "src/main.ts"]
