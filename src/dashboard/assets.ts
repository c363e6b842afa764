import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { type Asset, makeAsset, once } from "../web/assets.ts"

export type { Asset }

/**
 * The dashboard's script and styles, built by the service itself (Bun.build, the one build step: nothing to run
 * after `npm install`), once per process, and served with their gzip. uPlot and its stylesheet come from
 * node_modules, bundled in: the page loads nothing from outside the service.
 */
const build = async (): Promise<ReadonlyMap<string, Asset>> => {
  const entry = fileURLToPath(new URL("./client/main.ts", import.meta.url))
  const result = await Bun.build({ entrypoints: [entry], target: "browser", minify: true, format: "esm" })
  const output = result.outputs[0]
  if (!result.success || output === undefined) throw new Error("the dashboard's script did not build")
  const uplotCss = readFileSync(fileURLToPath(import.meta.resolve("uplot/dist/uPlot.min.css")), "utf8")
  const ownCss = readFileSync(fileURLToPath(new URL("./client/app.css", import.meta.url)), "utf8")
  return new Map([
    ["app.js", makeAsset("text/javascript; charset=utf-8", await output.text())],
    ["app.css", makeAsset("text/css; charset=utf-8", `${uplotCss}\n${ownCss}`)]
  ])
}

/** Built on first use (or at start-up, see `warm`), then kept for the process's life. */
export const assets: () => Promise<ReadonlyMap<string, Asset>> = once(build)
