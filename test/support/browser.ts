import { existsSync } from "node:fs"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { packagedChromium } from "./packagedChromium.ts"

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

export interface BrowserSource {
  readonly source: "system" | "package"
  readonly executablePath: string
  readonly env?: Record<string, string>
}

/**
 * Where the browser tests' Chromium comes from: the system's when one is installed (`CHROMIUM_PATH` when set, else
 * Debian's package at /usr/bin/chromium), else the headless shell that the devDependency `@sparticuz/chromium` ships
 * inside its tarball (test/support/packagedChromium.ts). Either way playwright-core drives it and nothing is
 * downloaded. A `CHROMIUM_PATH` that names nothing (`/nonexistent`) therefore picks the packaged one: how `.ci/run`
 * exercises it on a machine that has Debian's.
 */
export const browserSource = (): BrowserSource => {
  const system = process.env.CHROMIUM_PATH || "/usr/bin/chromium"
  if (existsSync(system)) return { source: "system", executablePath: system }
  const packaged = packagedChromium()
  return { source: "package", executablePath: packaged.executablePath, env: packaged.env }
}

/**
 * Headless chromium with a fresh profile (playwright gives every launch its own temporary user-data-dir). Fails
 * loudly when no browser can be had: a browser test never passes by skipping.
 */
export const launchBrowser = async (): Promise<Browser> => {
  const found = browserSource()
  return chromium.launch({
    executablePath: found.executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    ...(found.env === undefined ? {} : { env: { ...process.env, ...found.env } })
  })
}

export interface Watched {
  readonly context: BrowserContext
  readonly page: Page
  /** Requests to anywhere but the service (recorded, to fail the test). */
  readonly outside: Array<string>
  /** Console errors and uncaught exceptions of the page. */
  readonly errors: Array<string>
  /** Dialogs (alert, confirm) the page opened: an injected script would open one. */
  readonly dialogs: Array<string>
}

/** A new context (its own cookies) and page, watching every request, console error and dialog. */
export const watchedPage = async (browser: Browser, baseUrl: string): Promise<Watched> => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const outside: Array<string> = []
  const errors: Array<string> = []
  const dialogs: Array<string> = []
  // Watched, not intercepted (interception pauses every request of every page): the page's policy already stops what a
  // script would send elsewhere, and any request that does leave is recorded here and fails the test.
  context.on("request", (request) => {
    const url = request.url()
    if (!url.startsWith(`${baseUrl}/`) && url !== baseUrl && !url.startsWith("data:")) outside.push(url)
  })
  const page = await context.newPage()
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text())
  })
  page.on("pageerror", (error) => errors.push(String(error)))
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message())
    void dialog.dismiss()
  })
  return { context, page, outside, errors, dialogs }
}

/** Opens a dashboard URL and waits until its script marks the view interactive. */
export const openView = async (page: Page, url: string) => {
  await page.goto(url)
  await page.waitForSelector("body[data-ready]", { timeout: 10_000 })
}
