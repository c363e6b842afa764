import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * Building the service's own pages' scripts and styles (the dashboard's, the customer portal's): Bun.build at first
 * use, the one build step (nothing to run after `npm install`); `makeAsset` (./assets.ts) compresses them. Everything a
 * page needs is bundled in, so it loads nothing from outside the service.
 */

export const JS = "text/javascript; charset=utf-8"
export const CSS = "text/css; charset=utf-8"

/** One browser script, minified, with everything it imports. */
export const bundleScript = async (entry: URL, what: string): Promise<string> => {
  const result = await Bun.build({
    entrypoints: [fileURLToPath(entry)],
    target: "browser",
    minify: true,
    format: "esm"
  })
  const output = result.outputs[0]
  if (!result.success || output === undefined) throw new Error(`${what} did not build`)
  return output.text()
}

export const readText = (file: URL): string => readFileSync(fileURLToPath(file), "utf8")

/** The rules both pages share (colours, cards, tables, buttons, usage bars), put before each page's own. */
export const BASE_CSS = new URL("./client/base.css", import.meta.url)
