import { type Asset, makeAsset, once } from "../web/assets.ts"
import { BASE_CSS, bundleScript, CSS, JS, readText } from "../web/bundle.ts"

export type { Asset }

/**
 * The customer portal's script and styles (decisions.md §17), served at `/portal/assets/<name>`: built by the service
 * at first use (src/web/bundle.ts), kept with their gzip and etag. Nothing in them comes from outside the service.
 */
const build = async (): Promise<ReadonlyMap<string, Asset>> => {
  const script = await bundleScript(new URL("./client/main.ts", import.meta.url), "the portal's script")
  const css = `${readText(BASE_CSS)}\n${readText(new URL("./client/app.css", import.meta.url))}`
  return new Map([
    ["portal.js", makeAsset(JS, script)],
    ["portal.css", makeAsset(CSS, css)]
  ])
}

export const portalAssets: () => Promise<ReadonlyMap<string, Asset>> = once(build)
