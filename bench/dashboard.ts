/**
 * The dashboard in a real browser (issue 16): is each view interactive within a second over a seeded organization
 * of 1,000 customers and 100,000 usage events? Not a test: a measurement, printed.
 *
 *   node_modules/.bin/bun bench/dashboard.ts [--customers 1000] [--events 100000] [--runs 5]
 *     [--screenshot docs/dashboard-customer.png]      # also writes the README's picture of the customer view
 *     [--profile-screenshot docs/dashboard-billing-profile.png]   # and of the billing profile view
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/billing_bench_dash node_modules/.bin/bun bench/dashboard.ts
 *
 * The service runs in-process (`makeApp` + `serve`, a real port) on SQLite (a file in a temporary directory) or on
 * PostgreSQL when DATABASE_URL is set (use a dedicated database: each run makes a new organization). The data is made
 * through `/v1` only (src/dashboard/sample.ts): the catalog, the customers, paid plans through the simulated
 * provider's checkout, then every usage event a `/v1/track` at its own instant over the last 30 days (the service's
 * clock is moved; tracks go 16 at a time). Then headless chromium (the system's, else the packaged one:
 * test/support/browser.ts) signs in and opens each view `--runs` times; "interactive" is when the view's script has rendered its data (charts drawn) and
 * marked the page (`body[data-ready]`, a `performance.now()` since navigation start). Printed: median and worst per
 * view, and the script's gzip size.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, LogLevel, Option, Redacted } from "effect"
import { makeApp } from "../src/app/App.ts"
import { assets } from "../src/dashboard/assets.ts"
import { seedSample, type Send } from "../src/dashboard/sample.ts"
import { serve } from "../src/http/server.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { makeShiftedClock } from "../src/platform/shiftedClock.ts"
import { AppConfigTest } from "../src/platform/config.ts"
import { launchBrowser } from "../test/support/browser.ts"

const { values: args } = parseArgs({
  options: {
    customers: { type: "string", default: "1000" },
    events: { type: "string", default: "100000" },
    runs: { type: "string", default: "5" },
    screenshot: { type: "string" },
    "profile-screenshot": { type: "string" }
  }
})

// The service's clock, movable: the seed places each event at its own instant.
const movable = makeShiftedClock()
const clock = movable.clock

const url = process.env.DATABASE_URL?.trim()
const dir = mkdtempSync(join(tmpdir(), "bench-dashboard-"))
const app = makeApp(
  AppConfigTest(url ? { databaseUrl: Option.some(Redacted.make(url)) } : { dataDir: join(dir, "data") }),
  { clock }
)
const seconds = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)} s`
try {
  await app.runtime.runPromise(Effect.void)
  await app.ready
  const server = serve(app, { port: 0, hostname: "127.0.0.1", logLevel: LogLevel.None, requestTimeoutMs: 30_000 })
  const base = `http://127.0.0.1:${server.port}`
  const { apiKey, slug } = await app.runtime.runPromise(
    Effect.gen(function* () {
      const orgs = yield* Organizations
      const org = yield* orgs.create(`bench-dash-${crypto.randomUUID().slice(0, 8)}`)
      return { apiKey: (yield* orgs.createKey(org.id)).apiKey, slug: org.slug }
    })
  )
  const send: Send = async (method, path, body) => {
    const response = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text.startsWith("{") ? JSON.parse(text) : text }
  }
  let started = performance.now()
  const sampled = await seedSample(send, {
    customers: Number(args.customers),
    events: Number(args.events),
    paidEvery: 5,
    invoices: 20,
    concurrency: 16,
    clock: movable
  })
  console.log(
    `seeded ${slug} on ${url ? "postgresql" : "sqlite"}: ${sampled.customers.length} customers, ` +
      `${sampled.paid.length} paid, ${sampled.tracked} of ${args.events} tracks allowed, ` +
      `${sampled.invoices.length} invoices, in ${seconds(started)}`
  )

  const script = (await assets()).get("app.js")!
  console.log(`app.js: ${(script.body.length / 1024).toFixed(1)} KB, ${(script.gzip.length / 1024).toFixed(1)} KB gzip`)

  const browser = await launchBrowser()
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  const signed = await context.request.post(`${base}/dashboard/sign-in`, {
    headers: { origin: base },
    data: { key: apiKey }
  })
  if (signed.status() !== 200) throw new Error(`sign-in: ${signed.status()}`)
  const busiest = sampled.customers.find((c) => c.externalId === sampled.paid[0])!
  const views: Array<readonly [string, string]> = [
    ["overview", "/dashboard"],
    ["customers", "/dashboard/customers"],
    ["customers, search", "/dashboard/customers?q=lovelace"],
    ["customers, page 10", "/dashboard/customers?page=9"],
    ["customer", `/dashboard/customers/${busiest.id}`],
    ["catalog", "/dashboard/catalog"],
    ["invoices", "/dashboard/invoices"],
    ["webhooks", "/dashboard/webhooks"],
    ["API keys", "/dashboard/keys"]
  ]
  const runs = Number(args.runs)
  console.log(`\nview                  median    worst   (ms to interactive, ${runs} runs, after one warm-up)`)
  for (const [name, path] of views) {
    const times: Array<number> = []
    for (let i = 0; i <= runs; i++) {
      await page.goto(base + path)
      await page.waitForSelector("body[data-ready]", { timeout: 30_000 })
      const ready = Number(await page.getAttribute("body", "data-ready"))
      const error = await page.textContent("#flash")
      if (error) throw new Error(`${name}: ${error}`)
      if (i > 0) times.push(ready)
    }
    times.sort((a, b) => a - b)
    const median = times[Math.floor(times.length / 2)]!
    console.log(`${name.padEnd(20)} ${median.toFixed(0).padStart(7)}  ${times.at(-1)!.toFixed(0).padStart(7)}`)
  }
  if (args.screenshot !== undefined || args["profile-screenshot"] !== undefined) {
    // The pictures show the billing pieces too (after the timings, which they do not change): a seller profile, and
    // the pictured customer's billing details and a promotion code, all through /v1 as a vendor would set them.
    const profiled = await send("POST", "/v1/billing/profile", {
      legalName: "Ọlájídé Ventures Ltd",
      email: "billing@olajide.example",
      taxId: "NG-TIN-01234567",
      invoicePrefix: "OLA",
      address: { line1: "12 Marina", city: "Lagos", state: "Lagos", country: "NG" },
      footer: "Thank you for your business. Bank transfers: Zenith Bank 1234567890."
    })
    const detailed = await send("POST", "/v1/customers", {
      id: busiest.externalId,
      email: (await send("GET", `/v1/customers/${busiest.id}`)).body.email,
      address: { line1: "3 Admiralty Way", city: "Lekki", state: "Lagos", country: "NG" },
      taxIds: [{ type: "ng_tin", value: "98765432-0001" }]
    })
    const discounted = await send("POST", `/v1/customers/${busiest.id}/discount`, { promotionCode: "WELCOME20" })
    for (const [what, answer] of [
      ["profile", profiled],
      ["customer", detailed],
      ["discount", discounted]
    ] as const) {
      if (answer.status !== 200) throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body)}`)
    }
  }
  if (args.screenshot !== undefined) {
    await page.goto(`${base}/dashboard/customers/${busiest.id}`)
    await page.waitForSelector("body[data-ready]")
    await page.screenshot({ path: args.screenshot, fullPage: true })
    console.log(`\nwrote ${args.screenshot}`)
  }
  if (args["profile-screenshot"] !== undefined) {
    await page.goto(`${base}/dashboard/billing-profile`)
    await page.waitForSelector("body[data-ready]")
    await page.screenshot({ path: args["profile-screenshot"], fullPage: true })
    console.log(`wrote ${args["profile-screenshot"]}`)
  }
  await browser.close()
  server.stop(true)
} finally {
  await app.dispose()
  rmSync(dir, { recursive: true, force: true })
}
