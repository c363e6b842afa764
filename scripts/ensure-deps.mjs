// Runs before `npm start`, `npm test` and `npm run cli`: installs the pinned dependencies
// (Bun included, from npm) when node_modules is missing or older than the lockfile, so a
// fresh clone needs nothing but Node and npm.
import { existsSync, statSync } from "node:fs"
import { execSync } from "node:child_process"

const marker = "node_modules/.package-lock.json"
const stale =
  !existsSync("node_modules/.bin/bun") ||
  !existsSync(marker) ||
  statSync("package-lock.json").mtimeMs > statSync(marker).mtimeMs
if (stale) {
  // stdout stays clean for `npm run --silent cli -- ... --json`
  // `npm install` honours the lockfile; `npm ci` refuses this one (npm 11 omits the other platforms' optional
  // msgpackr-extract binaries from it and then calls it out of sync).
  execSync("npm install --no-audit --no-fund --loglevel=error", { stdio: ["ignore", 2, 2] })
}
