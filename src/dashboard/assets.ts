import { type Asset, makeAsset, once } from "../web/assets.ts"
import { BASE_CSS, bundleScript, CSS, JS, readText } from "../web/bundle.ts"

export type { Asset }

/**
 * The dashboard's script and styles, built by the service itself (src/web/bundle.ts), once per process, and served
 * with their gzip. uPlot and its stylesheet come from node_modules, bundled in: the page loads nothing from outside
 * the service.
 */
const build = async (): Promise<ReadonlyMap<string, Asset>> => {
  const script = await bundleScript(new URL("./client/main.ts", import.meta.url), "the dashboard's script")
  const uplotCss = readText(new URL(import.meta.resolve("uplot/dist/uPlot.min.css")))
  const css = [uplotCss, readText(BASE_CSS), readText(new URL("./client/app.css", import.meta.url))].join("\n")
  return new Map([
    ["app.js", makeAsset(JS, script)],
    ["app.css", makeAsset(CSS, css)]
  ])
}

/** Built on first use (or at start-up, see `warm`), then kept for the process's life. */
export const assets: () => Promise<ReadonlyMap<string, Asset>> = once(build)
