import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync } from "node:fs"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Browser, Page } from "playwright-core"
import { DashboardSessions } from "../../src/dashboard/Sessions.ts"
import { formatMinor } from "../../src/domain/majorUnits.ts"
import { SAMPLE_CATALOG, seedSample, type Sampled, type Send } from "../../src/dashboard/sample.ts"
import { Deliveries } from "../../src/events/Deliveries.ts"
import { Organizations } from "../../src/organizations/Organizations.ts"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { launchBrowser, openView, watchedPage, type Watched } from "../support/browser.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/** Browser steps on a shared 2-core machine: generous, so a slow moment is not a failure (a timeout kills chromium). */
const T = 30_000
const HOSTILE = "<img src=x onerror=alert(1)>"
const SHOTS = new URL("./screenshots/", import.meta.url).pathname
mkdirSync(SHOTS, { recursive: true })

let browser: Browser
beforeAll(async () => {
  browser = await launchBrowser()
}, T)
afterAll(() => browser?.close())

/** Every view shows data, draws what it should, and logs no error; a screenshot of each is kept for a person. */
const shot = async (page: Page, name: string) => {
  const png = await page.screenshot({ path: `${SHOTS}${name}.png` })
  expect(png.length).toBeGreaterThan(20_000) // a blank page is a few KB
}

/** A uPlot chart was drawn: its canvas exists and holds painted pixels. */
const chartPainted = (page: Page, selector: string) =>
  page.$eval(`${selector} canvas`, (c: any) => {
    const data: Uint8ClampedArray = c.getContext("2d").getImageData(0, 0, c.width, c.height).data
    let painted = 0
    for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) painted++
    return painted
  })

for (const database of databases()) {
  describe(`dashboard in a browser on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    let a: { id: string; slug: string; apiKey: string; keyId: string }
    let b: { id: string; slug: string; apiKey: string; keyId: string }
    let sampled: Sampled
    let hostileId: string
    let receiver: ReturnType<typeof Bun.serve>
    const received: Array<string> = []
    const watched: Array<Watched> = []

    const sendAs =
      (apiKey: string): Send =>
      async (method, path, body) => {
        const response = await server.fetch(path, {
          method,
          apiKey,
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        const text = await response.text()
        return { status: response.status, body: text.startsWith("{") ? JSON.parse(text) : text }
      }
    const v1 = async (apiKey: string, path: string) => (await sendAs(apiKey)("GET", path)).body

    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
      a = await server.createOrg()
      b = await server.createOrg()
      sampled = await seedSample(sendAs(a.apiKey), {
        customers: 24,
        events: 240,
        paidEvery: 4,
        invoices: 3,
        names: [HOSTILE],
        clock
      })
      hostileId = sampled.customers.find((c) => c.name === HOSTILE)!.id
      await seedSample(sendAs(b.apiKey), { customers: 2, events: 4, paidEvery: 100, invoices: 0 })
      // A webhook receiver, for the resend action.
      receiver = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch: async (request) => {
          received.push(request.headers.get("webhook-id") ?? "")
          return new Response("ok")
        }
      })
      const endpoint = await sendAs(a.apiKey)("POST", "/v1/webhook-endpoints", {
        url: `http://127.0.0.1:${receiver.port}/events`
      })
      expect(endpoint.status).toBe(200)
    }, 60_000)
    afterAll(async () => {
      for (const w of watched) await w.context.close()
      receiver?.stop(true)
      await server?.close()
    })

    const signIn = async (apiKey: string) => {
      const w = await watchedPage(browser, server.baseUrl)
      watched.push(w)
      await w.page.goto(`${server.baseUrl}/dashboard`)
      expect(new URL(w.page.url()).pathname).toBe("/dashboard/sign-in")
      await w.page.waitForSelector("body[data-ready]")
      await w.page.fill("#api-key", apiKey)
      await Promise.all([w.page.waitForURL(`${server.baseUrl}/dashboard`), w.page.click("button[type=submit]")])
      await w.page.waitForSelector("body[data-ready]")
      return w
    }

    /** A signed-in context without walking the sign-in page (the walk does that once). */
    const signInQuietly = async (apiKey: string) => {
      const w = await watchedPage(browser, server.baseUrl)
      watched.push(w)
      const answer = await w.context.request.post(`${server.baseUrl}/dashboard/sign-in`, {
        headers: { origin: server.baseUrl },
        data: { key: apiKey }
      })
      expect(answer.status()).toBe(200)
      return w
    }

    const auditOf = (organizationId: string) =>
      server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ action: string; objectId: string; sessionId: string; outcome: string }>`
            SELECT action, object_id, session_id, outcome FROM dashboard_audit
            WHERE organization_id = ${organizationId} ORDER BY id`.pipe(Effect.orDie)
        )
      )

    let walker: Watched

    test(
      "sign in with an API key, then every view shows the organization's numbers, charts drawn",
      async () => {
        walker = await signIn(a.apiKey)
        const { page } = walker
        const base = server.baseUrl

        // Overview: counts and recurring revenue as /v1 tells them, in major units.
        const subs = (await v1(a.apiKey, "/v1/subscriptions")).subscriptions as Array<any>
        const active = subs.filter((s) => s.status === "active")
        expect(active.length).toBeGreaterThan(0)
        expect(await page.textContent("#stat-active .value")).toBe(String(active.length))
        const catalog = { pro: [500000n, "NGN", 12n], team: [49900n, "USD", 1n] } as const
        for (const currency of ["NGN", "USD"]) {
          const twelfths = active
            .filter((s) => catalog[s.plan as "pro" | "team"]?.[1] === currency)
            .reduce((sum, s) => sum + catalog[s.plan as "pro" | "team"][0] * catalog[s.plan as "pro" | "team"][2], 0n)
          if (twelfths === 0n) continue
          const monthly = (twelfths * 2n + 12n) / 24n
          expect(await page.textContent("main")).toContain(formatMinor(String(monthly), currency))
        }
        expect(await chartPainted(page, "#usage-chart")).toBeGreaterThan(500)
        await shot(page, `${database.name}-overview`)

        // Customers: paged list and search.
        await openView(page, `${base}/dashboard/customers`)
        expect(await page.textContent("#customer-count")).toBe(`1–25 of 25`)
        await shot(page, `${database.name}-customers`)
        const someone = sampled.customers[3]!
        await openView(page, `${base}/dashboard/customers?q=${encodeURIComponent(someone.externalId)}`)
        expect(await page.locator("tbody tr").count()).toBe(1)
        await openView(page, `${base}/dashboard/customers?q=${encodeURIComponent(someone.id)}`)
        expect(await page.textContent("tbody")).toContain(someone.externalId)

        // A paid customer: subscription, balances as bars with reset times, usage chart, invoice in major units.
        const payer = sampled.customers.find((c) => c.externalId === sampled.paid[0])!
        await openView(page, `${base}/dashboard/customers/${payer.id}`)
        expect(await page.textContent("#customer-name")).toBe(payer.name)
        const text = (await page.textContent("main"))!
        const payerSubs = (await v1(a.apiKey, `/v1/subscriptions?customer=${payer.id}`)).subscriptions
        expect(text).toContain(payerSubs[0].plan)
        expect(await page.locator("#balances .balance .bar").count()).toBeGreaterThanOrEqual(3)
        expect(text).toContain("resets ")
        const check = await sendAs(a.apiKey)("POST", "/v1/check", {
          customer: payer.id,
          feature: "api-calls",
          value: 0
        })
        expect(await page.textContent('#balances [data-feature="api-calls"] .numbers')).toContain(
          `Used ${check.body.usage.toLocaleString("en")} / `
        )
        expect(await chartPainted(page, "#customer-chart")).toBeGreaterThan(500)
        const zone = await page.$eval("#timezone", (s: any) => String(s.value))
        expect(zone).toBe(await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"))
        await page.selectOption("#timezone", "Africa/Lagos")
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector("#usage-totals")?.textContent?.includes("Africa/Lagos")
        )
        const invoices = (await v1(a.apiKey, `/v1/billing/invoices?customer=${payer.id}`)).invoices as Array<any>
        for (const invoice of invoices) expect(text).toContain(formatMinor(invoice.total, invoice.currency))
        await shot(page, `${database.name}-customer`)

        // Catalog: prices in major units, exactly (a fractional unit price included), and the tax rates.
        const taxed = await sendAs(a.apiKey)("POST", "/v1/sync", {
          features: [],
          plans: [],
          taxRates: [{ slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" }]
        })
        expect(taxed.status).toBe(200)
        await openView(page, `${base}/dashboard/catalog`)
        const catalogText = (await page.textContent("main"))!
        expect(catalogText).toContain("5,000.00 NGN")
        expect(catalogText).toContain("499.00 USD")
        expect(catalogText).toContain("0.005 NGN") // overage 0.5 kobo
        expect(catalogText).toContain("0.0025 NGN") // tier unit price 0.25 kobo
        expect(catalogText).toContain("2,500.00 NGN") // the pack
        expect(catalogText).toContain("Tax rates")
        expect(catalogText).toMatch(/VATvat-ng7\.5%exclusiveNG/)
        await shot(page, `${database.name}-catalog`)

        // Invoices: lines and tier breakdowns.
        await openView(page, `${base}/dashboard/invoices`)
        const all = (await v1(a.apiKey, "/v1/billing/invoices")).invoices as Array<any>
        expect(all.length).toBeGreaterThan(0)
        expect(await page.locator("details.invoice").count()).toBe(all.length)
        const tiered = all.find((i) => i.lines.some((l: any) => l.tierBreakdown.length > 0))
        expect(tiered).toBeDefined()
        await page.click(`details[id="${tiered.id}"] summary strong`)
        expect(await page.$eval(`details[id="${tiered.id}"]`, (d: any) => d.open)).toBe(true)
        expect(await page.locator(`details[id="${tiered.id}"] .tiers tbody tr`).count()).toBeGreaterThan(0)
        expect(await page.textContent(`details[id="${tiered.id}"]`)).toContain(
          formatMinor(tiered.total, tiered.currency)
        )
        // Each invoice links its hosted page and its PDF, and shows its tax.
        expect(await page.$$eval("details.invoice p.documents a", (as) => as.map((a: any) => a.href))).toEqual(
          all.flatMap((i) => [i.hostedUrl, `${i.hostedUrl}/pdf`])
        )
        expect(await page.textContent(`details[id="${tiered.id}"]`)).toContain(
          `tax ${formatMinor(tiered.tax, tiered.currency)}`
        )
        await openView(page, `${base}/dashboard/invoices?status=void`)
        expect(await page.locator("details.invoice").count()).toBe(all.filter((i) => i.status === "void").length)
        await shot(page, `${database.name}-invoices`)

        // Webhooks and keys.
        await openView(page, `${base}/dashboard/webhooks`)
        expect(await page.textContent("main")).toContain(`http://127.0.0.1:${receiver.port}/events`)
        await shot(page, `${database.name}-webhooks`)
        await openView(page, `${base}/dashboard/keys`)
        expect(await page.textContent("main")).toContain(a.keyId)
        await shot(page, `${database.name}-keys`)

        expect(walker.errors).toEqual([])
        expect(walker.outside).toEqual([])
      },
      2 * T
    )

    test(
      "actions: grant credits, cancel, resend, create and revoke a key; each checked through /v1 and logged",
      async () => {
        const { page } = walker
        const base = server.baseUrl
        const payer = sampled.customers.find((c) => c.externalId === sampled.paid[1])!
        await openView(page, `${base}/dashboard/customers/${payer.id}`)

        // Grant bonus credits.
        const before = await sendAs(a.apiKey)("POST", "/v1/check", { customer: payer.id, feature: "images", value: 0 })
        await page.selectOption("#grant-system", "ai-credits")
        await page.fill("#grant-amount", "250")
        await page.click("#grant-form button")
        await page.waitForSelector(".flash.ok")
        const after = await sendAs(a.apiKey)("POST", "/v1/check", { customer: payer.id, feature: "images", value: 0 })
        expect(after.body.credits.bonusBalance).toBe(before.body.credits.bonusBalance + 250)

        // Cancel the subscription (asks once more).
        const live = (await v1(a.apiKey, `/v1/subscriptions?customer=${payer.id}`)).subscriptions.find(
          (s: any) => s.status === "active"
        )
        await page.click("button.danger:has-text('Cancel')")
        await page.click("button.danger:has-text('Confirm cancel?')")
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Canceled")
        )
        const canceled = (await v1(a.apiKey, `/v1/subscriptions?customer=${payer.id}`)).subscriptions.find(
          (s: any) => s.id === live.id
        )
        expect(canceled.status === "canceled" || canceled.cancelAtPeriodEnd === true).toBe(true)

        // Resend an event to the endpoint, then deliver it.
        await openView(page, `${base}/dashboard/webhooks`)
        const newest = (await v1(a.apiKey, "/v1/events?limit=1")).data[0]
        await page.click(`tr:has(code:text-is("${newest.id}")) button:has-text("Resend")`)
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Resent")
        )
        await server.run(Effect.flatMap(Deliveries, (d) => d.runOnce))
        expect(received).toContain(newest.id)

        // Create a key (shown once, works on /v1), then revoke it (refused on /v1 at once).
        await openView(page, `${base}/dashboard/keys`)
        await page.click("#create-key")
        const created = (await page.textContent("#new-key-value"))!
        expect(created).toMatch(/^sk_test_/)
        expect((await server.fetch("/v1/customers?limit=1", { apiKey: created })).status).toBe(200)
        const keyId = (await server.run(Effect.flatMap(Organizations, (o) => o.listKeys(a.id)))).find(
          (k) => k.revokedAt === null && k.id !== a.keyId
        )!.id
        await page.click(`tr:has(code:text-is("${keyId}")) button:has-text("Revoke")`)
        await page.click(`tr:has(code:text-is("${keyId}")) button:has-text("Confirm revoke?")`)
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Revoked")
        )
        expect((await server.fetch("/v1/customers?limit=1", { apiKey: created })).status).toBe(401)

        // Each change is logged: organization, action, object, session.
        const logged = await auditOf(a.id)
        const signIn = logged.find((r) => r.action === "session.sign_in")!
        expect(signIn.objectId).toBe(a.keyId)
        const audit = logged.filter((r) => !r.action.startsWith("session."))
        expect(audit.map((r) => r.action)).toEqual([
          "credits.grant",
          "subscription.cancel",
          "event.resend",
          "api_key.create",
          "api_key.revoke"
        ])
        expect(audit.map((r) => r.objectId)).toEqual([`${payer.id}/ai-credits`, live.id, newest.id, keyId, keyId])
        expect(new Set(audit.map((r) => r.sessionId))).toEqual(new Set([signIn.sessionId]))
        expect(audit.every((r) => r.outcome === "ok")).toBe(true)
        expect(walker.errors).toEqual([])
        expect(walker.outside).toEqual([])
      },
      T
    )

    test(
      "plan changes: the customer view shows a scheduled change and the credit balance, and withdraws the change",
      async () => {
        const c = await server.createOrg()
        const send = sendAs(c.apiKey)
        const plan = (slug: string, price: number) => ({
          slug,
          name: slug,
          price,
          currency: "NGN",
          interval: "monthly",
          features: [{ slug: "calls", limit: 10 }]
        })
        await send("POST", "/v1/sync", {
          features: [{ slug: "calls", name: "Calls", type: "metered" }],
          plans: [plan("small", 2000), plan("basic", 5000), plan("pro", 20000)]
        })
        await send("POST", "/v1/customers", { id: "chg", email: "chg@example.com", name: "Changer" })
        const attached = await send("POST", "/v1/attach", { customer: "chg", product: "pro" })
        await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        // (The clock stays: the other tests' sessions live on it.) Down to Small now (the surplus is a credit balance), then Basic at the period end.
        expect((await send("POST", "/v1/attach", { customer: "chg", product: "small", when: "now" })).status).toBe(200)
        const scheduled = await send("POST", "/v1/attach", { customer: "chg", product: "basic", when: "period_end" })
        expect(scheduled.body.subscription.scheduledChange.plan).toBe("basic")
        const customer = (await send("GET", "/v1/customers/chg")).body
        const surplus = customer.billing.creditBalance.NGN
        expect(surplus).toBeGreaterThan(0)

        const w = await signInQuietly(c.apiKey)
        await openView(w.page, `${server.baseUrl}/dashboard/customers/${customer.id}`)
        expect(await w.page.textContent("#credit-balance")).toBe(formatMinor(surplus, "NGN"))
        const change = `.plan-change[data-subscription="${scheduled.body.subscription.id}"]`
        expect(await w.page.textContent(change)).toStartWith("to basic at ")
        await shot(w.page, `${database.name}-plan-change`)
        await w.page.click("button.secondary:has-text('Withdraw change')")
        await w.page.click("button.secondary:has-text('Confirm withdraw change?')")
        await w.page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Withdrew")
        )
        const after = (await send("GET", "/v1/subscriptions?customer=chg")).body.subscriptions[0]
        expect(after.scheduledChange).toBeUndefined()
        await w.page.waitForFunction(
          (selector) => (globalThis as any).document.querySelector(selector)?.textContent === "—",
          change
        )
        expect((await auditOf(c.id)).filter((r) => r.action === "subscription.cancel_change")).toMatchObject([
          { objectId: after.id, outcome: "ok" }
        ])
        expect(w.errors).toEqual([])
        expect(w.outside).toEqual([])
      },
      T
    )

    test(
      "billing profile, coupons and a customer's discount: edited in the page, seen through /v1, logged",
      async () => {
        const c = await server.createOrg()
        const send = sendAs(c.apiKey)
        const synced = await send("POST", "/v1/sync", {
          features: [{ slug: "calls", name: "Calls", type: "metered" }],
          plans: [
            {
              slug: "pro",
              name: "Pro",
              price: 500000,
              currency: "NGN",
              interval: "monthly",
              features: [{ slug: "calls", limit: 10, overage: "charge", overagePrice: 1000 }]
            }
          ],
          coupons: [
            {
              slug: "launch",
              name: "Launch",
              percentOff: 12.5,
              duration: "repeating",
              durationInCycles: 3,
              plans: ["pro"]
            },
            { slug: "flat", name: "Flat", amountOff: 150050, currency: "NGN", duration: "once", maxRedemptions: 5 }
          ],
          promotionCodes: [{ code: "LAUNCH10", coupon: "launch", maxRedemptions: 5, expiresAt: "2099-06-01T00:00:00Z" }]
        })
        expect(synced.status).toBe(200)
        const buyer = await send("POST", "/v1/customers", {
          id: "buyer",
          email: "buyer@example.com",
          name: "Müller GmbH",
          address: { line1: `${HOSTILE} Hauptstraße 1`, city: "Berlin", postalCode: "10115", country: "DE" },
          taxIds: [{ type: "eu_vat", value: "DE123456789" }],
          taxExempt: "reverse_charge"
        })
        expect(buyer.status).toBe(200)
        const w = await signInQuietly(c.apiKey)
        const { page } = w
        const base = server.baseUrl

        // The profile: refused field by field (the error body's paths), nothing saved; then saved.
        await openView(page, `${base}/dashboard/billing-profile`)
        expect(await page.textContent("#profile-numbers")).toStartWith("Invoices are numbered INV-000001")
        await page.fill("#profile-legalName", "Ọlájídé Ventures Ltd")
        await page.fill("#profile-email", "not-an-email")
        await page.fill("#profile-invoicePrefix", "A")
        await page.fill("#profile-address-line1", "12 Marina")
        await page.fill("#profile-address-country", "QQ")
        await page.click("#profile-form button[type=submit]")
        await page.waitForSelector(".flash.error")
        for (const field of ["email", "invoicePrefix", "address.country"]) {
          expect((await page.textContent(`[data-field="${field}"]`))!.length).toBeGreaterThan(0)
        }
        expect(await page.textContent('[data-field="legalName"]')).toBe("")
        expect((await send("GET", "/v1/billing/profile")).body.updatedAt).toBeNull()
        await page.fill("#profile-email", "billing@olajide.example")
        await page.fill("#profile-invoicePrefix", "ola")
        await page.fill("#profile-address-city", "Lagos")
        await page.fill("#profile-address-country", "ng")
        await page.fill("#profile-footer", `Thank you. ${HOSTILE}`)
        await page.click("#profile-form button[type=submit]")
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Saved")
        )
        expect(await page.locator(".field-error:not(:empty)").count()).toBe(0)
        expect((await send("GET", "/v1/billing/profile")).body).toMatchObject({
          legalName: "Ọlájídé Ventures Ltd",
          email: "billing@olajide.example",
          invoicePrefix: "OLA",
          address: { line1: "12 Marina", city: "Lagos", country: "NG" },
          footer: `Thank you. ${HOSTILE}`
        })
        expect(await page.textContent("#profile-numbers")).toStartWith("Invoices are numbered OLA-000001")
        await shot(page, `${database.name}-billing-profile`)

        // The catalog: each coupon's terms in §13 money, its codes and their redemptions.
        await openView(page, `${base}/dashboard/catalog`)
        const coupons = (await page.textContent("#coupons"))!
        expect(coupons).toContain("Launchlaunch12.5% offrepeating, 3 invoicespro—0 / unlimited")
        expect(coupons).toContain("Flatflat1,500.50 NGN offonceall plans—0 / 5")
        const expires = await page.evaluate(() => new Date("2099-06-01T00:00:00Z").toLocaleString())
        expect(await page.textContent("#promotion-codes")).toContain(`LAUNCH10launchyes${expires}0 / 5`)
        await shot(page, `${database.name}-catalog-coupons`)

        // The customer: billing details as text; a refused code shows its reason; a promotion code applied.
        await openView(page, `${base}/dashboard/customers/${buyer.body.id}`)
        expect(await page.textContent("#billing-address")).toBe(`${HOSTILE} Hauptstraße 1, 10115 Berlin, Germany`)
        expect(await page.textContent("#tax-ids")).toBe("eu_vat DE123456789")
        expect(await page.textContent("#tax-status")).toStartWith("reverse charge")
        expect(await page.locator("main img").count()).toBe(0)
        expect(await page.textContent("#discount")).toBe("No discount")
        await page.fill("#discount-code", "NOPE")
        await page.click("#discount-form button[type=submit]")
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector("#discount-error")?.textContent?.includes("NOPE")
        )
        expect(await page.textContent("#discount-error")).toBe("unknown promotion code 'NOPE'")
        await page.fill("#discount-code", "launch10")
        await page.click("#discount-form button[type=submit]")
        await page.waitForFunction(() =>
          (globalThis as any).document.querySelector(".flash.ok")?.textContent?.startsWith("Applied")
        )
        expect(await page.textContent("#discount-coupon")).toBe("Launch (launch)")
        expect(await page.textContent("#discount-terms")).toBe(
          " · 12.5% off · on pro · 3 of 3 invoices left · promotion code LAUNCH10"
        )
        expect(await page.textContent("#discount-error")).toBe("")
        await shot(page, `${database.name}-customer-discount`)

        // Through /v1: the next invoice takes it (5 calls over the limit at 10.00 NGN, 12.5% off; reverse charge: no
        // tax).
        const attached = await send("POST", "/v1/attach", { customer: "buyer", product: "pro" })
        expect(attached.status).toBe(200)
        await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        expect((await send("POST", "/v1/track", { customer: "buyer", feature: "calls", value: 15 })).status).toBe(200)
        const generated = await send("POST", "/v1/billing/invoice", { customer: "buyer" })
        expect(generated.status).toBe(200)
        const invoice = (await send("GET", `/v1/billing/invoices?customer=${buyer.body.id}`)).body.invoices[0]
        expect(invoice).toMatchObject({ id: generated.body.invoice.id, subtotal: 5000, discount: 625, tax: 0 })
        expect(invoice.total).toBe(4375)
        expect(invoice.lines.flatMap((l: any) => l.discounts)).toEqual([{ coupon: "launch", amount: 625 }])
        await openView(page, `${base}/dashboard/customers/${buyer.body.id}`)
        // Two of its three invoices taken: the plan's first payment (§15: every later invoice) and the usage invoice.
        const all = (await send("GET", `/v1/billing/invoices?customer=${buyer.body.id}`)).body.invoices
        expect(all.filter((i: any) => i.discount > 0)).toHaveLength(2)
        expect(await page.textContent("#discount-terms")).toContain("1 of 3 invoices left")

        // Removed (asks once more).
        await page.click("button.danger:has-text('Remove discount')")
        await page.click("button.danger:has-text('Confirm remove discount?')")
        await page.waitForSelector("#discount-none")
        const logged = (await auditOf(c.id)).filter((r) => !r.action.startsWith("session."))
        expect(logged.map((r) => [r.action, r.objectId, r.outcome])).toEqual([
          ["billing_profile.update", c.id, "refused 400"],
          ["billing_profile.update", c.id, "ok"],
          ["customer_discount.apply", buyer.body.id, "refused 422"],
          ["customer_discount.apply", buyer.body.id, "ok"],
          ["customer_discount.remove", buyer.body.id, "ok"]
        ])
        expect(w.dialogs).toEqual([])
        // The two refusals above are logged by the browser as failed loads; nothing else is.
        expect(w.errors.filter((e) => !/status of (400|422)\b/.test(e))).toEqual([])
        expect(w.outside).toEqual([])
      },
      2 * T
    )

    test(
      "a customer's name is text, never markup",
      async () => {
        const { page, dialogs } = walker
        await openView(page, `${server.baseUrl}/dashboard/customers/${hostileId}`)
        expect(await page.textContent("#customer-name")).toBe(HOSTILE)
        expect(await page.locator("main img").count()).toBe(0)
        await openView(page, `${server.baseUrl}/dashboard/customers?q=${encodeURIComponent("onerror")}`)
        expect(await page.textContent("tbody")).toContain(HOSTILE)
        expect(await page.locator("main img").count()).toBe(0)
        expect(dialogs).toEqual([])
        // No inline script may run: the policy allows only the service's own files.
        const response = await page.request.get(`${server.baseUrl}/dashboard`)
        const csp = response.headers()["content-security-policy"]!
        expect(csp).toContain("default-src 'self'")
        expect(csp).toContain("frame-ancestors 'none'")
        expect(csp).not.toContain("unsafe-inline")
      },
      T
    )

    test(
      "another organization's session cannot open this one's customer by URL",
      async () => {
        const other = await signInQuietly(b.apiKey)
        await openView(other.page, `${server.baseUrl}/dashboard/customers/${hostileId}`)
        expect(await other.page.textContent("#not-found")).toBe("No such customer.")
        const api = await other.page.request.get(`${server.baseUrl}/dashboard/api/v1/customers/${hostileId}`)
        expect(api.status()).toBe(404)
        const balances = await other.page.request.get(`${server.baseUrl}/dashboard/api/customers/${hostileId}/balances`)
        expect(balances.status()).toBe(404)
        // Its own customers list holds only its own.
        const own = await other.page.request.get(`${server.baseUrl}/dashboard/api/v1/customers?limit=50`)
        expect(((await own.json()) as any).total).toBe(2)
        expect(other.outside).toEqual([])
      },
      T
    )

    test(
      "a change without the CSRF token (or from another origin) is refused and changes nothing",
      async () => {
        const { page } = walker
        const keysBefore = (await server.run(Effect.flatMap(Organizations, (o) => o.listKeys(a.id)))).length
        const origin = server.baseUrl
        const without = await page.request.post(`${origin}/dashboard/api/keys`, { headers: { origin }, data: {} })
        expect(without.status()).toBe(403)
        expect(await without.json()).toMatchObject({ success: false, code: "csrf_token_invalid" })
        const wrong = await page.request.post(`${origin}/dashboard/api/keys`, {
          headers: { origin, "x-csrf-token": "not-the-token" },
          data: {}
        })
        expect(wrong.status()).toBe(403)
        const token = await page.$eval('meta[name="csrf-token"]', (m: any) => String(m.content))
        const crossSite = await page.request.post(`${origin}/dashboard/api/keys`, {
          headers: { origin: "https://evil.example", "x-csrf-token": token },
          data: {}
        })
        expect(crossSite.status()).toBe(403)
        const cancel = await page.request.post(`${origin}/dashboard/api/v1/subscriptions/sub_x/cancel`, {
          headers: { origin },
          data: {}
        })
        expect(cancel.status()).toBe(403)
        expect((await server.run(Effect.flatMap(Organizations, (o) => o.listKeys(a.id)))).length).toBe(keysBefore)
        // The same request with the token goes through: the refusals above were for the token alone.
        const allowed = await page.request.post(`${origin}/dashboard/api/keys`, {
          headers: { origin, "x-csrf-token": token },
          data: {}
        })
        expect(allowed.status()).toBe(200)
      },
      T
    )

    test(
      "a one-time link signs in once; sign-out ends the session",
      async () => {
        const { token } = await server.run(Effect.flatMap(DashboardSessions, (s) => s.createLink(a.slug)))
        const w = await watchedPage(browser, server.baseUrl)
        watched.push(w)
        await openView(w.page, `${server.baseUrl}/dashboard/link/${token}`)
        await Promise.all([w.page.waitForURL(`${server.baseUrl}/dashboard`), w.page.click("#use-link")])
        await w.page.waitForSelector("body[data-ready]")
        expect(await w.page.textContent("#stat-active .value")).toMatch(/^\d+$/)
        const cookie = (await w.context.cookies()).find((c) => c.name === "billing_dashboard")!
        expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/dashboard" })
        expect(cookie.expires * 1000 - Date.now()).toBeGreaterThan(11.9 * 3_600_000)
        expect(cookie.expires * 1000 - Date.now()).toBeLessThanOrEqual(12 * 3_600_000)
        // Used once.
        const again = await server.fetch("/dashboard/link", {
          method: "POST",
          headers: { origin: server.baseUrl },
          body: JSON.stringify({ token })
        })
        expect(again.status).toBe(401)
        // Sign out: the session is over at once, the old cookie put back included.
        await Promise.all([w.page.waitForURL(`${server.baseUrl}/dashboard/sign-in`), w.page.click("header button")])
        await w.context.addCookies([{ ...cookie }])
        expect((await w.page.request.get(`${server.baseUrl}/dashboard/api/overview`)).status()).toBe(401)
      },
      T
    )

    test(
      "a session ends at once when the key it signed in with is revoked",
      async () => {
        const { apiKey, key } = await server.run(Effect.flatMap(Organizations, (o) => o.createKey(a.id)))
        const w = await signInQuietly(apiKey)
        expect((await w.page.request.get(`${server.baseUrl}/dashboard/api/overview`)).status()).toBe(200)
        await server.run(Effect.flatMap(Organizations, (o) => o.revokeKey(key.id)))
        expect((await w.page.request.get(`${server.baseUrl}/dashboard/api/overview`)).status()).toBe(401)
        await w.page.goto(`${server.baseUrl}/dashboard/customers`)
        expect(new URL(w.page.url()).pathname).toBe("/dashboard/sign-in")
      },
      T
    )

    test(
      "an expired session returns to sign-in",
      async () => {
        const w = await signInQuietly(a.apiKey)
        clock.advance(12 * 3_600_000 - 60_000)
        expect((await w.page.request.get(`${server.baseUrl}/dashboard/api/overview`)).status()).toBe(200)
        clock.advance(2 * 60_000)
        try {
          await w.page.goto(`${server.baseUrl}/dashboard/customers`)
          expect(new URL(w.page.url()).pathname).toBe("/dashboard/sign-in")
          expect((await w.page.request.get(`${server.baseUrl}/dashboard/api/overview`)).status()).toBe(401)
        } finally {
          clock.set(Date.now())
        }
      },
      T
    )

    test(
      "the overview's attention lists: a renewal declined is past due, its failed payment listed in major units",
      async () => {
        const c = await server.createOrg()
        const send = sendAs(c.apiKey)
        expect((await send("POST", "/v1/sync", SAMPLE_CATALOG)).status).toBe(200)
        expect(
          (await send("POST", "/v1/customers", { id: "late", name: "Late Payer", email: "late@example.com" })).status
        ).toBe(200)
        const attached = await send("POST", "/v1/attach", { customer: "late", product: "pro" })
        // Paid now with the test card that is declined later.
        await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=declining"
        })
        clock.advance(32 * 86_400_000)
        try {
          await server.run(Effect.flatMap(Renewals, (r) => r.runDue))
          const subs = (await v1(c.apiKey, "/v1/subscriptions?customer=late")).subscriptions
          expect(subs[0].status).toBe("past_due")
          const w = await signInQuietly(c.apiKey)
          await openView(w.page, `${server.baseUrl}/dashboard`)
          expect(await w.page.textContent("#stat-past-due .value")).toBe("1")
          expect(await w.page.textContent("#stat-active .value")).toBe("0")
          const text = (await w.page.textContent("main"))!
          expect(text).toContain("Late Payer")
          // In grace, a past-due subscription still counts as recurring revenue.
          expect(text).toContain("5,000.00 NGN")
          const failed = await w.page
            .locator("section:has(h2:text-is('Needs attention: failed payments')) tbody tr")
            .count()
          expect(failed).toBeGreaterThanOrEqual(1)
          expect(await w.page.textContent("section:has(h2:text-is('Needs attention: failed payments'))")).toContain(
            "5,000.00 NGN"
          )
          await shot(w.page, `${database.name}-overview-attention`)
          expect(w.errors).toEqual([])
        } finally {
          clock.set(Date.now())
        }
      },
      T
    )

    test(
      "nothing was requested outside the service (and the watch would have seen it)",
      async () => {
        for (const w of watched) expect(w.outside).toEqual([])
        const { page, errors, outside } = walker
        await openView(page, `${server.baseUrl}/dashboard/sign-in`)
        // The page's policy stops a script's request to elsewhere before it leaves the browser…
        await page.evaluate(() => fetch("http://example.invalid/x").catch(() => undefined))
        expect(errors.some((e) => e.includes("Content Security Policy"))).toBe(true)
        expect(outside).toEqual([])
        // …and anything else that tries (here the page itself) is seen and stopped by the watch.
        await page.goto("http://example.invalid/y").catch(() => undefined)
        expect(outside).toEqual(["http://example.invalid/y"])
      },
      T
    )
  })
}
