// Builds the typed client that other projects import as `billing-service/client` (package.json "exports"): src/api
// compiled to JavaScript and declarations in dist/client, relative imports ending in `.js`, so a consumer needs no
// `.ts`-extension settings and type-checks nothing of this project's sources. src/api imports nothing of the server:
// the client loads `effect` and `@effect/platform` only. Runs as `prepare` (after `npm install`, and when another
// project installs this one from git); skipped where TypeScript is not installed (the image: `--omit=dev`).
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const tsc = "node_modules/typescript/bin/tsc"
if (!existsSync(tsc)) {
  console.error("build-client: TypeScript is not installed; dist/client not built")
  process.exit(0)
}
const out = "dist/client"
rmSync(out, { recursive: true, force: true })
execFileSync(process.execPath, [tsc, "-p", "tsconfig.client.json"], { stdio: "inherit" })
// tsc rewrites `./x.ts` to `./x.js` in the JavaScript it emits, not in declarations.
for (const file of readdirSync(out).filter((f) => f.endsWith(".d.ts"))) {
  const path = join(out, file)
  writeFileSync(path, readFileSync(path, "utf8").replace(/(from\s+["']\.{1,2}\/[^"']+)\.ts(["'])/g, "$1.js$2"))
}
