/**
 * The container's health check, run by the image's own Bun (the final stage has no Node):
 * `bun src/healthcheck.ts` exits 0 when `/ready` answers 200 on this machine's PORT (default 3000), else 1.
 */
const port = process.env.PORT ?? "3000"
const ready = await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(2500) }).then(
  (response) => response.ok,
  () => false
)
process.exit(ready ? 0 : 1)
export {}
