import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { copyFileSync, mkdirSync } from "node:fs"
import { Clock, Effect } from "effect"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { formatMinor } from "../../src/domain/majorUnits.ts"
import { Credits } from "../../src/credits/Credits.ts"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { launchBrowser, openView, watchedPage, type Watched } from "../support/browser.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { HOSTILE, portalCatalog } from "./support.ts"

// The customer portal in a real browser (issue 36, decisions.md §17): a vendor creates a session through /v1, the
// customer's browser opens its link, and every view is checked against what /v1 says; then the changes a customer
// makes (plan change with its preview, cancel and undo, payment methods), each checked through /v1, and the refusals
// (another origin, no CSRF token, another customer's ids). `PORTAL_SCREENSHOTS=docs` also writes docs/portal-*.png.

/** Browser steps on a shared 2-core machine: generous, so a slow moment is not a failure (a timeout kills chromium). */
const T = 60_000
const SHOTS = new URL("./screenshots/", import.meta.url).pathname
const DOCS = process.env.PORTAL_SCREENSHOTS === "docs" ? new URL("../../docs/", import.meta.url).pathname : null
mkdirSync(SHOTS, { recursive: true })
const VENDOR = "Acme Cloud Ltd"
/** The README's pictures: each view at a desktop's width, the overview at a phone's. */
const IN_DOCS = new Set(["overview", "invoices", "payment-methods", "plans", "phone"])

/** support.ts's portal plans (Free, Pro; Team is not offered) and a bigger one to move up to. */
const CATALOG = {
  ...portalCatalog,
  plans: [
    ...portalCatalog.plans,
    {
      slug: "scale",
      name: "Scale",
      price: 1200000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "main",
      portal: true,
      features: [
        { slug: "tokens", limit: 20000, reset: "monthly" },
        { slug: "support", enabled: true }
      ]
    },
    // Not offered in the portal: a vendor attaches them through /v1 (a trial; a second plan group's paid plan, so
    // that attaching it makes a subscription waiting for its first payment rather than a change of Free).
    {
      slug: "trial-pro",
      name: "Pro trial",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "trials",
      trialDays: 14,
      features: [{ slug: "tokens", limit: 5000, reset: "monthly" }]
    },
    {
      slug: "extra",
      name: "Extra seats",
      price: 150000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "extras",
      features: [{ slug: "support", enabled: true }]
    }
  ]
}

let browser: Browser
beforeAll(async () => {
  browser = await launchBrowser()
}, T)
afterAll(() => browser?.close())

/** A screenshot kept for a person (and, on the SQLite run with PORTAL_SCREENSHOTS=docs, for the README). */
const shot = async (page: Page, name: string, database: string, least = 15_000) => {
  const file = `${SHOTS}${database}-${name}.png`
  // As tall as the content (a short viewport makes the full page the content's height), then the viewport as it was.
  const viewport = page.viewportSize()!
  await page.setViewportSize({ width: viewport.width, height: 200 })
  const png = await page.screenshot({ path: file, fullPage: true })
  await page.setViewportSize(viewport)
  expect(png.length).toBeGreaterThan(least) // a blank page is a few KB
  if (DOCS !== null && database === "sqlite" && IN_DOCS.has(name)) copyFileSync(file, `${DOCS}portal-${name}.png`)
}

/** Waits until `check` holds (a /v1 read after a click, a text the page re-rendered). */
const until = async (check: () => Promise<boolean>, what: string, ms = 15_000) => {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(100)
  }
}

const text = async (page: Page, selector: string) => ((await page.textContent(selector)) ?? "").trim()

/** A day as the page writes it, in the browser's own locale and zone. */
const dayIn = (page: Page, iso: string | null) =>
  page.evaluate(
    (value) =>
      value === null
        ? "—"
        : new Date(value).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" }),
    iso
  )
const whenIn = (page: Page, iso: string) => page.evaluate((value) => new Date(value).toLocaleString(), iso)

for (const database of databases()) {
  describe(`customer portal in a browser on ${database.name}`, () => {
    let server: TestServer
    // The service's clock: real, and held still while a preview and its change are compared (proration is by the
    // second, so two readings a second apart could differ by a kobo).
    const shifted = makeShiftedClock()
    let held: number | null = null
    const now = () => held ?? shifted.now()
    const clock: Clock.Clock = {
      ...shifted.clock,
      unsafeCurrentTimeMillis: now,
      currentTimeMillis: Effect.sync(now),
      unsafeCurrentTimeNanos: () => BigInt(now()) * 1_000_000n,
      currentTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n)
    }
    let a: { id: string; apiKey: string }
    let b: { id: string; apiKey: string }
    let other: Bun.Server<undefined>
    let otherOrigin: string
    const watched: Array<Watched> = []
    let walker: Watched

    const v1 = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      expect(response.status).toBe(200)
      return (await response.json()) as any
    }
    const subOf = async (apiKey: string, customer: string) =>
      (await v1(apiKey, `/v1/subscriptions?customer=${customer}`)).subscriptions.find((s: any) =>
        ["pending", "trialing", "active", "past_due"].includes(s.status)
      )
    const walletOf = async (customer: string) =>
      (await v1(a.apiKey, `/v1/wallet?customer=${customer}`)).paymentMethods as Array<any>

    /** The simulated provider's page, answered as a customer would (its callback brings the browser back). */
    const completeCheckout = async (url: string, card: "ok" | "declining" = "ok") => {
      const done = await server.fetch(new URL(url).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `outcome=pay&card=${card}`,
        redirect: "manual"
      })
      expect([200, 303]).toContain(done.status)
    }

    /** The vendor's side: a session for a customer; its link is on the service's PUBLIC_URL (here its own address). */
    const sessionFor = async (apiKey: string, customer: string, returnUrl?: string) => {
      const created = await post(server, apiKey, "/v1/portal/sessions", {
        customer,
        ...(returnUrl === undefined ? {} : { returnUrl })
      })
      expect(created.status).toBe(200)
      expect(created.body.url).toStartWith(`${server.baseUrl}/portal/link/`)
      return created.body.url as string
    }

    /** The customer's side: a fresh browser opens the link and lands on the overview. */
    const open = async (url: string, context?: BrowserContext) => {
      const w = context === undefined ? await watchedPage(browser, server.baseUrl) : undefined
      if (w !== undefined) watched.push(w)
      const page = w?.page ?? (await context!.newPage())
      await page.goto(url)
      await page.waitForURL(`${server.baseUrl}/portal`, { timeout: 15_000 })
      await page.waitForSelector("body[data-ready]", { timeout: 15_000 })
      return { page, w }
    }

    beforeAll(async () => {
      server = await startServer(database.config, { clock, ownPublicUrl: true })
      a = await server.createOrg()
      b = await server.createOrg()
      expect((await post(server, a.apiKey, "/v1/billing/profile", { legalName: VENDOR })).status).toBe(200)
      for (const org of [a, b]) await syncCatalog(server, org.apiKey, CATALOG)
      for (const [org, id, name] of [
        [a, "ada", "Ada Lovelace"],
        [a, "bob", "Bob Babbage"],
        [a, "cy", "Cy Young"],
        [a, "dee", "Dee Declined"],
        [b, "ada", "Ada of another vendor"]
      ] as const) {
        expect((await post(server, org.apiKey, "/v1/customers", { id, name, email: `${id}@example.com` })).status).toBe(
          200
        )
      }
      // Ada: a saved card, on Pro (paid), some usage. Bob: a card, on Free.
      for (const customer of ["ada", "bob"]) {
        const setup = await post(server, a.apiKey, "/v1/wallet/setup", { customer })
        await completeCheckout(setup.body.url)
      }
      const attached = await post(server, a.apiKey, "/v1/attach", { customer: "ada", product: "pro" })
      expect(attached.status).toBe(200)
      if (attached.body.checkoutUrl !== null) await completeCheckout(attached.body.checkoutUrl)
      expect((await subOf(a.apiKey, "ada")).plan).toBe("pro")
      expect(
        (await post(server, a.apiKey, "/v1/track", { customer: "ada", feature: "tokens", value: 1234 })).body.allowed
      ).toBe(true)
      // Another origin on this machine: a page that tries changes, and the vendor's app `returnUrl` goes back to.
      other = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch: (request) => {
          const url = new URL(request.url)
          if (url.pathname === "/app")
            return new Response("<h1>Vendor app</h1>", { headers: { "content-type": "text/html" } })
          return new Response(`<!doctype html><h1>Another site</h1>`, { headers: { "content-type": "text/html" } })
        }
      })
      otherOrigin = `http://127.0.0.1:${other.port}`
    }, 120_000)
    afterAll(async () => {
      for (const w of watched) await w.context.close()
      other?.stop(true)
      await server?.close()
    })

    test(
      "the vendor's link opens the overview: plan, period, usage and balances as /v1 tells them",
      async () => {
        const url = await sessionFor(a.apiKey, "ada", `${otherOrigin}/app`)
        const opened = await open(url)
        walker = opened.w!
        const { page } = walker
        // The session is an HttpOnly, SameSite=Strict cookie of the portal's path, for at most an hour.
        const cookie = (await walker.context.cookies()).find((c) => c.name === "billing_portal")!
        expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/portal" })
        expect(cookie.expires * 1000 - Date.now()).toBeLessThanOrEqual(3_600_000)
        // The link works once.
        const again = await server.fetch("/portal/link", {
          method: "POST",
          headers: { origin: server.baseUrl },
          body: JSON.stringify({ token: new URL(url).pathname.split("/").pop() })
        })
        expect(again.status).toBe(401)

        // The vendor's name (billing profile) and the way back to its app.
        expect(await text(page, "#vendor")).toBe(VENDOR)
        expect(await page.getAttribute("#back", "href")).toBe(`${otherOrigin}/app`)
        expect(await text(page, "#back")).toBe(`← Back to ${VENDOR}`)
        expect(await text(page, "#customer strong")).toBe("Ada Lovelace")

        // Plan, price, period as /v1/subscriptions has them.
        const sub = await subOf(a.apiKey, "ada")
        const card = `[data-subscription="${sub.id}"]`
        expect(await text(page, `${card} .plan-name`)).toBe("Pro")
        expect(await text(page, `${card} .status`)).toBe("Active")
        expect(await text(page, `${card} [data-fact="price"]`)).toBe(`${formatMinor(500000, "NGN")} / month`)
        expect(await text(page, `${card} [data-fact="period"]`)).toBe(
          `${await dayIn(page, sub.currentPeriodStart)} – ${await dayIn(page, sub.currentPeriodEnd)}`
        )
        expect(await text(page, `${card} [data-fact="renews"]`)).toBe(`on ${await dayIn(page, sub.currentPeriodEnd)}`)

        // Usage against the limit, with its reset, as /v1/check answers it; the on/off feature as on.
        const check = (await post(server, a.apiKey, "/v1/check", { customer: "ada", feature: "tokens", value: 0 })).body
        expect(check.usage).toBe(1234)
        const tokens = await text(page, '[data-feature="tokens"] .numbers')
        expect(tokens).toStartWith(
          `Used ${check.usage.toLocaleString("en")} / ${check.limit.toLocaleString("en")} token · `
        )
        expect(await text(page, '[data-feature="tokens"] .muted')).toBe(`resets ${await whenIn(page, check.resetsAt)}`)
        expect(await text(page, '[data-feature="support"]')).toContain("enabled")
        // Credits by system, and the §14 credit balance (none yet).
        expect(await text(page, '[data-credits="credits"]')).toBe("0")
        const customer = await v1(a.apiKey, "/v1/customers/ada")
        expect(customer.billing.creditBalance).toEqual({})
        expect(await text(page, "#credit-balance")).toBe("—")
        await shot(page, "overview", database.name)
        expect(walker.errors).toEqual([])
        expect(walker.outside).toEqual([])
      },
      T
    )

    test(
      "invoices: number, date, status, total and amount due as /v1 has them, with the hosted page and the PDF",
      async () => {
        const { page } = walker
        await openView(page, `${server.baseUrl}/portal/invoices`)
        const invoices = ((await v1(a.apiKey, "/v1/billing/invoices?customer=ada")).invoices as Array<any>)
          .filter((i) => i.status !== "draft")
          .sort((x, y) => y.createdAt - x.createdAt)
        expect(invoices.length).toBeGreaterThan(0)
        const rows = page.locator("main tbody tr")
        expect(await rows.count()).toBe(invoices.length)
        for (const [n, invoice] of invoices.entries()) {
          const row = rows.nth(n)
          expect(await row.locator(".number").textContent()).toBe(invoice.number)
          expect(await row.locator(".total").textContent()).toBe(formatMinor(invoice.total, invoice.currency))
          expect(await row.locator(".due").textContent()).toBe(formatMinor(invoice.amountDue, invoice.currency))
          expect(await row.locator("td").nth(1).textContent()).toBe(await dayIn(page, invoice.createdAt))
          expect(await row.locator(".status").textContent()).toBe(invoice.status === "paid" ? "Paid" : "Open")
          const links = await row.locator(".documents a").evaluateAll((as) => as.map((x) => (x as any).href))
          expect(links).toEqual([invoice.hostedUrl, `${invoice.hostedUrl}/pdf`])
        }
        // The PDF link is the service's own document.
        const pdf = await server.fetch(new URL(invoices[0].hostedUrl).pathname + "/pdf")
        expect(pdf.status).toBe(200)
        expect(pdf.headers.get("content-type")).toContain("application/pdf")
        await shot(page, "invoices", database.name)
        expect(walker.errors).toEqual([])
      },
      T
    )

    test(
      "payment methods: add one through the provider's page, make it default, back, remove it; each as /v1/wallet says",
      async () => {
        const { page } = walker
        await openView(page, `${server.baseUrl}/portal/payment-methods`)
        const before = await walletOf("ada")
        expect(before).toHaveLength(1)
        expect(await page.locator(".method").count()).toBe(1)
        expect(await text(page, `[data-method="${before[0].id}"] strong`)).toBe(`Visa •••• ${before[0].last4}`)
        expect(await page.locator(`[data-method="${before[0].id}"] .default`).count()).toBe(1)

        // Add: the provider's setup page (the simulated one, served by the service), then back here.
        await page.click("#add-method")
        await page.waitForURL(/\/simulated\/setup\//)
        await page.check('input[name="card"][value="declining"]')
        await Promise.all([
          page.waitForURL(/\/portal\/payment-methods/),
          page.click('button[type="submit"]:not(.secondary)')
        ])
        await page.waitForSelector("body[data-ready]")
        expect(await text(page, "#flash")).toBe("Your payment method is saved.")
        expect(new URL(page.url()).search).toBe("")
        const added = await walletOf("ada")
        expect(added).toHaveLength(2)
        const second = added.find((m) => m.id !== before[0].id)!
        expect(await page.locator(".method").count()).toBe(2)
        expect(await text(page, `[data-method="${second.id}"] strong`)).toBe(`Visa •••• ${second.last4}`)
        await shot(page, "payment-methods", database.name)

        // Make the new one default, then the first again.
        for (const target of [second, before[0]]) {
          await page.click(`[data-method="${target.id}"] .make-default`)
          await until(
            async () => (await walletOf("ada")).find((m) => m.id === target.id)?.isDefault === true,
            "default"
          )
          await page.waitForSelector(`[data-method="${target.id}"] .default`)
          expect((await walletOf("ada")).filter((m) => m.isDefault).map((m) => m.id)).toEqual([target.id])
        }
        // Remove the added one (asks once more).
        await page.click(`[data-method="${second.id}"] button.danger`)
        expect(await walletOf("ada")).toHaveLength(2)
        await page.click(`[data-method="${second.id}"] button.danger:has-text("Confirm remove?")`)
        await until(async () => (await walletOf("ada")).length === 1, "removal")
        await page.waitForSelector(`[data-method="${second.id}"]`, { state: "detached" })
        expect((await walletOf("ada")).map((m) => [m.id, m.isDefault])).toEqual([[before[0].id, true]])
        expect(walker.errors).toEqual([])
      },
      T
    )

    test(
      "plans: the preview shows /v1/attach/preview's numbers; confirming changes the plan, as /v1 shows",
      async () => {
        const { page } = walker
        await openView(page, `${server.baseUrl}/portal/plans`)
        // The portal plans (Team is not one), the current one marked, prices in major units.
        expect(await page.$$eval("[data-plan]", (els) => els.map((e) => e.getAttribute("data-plan")))).toEqual([
          "free",
          "pro",
          "scale"
        ])
        expect(await page.locator('[data-plan="pro"] .current-plan').count()).toBe(1)
        expect(await text(page, '[data-plan="scale"] .price')).toBe(`${formatMinor(1200000, "NGN")} / month`)
        expect(await text(page, '[data-plan="free"] .price')).toBe("Free")
        expect(await text(page, '[data-plan="scale"] [data-feature="tokens"]')).toBe("20,000 Tokens per month")
        // An on/off feature by its name alone (its type tells it from a metered one without a limit).
        expect(await text(page, '[data-plan="scale"] [data-feature="support"]')).toBe("Priority support")

        // Up to Scale, now: held still, the page's preview and /v1's are the same instant's.
        held = Date.now()
        try {
          await page.click('[data-plan="scale"] button.preview')
          await page.waitForSelector("#change:not([hidden]) .confirm-change")
          const preview = (await post(server, a.apiKey, "/v1/attach/preview", { customer: "ada", product: "scale" }))
            .body
          expect(preview.scheduled).toBe(false)
          expect(preview.lines.length).toBe(2)
          const lineAmounts = await page.$$eval("#change tbody tr td:last-child", (tds) =>
            tds.map((t) => t.textContent)
          )
          expect(lineAmounts).toEqual(preview.lines.map((l: any) => formatMinor(l.amount, preview.currency)))
          const shown = async (key: string) => text(page, `#change [data-total="${key}"]`)
          expect(await shown("subtotal")).toBe(formatMinor(preview.subtotal, "NGN"))
          expect(await shown("discount")).toBe(formatMinor(-preview.discount, "NGN"))
          expect(await shown("tax")).toBe(formatMinor(preview.tax, "NGN"))
          expect(await shown("total")).toBe(formatMinor(preview.total, "NGN"))
          expect(await shown("amount-due")).toBe(formatMinor(preview.amountDue, "NGN"))
          expect(await text(page, "#effective")).toBe(`Takes effect now (${await whenIn(page, preview.effectiveAt)}).`)
          await shot(page, "plans", database.name)

          await page.click("#change .confirm-change")
          await page.waitForSelector("#outcome")
          // Ada has a default card: the change's invoice is charged to it and the change is made at once.
          await page.waitForSelector('#outcome[data-outcome="changed"]')
          expect(await text(page, "#outcome")).toBe("Changed: you are now on Scale.")
          expect((await subOf(a.apiKey, "ada")).plan).toBe("scale")
          // The change's invoice is the preview's, and paid.
          const invoices = (await v1(a.apiKey, "/v1/billing/invoices?customer=ada")).invoices as Array<any>
          const changeInvoice = invoices.find((i) => i.lines.some((l: any) => l.feature === "scale"))
          expect(changeInvoice).toMatchObject({
            subtotal: preview.subtotal,
            tax: preview.tax,
            total: preview.total,
            status: "paid"
          })
        } finally {
          held = null
        }
        await openView(page, `${server.baseUrl}/portal/plans`)
        expect(await page.locator('[data-plan="scale"] .current-plan').count()).toBe(1)

        // Down to Free: scheduled for the period end; nothing charged now.
        await page.click('[data-plan="free"] button.preview')
        await page.waitForSelector('#effective[data-scheduled="true"]')
        const down = (await post(server, a.apiKey, "/v1/attach/preview", { customer: "ada", product: "free" })).body
        expect(down.scheduled).toBe(true)
        expect(await text(page, "#effective")).toContain(await dayIn(page, down.effectiveAt))
        expect(await text(page, '#change [data-total="amount-due"]')).toBe(formatMinor(down.amountDue, "NGN"))
        expect(down.lines).toEqual([])
        expect(await page.locator("#change table").count()).toBe(0)
        await page.click("#change .confirm-change")
        await page.waitForSelector('#outcome[data-outcome="scheduled"]')
        const scheduled = await subOf(a.apiKey, "ada")
        expect(scheduled.plan).toBe("scale")
        expect(scheduled.scheduledChange.plan).toBe("free")
        expect(await text(page, "#outcome")).toBe(
          `Scheduled: your plan changes to Free on ${await dayIn(page, scheduled.scheduledChange.at)}.`
        )

        // The overview shows it, and undoes it.
        await openView(page, `${server.baseUrl}/portal`)
        const card = `[data-subscription="${scheduled.id}"]`
        expect(await text(page, `${card} [data-fact="change"]`)).toBe(
          `to Free on ${await dayIn(page, scheduled.scheduledChange.at)}`
        )
        await shot(page, "plan-change", database.name)
        await page.click(`${card} .cancel-change`)
        await until(async () => (await subOf(a.apiKey, "ada")).scheduledChange === undefined, "the change withdrawn")
        await page.waitForSelector(`${card} [data-fact="change"]`, { state: "detached" })
        expect((await subOf(a.apiKey, "ada")).plan).toBe("scale")
        expect(walker.errors).toEqual([])
        expect(walker.outside).toEqual([])
      },
      2 * T
    )

    test(
      "a change to be paid first: the page links the checkout; paid there, the new plan is in force",
      async () => {
        // Cy has no card: moving up from Free makes an invoice to pay before the change is made (§14).
        const { page, w } = await open(await sessionFor(a.apiKey, "cy", `${otherOrigin}/app`))
        await openView(page, `${server.baseUrl}/portal/plans`)
        expect(await page.locator('[data-plan="free"] .current-plan').count()).toBe(1)
        await page.click('[data-plan="pro"] button.preview')
        await page.waitForSelector("#change:not([hidden]) .confirm-change")
        await page.click("#change .confirm-change")
        await page.waitForSelector('#outcome[data-outcome="checkout"]')
        const pending = await subOf(a.apiKey, "cy")
        expect(pending.plan).toBe("free")
        expect(pending.pendingChange.plan).toBe("pro")
        const invoice = (await v1(a.apiKey, "/v1/billing/invoices?customer=cy")).invoices.find(
          (i: any) => i.id === pending.pendingChange.invoiceId
        )
        expect(await text(page, "#outcome")).toBe(
          `To complete the change to Pro, pay ${formatMinor(invoice.amountDue, invoice.currency)}. Your current plan stays in force until then.`
        )
        await shot(page, "plans-checkout", database.name)
        // The provider's page (the simulated one, served by the service), then back to the portal.
        await Promise.all([page.waitForURL(/\/simulated\/checkout\//), page.click("#pay-change")])
        await Promise.all([page.waitForURL(/\/portal(\?|$)/), page.click('button[type="submit"]:not(.secondary)')])
        await page.waitForSelector("body[data-ready]")
        expect(await text(page, "#flash")).toBe("Payment received. Thank you.")
        await until(async () => (await subOf(a.apiKey, "cy")).plan === "pro", "the paid change")
        await openView(page, `${server.baseUrl}/portal`)
        const sub = await subOf(a.apiKey, "cy")
        expect(sub.pendingChange).toBeUndefined()
        expect(await text(page, `[data-subscription="${sub.id}"] .plan-name`)).toBe("Pro")
        expect(w!.errors).toEqual([])
      },
      T
    )

    test(
      "cancel at period end asks first, then undo: each step as /v1 shows it",
      async () => {
        const { page } = walker
        await openView(page, `${server.baseUrl}/portal`)
        const sub = await subOf(a.apiKey, "ada")
        const card = `[data-subscription="${sub.id}"]`
        await page.click(`${card} button.cancel`)
        // The first click only explains; nothing changed yet.
        expect(await text(page, `${card} .confirm p`)).toBe(
          `Your Scale plan stays in force until ${await dayIn(page, sub.currentPeriodEnd)}, then ends. You can undo this until then.`
        )
        expect((await subOf(a.apiKey, "ada")).cancelAtPeriodEnd).toBe(false)
        await page.click(`${card} .confirm-cancel`)
        await until(async () => (await subOf(a.apiKey, "ada")).cancelAtPeriodEnd === true, "the cancellation")
        await page.waitForSelector(`${card} [data-fact="ends"]`)
        expect(await text(page, `${card} [data-fact="ends"]`)).toBe(
          `on ${await dayIn(page, sub.currentPeriodEnd)} (canceled)`
        )
        await page.click(`${card} .resume`)
        await until(async () => (await subOf(a.apiKey, "ada")).cancelAtPeriodEnd === false, "the plan resumed")
        await page.waitForSelector(`${card} [data-fact="renews"]`)
        expect((await subOf(a.apiKey, "ada")).status).toBe("active")
        expect(walker.errors).toEqual([])
      },
      T
    )

    test(
      "a change from another origin, or without the CSRF token, is refused (403) and changes nothing",
      async () => {
        const { page, context } = walker
        const sub = await subOf(a.apiKey, "ada")
        const cancelUrl = `${server.baseUrl}/portal/api/subscriptions/${sub.id}/cancel`
        // A page of another origin (same machine: the cookie goes along) posts a cancel the way a form could.
        const evil = await context.newPage()
        await evil.goto(`${otherOrigin}/`)
        const [refused] = await Promise.all([
          evil.waitForResponse(cancelUrl),
          evil.evaluate(
            (target) =>
              fetch(target, {
                method: "POST",
                mode: "no-cors",
                credentials: "include",
                headers: { "content-type": "text/plain" },
                body: "{}"
              }).catch(() => undefined),
            cancelUrl
          )
        ])
        expect(refused.status()).toBe(403)
        await evil.close()
        // That page was elsewhere on purpose: the watch's list is for what the portal's pages ask for.
        walker.outside.splice(0, walker.outside.length, ...walker.outside.filter((u) => !u.startsWith(otherOrigin)))
        // Same origin, but no token, or a wrong one.
        const origin = server.baseUrl
        const without = await page.request.post(cancelUrl, { headers: { origin }, data: {} })
        expect(without.status()).toBe(403)
        expect(await without.json()).toMatchObject({ success: false, code: "csrf_token_invalid" })
        const wrong = await page.request.post(cancelUrl, { headers: { origin, "x-csrf-token": "nope" }, data: {} })
        expect(wrong.status()).toBe(403)
        const token = await page.$eval('meta[name="csrf-token"]', (m) => (m as any).content)
        const foreign = await page.request.post(cancelUrl, {
          headers: { origin: otherOrigin, "x-csrf-token": token },
          data: {}
        })
        expect(foreign.status()).toBe(403)
        const after = await subOf(a.apiKey, "ada")
        expect(after).toMatchObject({ id: sub.id, plan: sub.plan, cancelAtPeriodEnd: false })
        expect(after.updatedAt).toBe(sub.updatedAt)
        // The next payment method change without a token: refused too, the wallet as it was.
        const method = (await walletOf("ada"))[0]
        const remove = await page.request.post(`${server.baseUrl}/portal/api/payment-methods/${method.id}/remove`, {
          headers: { origin },
          data: {}
        })
        expect(remove.status()).toBe(403)
        expect(await walletOf("ada")).toHaveLength(1)
      },
      T
    )

    test(
      "another customer's (or another organization's) subscription and card are unknown to this session: 404",
      async () => {
        const { page } = walker
        const origin = server.baseUrl
        const token = await page.$eval('meta[name="csrf-token"]', (m) => (m as any).content)
        const send = (path: string) =>
          page.request.post(`${server.baseUrl}/portal/api${path}`, {
            headers: { origin, "x-csrf-token": token },
            data: {}
          })
        const bobSub = await subOf(a.apiKey, "bob")
        const bobCard = (await walletOf("bob"))[0]
        const theirs = await subOf(b.apiKey, "ada")
        for (const path of [
          `/subscriptions/${bobSub.id}/cancel`,
          `/subscriptions/${bobSub.id}/cancel-change`,
          `/subscriptions/${theirs.id}/cancel`,
          `/payment-methods/${bobCard.id}/default`,
          `/payment-methods/${bobCard.id}/remove`
        ]) {
          const answer = await send(path)
          expect({ path, status: answer.status() }).toEqual({ path, status: 404 })
          expect(await answer.json()).toMatchObject({ success: false })
        }
        expect(await subOf(a.apiKey, "bob")).toEqual(bobSub)
        expect(await subOf(b.apiKey, "ada")).toEqual(theirs)
        expect(await walletOf("bob")).toEqual([bobCard])
        // What this session reads is Ada's alone.
        const overview = (await (await page.request.get(`${server.baseUrl}/portal/api/overview`)).json()) as any
        expect(overview.subscriptions.map((s: any) => s.id)).toEqual([(await subOf(a.apiKey, "ada")).id])
      },
      T
    )

    test(
      "a phone's width (375 px): every view fits, nothing scrolls sideways",
      async () => {
        const phone = await browser.newContext({
          viewport: { width: 375, height: 740 },
          deviceScaleFactor: 2,
          isMobile: true,
          hasTouch: true
        })
        try {
          const { page } = await open(await sessionFor(a.apiKey, "ada", `${otherOrigin}/app`), phone)
          for (const path of ["/portal", "/portal/invoices", "/portal/payment-methods", "/portal/plans"]) {
            await openView(page, `${server.baseUrl}${path}`)
            if (path === "/portal/plans") {
              await page.click('[data-plan="pro"] button.preview')
              await page.waitForSelector("#change:not([hidden]) .confirm-change")
            }
            const width = await page.evaluate(() => (globalThis as any).document.scrollingElement.scrollWidth)
            expect({ path, width }).toEqual({ path, width: 375 })
            // No box pokes out of the screen either (a wide table inside a scrolling box would pass the first test).
            const poking = await page.$$eval("main *", (els) =>
              els.filter((e) => e.getBoundingClientRect().right > 375.5).map((e) => e.outerHTML.slice(0, 80))
            )
            expect({ path, poking }).toEqual({ path, poking: [] })
            if (path === "/portal") await shot(page, "phone", database.name)
            if (path === "/portal/plans") await shot(page, "phone-plans", database.name)
          }
        } finally {
          await phone.close()
        }
      },
      T
    )

    test(
      "names are text, never markup: a vendor and a customer named like HTML",
      async () => {
        const c = await server.createOrg()
        await syncCatalog(server, c.apiKey, CATALOG)
        expect((await post(server, c.apiKey, "/v1/billing/profile", { legalName: HOSTILE })).status).toBe(200)
        const created = await post(server, c.apiKey, "/v1/customers", {
          id: "x",
          name: HOSTILE,
          email: "x@example.com"
        })
        expect(created).toMatchObject({ status: 200 })
        const { page, w } = await open(await sessionFor(c.apiKey, "x"))
        expect(await text(page, "#vendor")).toBe(HOSTILE)
        expect(await text(page, "#customer strong")).toBe(HOSTILE)
        expect(await page.locator("img").count()).toBe(0)
        expect(w!.dialogs).toEqual([])
        expect(w!.errors).toEqual([])
        // No return URL given: no way back is shown.
        expect(await page.locator("#back").count()).toBe(0)
        // The page's policy: nothing from elsewhere, no inline script.
        const csp = (await page.request.get(`${server.baseUrl}/portal`)).headers()["content-security-policy"]!
        expect(csp).toContain("default-src 'self'")
        expect(csp).not.toContain("unsafe")
      },
      T
    )

    test(
      "sign-out ends the session and goes back to the vendor; a used or ended link says so",
      async () => {
        const context = await browser.newContext()
        try {
          const url = await sessionFor(a.apiKey, "ada", `${otherOrigin}/app`)
          const { page } = await open(url, context)
          const cookie = (await context.cookies()).find((c) => c.name === "billing_portal")!
          await Promise.all([page.waitForURL(`${otherOrigin}/app`), page.click("#sign-out")])
          // The old cookie, put back, opens nothing.
          await context.addCookies([cookie])
          expect((await page.request.get(`${server.baseUrl}/portal/api/overview`)).status()).toBe(401)
          await page.goto(`${server.baseUrl}/portal/invoices`)
          await page.waitForSelector("body[data-ready]")
          expect(new URL(page.url()).pathname).toBe("/portal/expired")
          expect(await text(page, "#expired h1")).toBe("Your billing session has ended")
          // The same link again: used.
          await page.goto(url)
          await page.waitForSelector("body[data-ready]")
          expect(await text(page, "#link-status")).toBe(
            "This link has expired or was already used. Open billing again from the app to get a new one."
          )
          await shot(page, "link-used", database.name, 8_000)
        } finally {
          await context.close()
        }
      },
      T
    )

    test(
      "an hour on, the session is over: the next page or change leads to the page that says so",
      async () => {
        const context = await browser.newContext()
        try {
          const { page } = await open(await sessionFor(a.apiKey, "ada", `${otherOrigin}/app`), context)
          const sub = await subOf(a.apiKey, "ada")
          shifted.advance(3_600_000 + 1_000)
          // A change from the page still open: refused (401), and the page goes to the end.
          await page.click(`[data-subscription="${sub.id}"] button.cancel`)
          await Promise.all([
            page.waitForURL(`${server.baseUrl}/portal/expired`),
            page.click(`[data-subscription="${sub.id}"] .confirm-cancel`)
          ])
          await page.waitForSelector("#expired")
          expect((await subOf(a.apiKey, "ada")).cancelAtPeriodEnd).toBe(false)
          // Any view now: the same.
          await page.goto(`${server.baseUrl}/portal/plans`)
          expect(new URL(page.url()).pathname).toBe("/portal/expired")
        } finally {
          shifted.set(Date.now())
          await context.close()
        }
      },
      T
    )

    test(
      "a renewal declined: the overview says the plan is past due and where to pay; the invoice is open to pay",
      async () => {
        // Dee pays Pro with the test card that is declined later; a month on, the renewal fails.
        const setup = await post(server, a.apiKey, "/v1/wallet/setup", { customer: "dee" })
        await completeCheckout(setup.body.url, "declining")
        const attached = await post(server, a.apiKey, "/v1/attach", { customer: "dee", product: "pro" })
        if (attached.body.checkoutUrl !== null) await completeCheckout(attached.body.checkoutUrl, "declining")
        expect((await subOf(a.apiKey, "dee")).status).toBe("active")
        shifted.advance(32 * 86_400_000)
        try {
          await server.run(Effect.flatMap(Renewals, (r) => r.runDue))
          const sub = await subOf(a.apiKey, "dee")
          expect(sub.status).toBe("past_due")
          const { page, w } = await open(await sessionFor(a.apiKey, "dee"))
          const card = `[data-subscription="${sub.id}"]`
          expect(await text(page, `${card} .status`)).toBe("Past due")
          expect(await text(page, `${card} [data-fact="payment"]`)).toBe(
            "The last payment did not go through. See the invoice to pay"
          )
          await Promise.all([
            page.waitForURL(`${server.baseUrl}/portal/invoices`),
            page.click(`${card} [data-fact="payment"] a`)
          ])
          await page.waitForSelector("body[data-ready]")
          const due = ((await v1(a.apiKey, "/v1/billing/invoices?customer=dee")).invoices as Array<any>).filter(
            (i) => i.status === "open"
          )
          expect(due.length).toBe(1)
          const row = page.locator("main tbody tr", { has: page.locator(`.number:text-is("${due[0].number}")`) })
          expect(await row.locator(".status").textContent()).toBe("Open")
          expect(await row.locator(".due").textContent()).toBe(formatMinor(due[0].amountDue, due[0].currency))
          expect(await row.locator(".documents a").first().textContent()).toBe("View and pay")
          expect(w!.errors).toEqual([])
        } finally {
          shifted.set(Date.now())
        }
      },
      T
    )

    /** A customer of organization A made for one test (email and name as the others). */
    const customerFor = async (id: string, name: string) => {
      const created = await post(server, a.apiKey, "/v1/customers", { id, name, email: `${id}@example.com` })
      expect(created.status).toBe(200)
    }
    const subsOf = async (customer: string) =>
      (await v1(a.apiKey, `/v1/subscriptions?customer=${customer}`)).subscriptions as Array<any>

    test(
      "a trial: the overview says Trial and when it ends, as /v1 has it",
      async () => {
        await customerFor("gus", "Gus Trial")
        const attached = await post(server, a.apiKey, "/v1/attach", { customer: "gus", product: "trial-pro" })
        expect(attached.status).toBe(200)
        const sub = (await subsOf("gus")).find((s) => s.plan === "trial-pro")
        expect(sub).toMatchObject({ status: "trialing" })
        expect(sub.trialEndsAt).not.toBeNull()
        const { page, w } = await open(await sessionFor(a.apiKey, "gus"))
        const card = `[data-subscription="${sub.id}"]`
        expect(await text(page, `${card} .plan-name`)).toBe("Pro trial")
        expect(await text(page, `${card} .status`)).toBe("Trial")
        expect(await text(page, `${card} [data-fact="trial"]`)).toBe(await dayIn(page, sub.trialEndsAt))
        expect(await page.$$eval(`${card} dt`, (dts) => dts.map((d) => d.textContent))).toContain("Trial ends")
        await shot(page, "trial", database.name)
        expect(w!.errors).toEqual([])
      },
      T
    )

    test(
      "a change waiting for its payment: shown with its invoice to pay; withdrawn, /v1 shows none and the invoice void",
      async () => {
        // Eli has no card: moving up from Free makes an invoice to pay first, and the change waits for it (§14).
        await customerFor("eli", "Eli Unpaid")
        const changed = await post(server, a.apiKey, "/v1/attach", { customer: "eli", product: "pro" })
        expect(changed.status).toBe(200)
        expect(changed.body.checkoutUrl).not.toBeNull()
        const pending = await subOf(a.apiKey, "eli")
        expect(pending.plan).toBe("free")
        expect(pending.pendingChange.plan).toBe("pro")
        const invoiceOf = async () =>
          ((await v1(a.apiKey, "/v1/billing/invoices?customer=eli")).invoices as Array<any>).find(
            (i) => i.id === pending.pendingChange.invoiceId
          )
        const invoice = await invoiceOf()
        expect(invoice).toMatchObject({ status: "open" })

        const { page, w } = await open(await sessionFor(a.apiKey, "eli"))
        const card = `[data-subscription="${pending.id}"]`
        expect(await text(page, `${card} .plan-name`)).toBe("Free")
        expect(await text(page, `${card} [data-fact="change"]`)).toBe(
          `to Pro once its invoice is paid (until ${await whenIn(page, pending.pendingChange.expiresAt)}) ` +
            `Pay ${formatMinor(invoice.amountDue, invoice.currency)}`
        )
        // Its pay link is the invoice's own hosted page.
        expect(await page.getAttribute(`${card} a.pay-change`, "href")).toBe(invoice.hostedUrl)
        expect(await page.locator(`${card} [data-fact="renews"]`).count()).toBe(0)
        await shot(page, "pending-change", database.name)

        // Withdrawn: §14's cancel-change removes the pending change and voids its invoice.
        await page.click(`${card} .cancel-change`)
        await until(async () => (await subOf(a.apiKey, "eli")).pendingChange === undefined, "the change withdrawn")
        await page.waitForSelector(`${card} [data-fact="change"]`, { state: "detached" })
        expect(await text(page, "#flash")).toBe("The plan change is withdrawn.")
        const after = await subOf(a.apiKey, "eli")
        expect(after).toMatchObject({ id: pending.id, plan: "free", status: "active" })
        expect(after.scheduledChange).toBeUndefined()
        expect((await invoiceOf()).status).toBe("void")
        const canceled = (await v1(a.apiKey, "/v1/events?type=subscription.change_canceled&customer=eli")).data
        expect(canceled).toHaveLength(1)
        expect(await text(page, `${card} .plan-name`)).toBe("Free")
        expect(w!.errors).toEqual([])
      },
      T
    )

    test(
      "credit: a downgrade made now leaves account credit, and bonus credits; both shown as /v1 has them",
      async () => {
        // Fay pays Scale with a card, then moves down to Pro at once: the unused Scale is worth more than the rest of
        // the period on Pro, and the surplus is her credit balance (§14).
        await customerFor("fay", "Fay Credit")
        const setup = await post(server, a.apiKey, "/v1/wallet/setup", { customer: "fay" })
        await completeCheckout(setup.body.url)
        const up = await post(server, a.apiKey, "/v1/attach", { customer: "fay", product: "scale" })
        expect(up.status).toBe(200)
        expect((await subOf(a.apiKey, "fay")).plan).toBe("scale")
        const down = await post(server, a.apiKey, "/v1/attach", { customer: "fay", product: "pro", when: "now" })
        expect(down.status).toBe(200)
        expect((await subOf(a.apiKey, "fay")).plan).toBe("pro")
        const balance = (await v1(a.apiKey, "/v1/customers/fay")).billing.creditBalance
        expect(Object.keys(balance)).toEqual(["NGN"])
        expect(balance.NGN).toBeGreaterThan(0)
        // Bonus credits a vendor gives (the dashboard's grant goes through the same service).
        const granted = await server.run(Effect.flatMap(Credits, (c) => c.grant(a.id, "fay", "credits", 250, "bonus")))
        expect(granted.bonusBalance).toBe(250)

        const { page, w } = await open(await sessionFor(a.apiKey, "fay"))
        expect(await text(page, "#credit-balance")).toBe(formatMinor(balance.NGN, "NGN"))
        expect(await text(page, '[data-credits="credits"]')).toBe("250")
        await shot(page, "credit", database.name)
        expect(w!.errors).toEqual([])
      },
      T
    )

    test(
      "a subscription waiting for its first payment: Pay now goes to /v1's checkout; with a saved card it is paid at once",
      async () => {
        // Hal has no card: the vendor attached Extra seats, which waits for its first payment on a hosted page.
        await customerFor("hal", "Hal Pending")
        const attached = await post(server, a.apiKey, "/v1/attach", { customer: "hal", product: "extra" })
        expect(attached.status).toBe(200)
        expect(attached.body.subscription.status).toBe("pending")
        const pending = attached.body.subscription
        const { page, w } = await open(await sessionFor(a.apiKey, "hal"))
        const card = `[data-subscription="${pending.id}"]`
        expect(await text(page, `${card} .plan-name`)).toBe("Extra seats")
        expect(await text(page, `${card} .status`)).toBe("Awaiting payment")
        expect(await text(page, `${card} [data-fact="payment"]`)).toBe("Waiting for the first payment.")
        await shot(page, "pending", database.name)
        // Its checkout is the page /v1 answers with (the one the attach opened, still open: test/portal/http.test.ts
        // checks the answer itself).
        const [answer] = await Promise.all([
          page.waitForResponse(`${server.baseUrl}/portal/api/subscriptions/${pending.id}/checkout`),
          page.waitForURL(/\/simulated\/checkout\//),
          page.click(`${card} .pay-now`)
        ])
        expect(answer.status()).toBe(200)
        expect(page.url()).toBe(attached.body.checkoutUrl)
        await Promise.all([page.waitForLoadState(), page.click('button[type="submit"]:not(.secondary)')])
        await until(async () => (await subsOf("hal")).find((s) => s.id === pending.id)?.status === "active", "paid")
        await openView(page, `${server.baseUrl}/portal`)
        expect(await text(page, `${card} .status`)).toBe("Active")
        expect(await page.locator(`${card} .pay-now`).count()).toBe(0)

        // Ivy saved a card after the attach: Pay now charges it, and the page shows the plan active.
        await customerFor("ivy", "Ivy Card")
        const second = await post(server, a.apiKey, "/v1/attach", { customer: "ivy", product: "extra" })
        expect(second.body.subscription.status).toBe("pending")
        const setup = await post(server, a.apiKey, "/v1/wallet/setup", { customer: "ivy" })
        await completeCheckout(setup.body.url)
        const ivy = await open(await sessionFor(a.apiKey, "ivy"))
        const ivyCard = `[data-subscription="${second.body.subscription.id}"]`
        expect(await text(ivy.page, `${ivyCard} .status`)).toBe("Awaiting payment")
        await ivy.page.click(`${ivyCard} .pay-now`)
        await ivy.page.waitForSelector(`${ivyCard} [data-fact="renews"]`)
        expect(await text(ivy.page, "#flash")).toBe("Paid: your Extra seats plan is active.")
        expect(await text(ivy.page, `${ivyCard} .status`)).toBe("Active")
        expect((await subsOf("ivy")).find((s) => s.id === second.body.subscription.id)?.status).toBe("active")
        expect(new URL(ivy.page.url()).pathname).toBe("/portal")
        expect(w!.errors).toEqual([])
        expect(ivy.w!.errors).toEqual([])
      },
      T
    )

    test(
      "nothing was requested outside the service",
      () => {
        for (const w of watched) expect(w.outside).toEqual([])
      },
      T
    )
  })
}
