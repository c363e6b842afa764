# The service on PostgreSQL: docker run -e DATABASE_URL=postgres://... -p 3000:3000 billing-service
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# Bun is a pinned npm dependency; dev tools (TypeScript, types) stay out of the image.
RUN npm install --omit=dev --no-audit --no-fund --loglevel=error

FROM node:20-bookworm-slim
WORKDIR /app
# JavaScriptCore sizes its heap from the machine's RAM; sized as for 1 GiB it collects sooner and the service stays
# near 200 MB under load instead of 300+ on a large machine. Bun's allocator (mimalloc) hands freed native memory back
# to the kernel after 10 s unused instead of 100 ms, so that under load it is not returned and faulted in again: less
# CPU per request, the same resident size (docs/decisions.md, "Performance").
ENV NODE_ENV=production PORT=3000 BUN_JSC_forceRAMSize=1073741824 MIMALLOC_PURGE_DELAY=10000 MIMALLOC_PURGE_HOLES=0
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# exec form: the service receives SIGTERM directly and drains in-flight requests.
CMD ["node_modules/.bin/bun", "src/main.ts"]
