import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import type { Browser } from "playwright-core"
import { launchBrowser, watchedPage } from "../support/browser.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * Issue 37, item 6: the simulated provider's hosted checkout shows an amount by its currency's exponent (JPY has no
 * minor unit, KWD three), and its pages carry a policy: nothing loaded, no script, never framed. In a real browser the
 * page is styled (its inline style allowed by hash), logs no violation, and its Pay and Decline buttons still work,
 * the payment returning to the vendor's callback on another origin.
 */
const T = 30_000

const catalog = {
  features: [{ slug: "images", name: "Images", type: "metered" }],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "images", creditCost: 1 }] }],
  creditPacks: [
    { slug: "yen", name: "Yen pack", credits: 10, price: 1000, currency: "JPY", creditSystem: "credits" },
    { slug: "dinar", name: "Dinar pack", credits: 10, price: 1000, currency: "KWD", creditSystem: "credits" },
    { slug: "naira", name: "Naira pack", credits: 10, price: 50000, currency: "NGN", creditSystem: "credits" }
  ],
  plans: []
}

let browser: Browser
beforeAll(async () => {
  browser = await launchBrowser()
}, T)
afterAll(() => browser?.close())

for (const database of databases()) {
  describe(`the hosted checkout page on ${database.name}`, () => {
    let server: TestServer
    let callback: ReturnType<typeof Bun.serve>
    const returned: Array<string> = []
    let apiKey: string
    beforeAll(async () => {
      server = await startServer(database.config)
      callback = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch: (request) => {
          returned.push(request.url)
          return new Response("<!doctype html><title>Back at the vendor</title><p>thanks</p>", {
            headers: { "content-type": "text/html" }
          })
        }
      })
      const org = await server.createOrg()
      apiKey = org.apiKey
      await syncCatalog(server, apiKey, catalog)
    })
    afterAll(async () => {
      callback.stop(true)
      await server.close()
    })

    let buyers = 0
    /** A new buyer each time: a paid page saves a card, and the next purchase would be charged on it. */
    const checkout = async (pack: string, withCallback = false) => {
      const customer = `buyer-${++buyers}`
      await post(server, apiKey, "/v1/customers", { id: customer, email: `${customer}@example.com` })
      const bought = await post(server, apiKey, "/v1/addon", {
        customer,
        pack,
        ...(withCallback ? { callbackUrl: `http://127.0.0.1:${callback.port}/back?from=billing` } : {})
      })
      expect(bought.body).toMatchObject({ requiresCheckout: true })
      // The page on this test's port (the URL names the configured public address).
      return server.baseUrl + new URL(bought.body.checkoutUrl as string).pathname
    }

    test("amounts by the currency's exponent; a strict policy on every page", async () => {
      for (const [pack, shown] of [
        ["yen", "JPY 1,000"],
        ["dinar", "KWD 1.000"],
        ["naira", "NGN 500.00"]
      ] as const) {
        const page = await fetch(await checkout(pack))
        const html = await page.text()
        expect({ pack, shown: html.includes(`<strong>${shown}</strong>`) }).toEqual({ pack, shown: true })
        const csp = page.headers.get("content-security-policy")!
        expect(csp).toContain("default-src 'none'")
        expect(csp).toContain("frame-ancestors 'none'")
        expect(csp).not.toContain("unsafe")
        expect(csp).not.toContain("script-src")
        expect(html).not.toContain("<script")
        // The one inline style is allowed by its hash, and nothing else is.
        const style = /<style>([^<]*)<\/style>/.exec(html)![1]!
        expect(csp).toContain(`style-src 'sha256-${createHash("sha256").update(style).digest("base64")}'`)
        expect(page.headers.get("x-frame-options")).toBe("DENY")
        expect(page.headers.get("x-content-type-options")).toBe("nosniff")
      }
      // The completion's answer and a missing page carry it too.
      const done = await fetch(await checkout("yen"), { method: "POST" })
      expect(await done.text()).toContain("Payment complete")
      expect(done.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
      const missing = await fetch(`${server.baseUrl}/simulated/checkout/nobody/nothing`)
      expect(missing.status).toBe(404)
      expect(missing.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    })

    test(
      "in a browser: styled, no violation logged, Decline and Pay work, Pay returns to the vendor's callback",
      async () => {
        const watched = await watchedPage(browser, server.baseUrl)
        const { page, errors } = watched
        try {
          await page.goto(await checkout("dinar"))
          expect(await page.textContent("strong")).toBe("KWD 1.000")
          // The inline style applied: the Pay button is green, not the browser's grey.
          const background = await page.$eval(
            "button[type=submit]",
            (b) => (globalThis as any).getComputedStyle(b).backgroundColor
          )
          expect(background).toBe("rgb(10, 125, 69)")
          await Promise.all([page.waitForURL(/outcome=decline/), page.click("button.secondary")])
          expect(await page.textContent("h1")).toBe("Declined")

          const url = await checkout("yen", true)
          await page.goto(url)
          expect(await page.textContent("strong")).toBe("JPY 1,000")
          await Promise.all([
            page.waitForURL(`http://127.0.0.1:${callback.port}/**`),
            page.click("button:not(.secondary)")
          ])
          const back = new URL(page.url())
          expect(back.pathname).toBe("/back")
          expect(back.searchParams.get("status")).toBe("success")
          expect(returned.filter((u) => new URL(u).pathname === "/back")).toHaveLength(1)
          expect(errors).toEqual([])
          expect(watched.dialogs).toEqual([])
          // The page asked nothing of anywhere else: the one request outside the service is the vendor's callback.
          expect(watched.outside.filter((u) => !u.startsWith(`http://127.0.0.1:${callback.port}/`))).toEqual([])
        } finally {
          await watched.context.close()
        }
      },
      T
    )
  })
}
