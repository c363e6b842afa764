import { existsSync } from "node:fs"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"

/** Debian's `chromium` package (`.ci/run` installs it), driven by playwright-core: no browser download. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/**
 * Headless chromium with a fresh profile (playwright gives every launch its own temporary user-data-dir). Fails
 * loudly when the browser is missing: a browser test never passes by skipping.
 */
export const launchBrowser = async (): Promise<Browser> => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (what .ci/run does)`)
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS })
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
