import { afterEach, expect, test } from "bun:test"
import { existsSync } from "node:fs"
import { chromium } from "playwright-core"
import { browserSource, CHROMIUM_ARGS } from "./support/browser.ts"
import { packagedChromium } from "./support/packagedChromium.ts"

// The browser tests need no system browser: without one they drive the Chromium inside the @sparticuz/chromium
// devDependency. This runs that one whatever the machine has, so the fallback a fresh clone meets is always exercised.

const saved = process.env.CHROMIUM_PATH
afterEach(() => {
  if (saved === undefined) delete process.env.CHROMIUM_PATH
  else process.env.CHROMIUM_PATH = saved
})

test("a CHROMIUM_PATH that names no file falls back to the packaged Chromium", () => {
  process.env.CHROMIUM_PATH = "/nonexistent/chromium"
  const found = browserSource()
  expect(found.source).toBe("package")
  expect(existsSync(found.executablePath)).toBe(true)
})

test("a CHROMIUM_PATH that names a file is the browser used", () => {
  process.env.CHROMIUM_PATH = process.execPath // any existing file: only the choice is checked here
  expect(browserSource()).toEqual({ source: "system", executablePath: process.execPath })
})

test("the packaged Chromium runs headless: scripts, layout, canvas and a screenshot", async () => {
  const packaged = packagedChromium()
  const browser = await chromium.launch({
    executablePath: packaged.executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    env: { ...process.env, LANG: "C.UTF-8", ...packaged.env }
  })
  try {
    const page = await browser.newPage({ viewport: { width: 400, height: 300 } })
    await page.setContent(
      `<h1 style="font:32px sans-serif">Invoices</h1><canvas width="100" height="50"></canvas>` +
        `<script>const c=document.querySelector("canvas").getContext("2d");c.fillRect(0,0,100,50);` +
        `document.body.dataset.ready="1"</script>`
    )
    await page.waitForSelector("body[data-ready]")
    expect(await page.textContent("h1")).toBe("Invoices")
    // Text was laid out with a real font (a missing font configuration draws nothing: zero width).
    expect(await page.$eval("h1", (h) => h.getBoundingClientRect().width)).toBeGreaterThan(50)
    const painted = await page.$eval("canvas", (c: any) => c.getContext("2d").getImageData(0, 0, 100, 50).data[3])
    expect(painted).toBe(255)
    // The default locale is one its Intl accepts, whatever LANG the tests run under.
    expect(await page.evaluate(() => (1234.5).toLocaleString() + " " + new Date(0).toLocaleDateString())).toBeString()
    expect((await page.screenshot()).length).toBeGreaterThan(1_000)
  } finally {
    await browser.close()
  }
}, 60_000)
