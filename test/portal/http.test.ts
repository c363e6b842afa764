import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { CSP } from "../../src/web/pages.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { post } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { auditOf, HOSTILE, openPortal, type Org, seedOrg } from "./support.ts"

/** The portal's routes without a browser: sessions, links, cookies, headers, what the pages are made of. */
for (const database of databases()) {
  describe(`customer portal routes on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    let org: Org & { slug: string }
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
      org = await server.createOrg()
      await seedOrg(server, org, [
        { id: "ada", name: HOSTILE },
        { id: "bob", name: "Bob" }
      ])
    })
    afterAll(() => server.close())

    test("POST /v1/portal/sessions: a one-hour link for a customer of the key's organization", async () => {
      const before = clock.clock.unsafeCurrentTimeMillis()
      const created = await post(server, org.apiKey, "/v1/portal/sessions", {
        customer: "ada",
        returnUrl: "https://vendor.example/settings"
      })
      expect(created.status).toBe(200)
      expect(created.body).toEqual({ success: true, url: expect.any(String), expiresAt: expect.any(String) })
      const url = new URL(created.body.url)
      expect(url.pathname).toMatch(new RegExp(`^/portal/link/${org.id}\\.[A-Za-z0-9_-]{40,}$`))
      const expires = Date.parse(created.body.expiresAt)
      expect(expires - before).toBeGreaterThanOrEqual(3_600_000 - 1_000)
      expect(expires - before).toBeLessThanOrEqual(3_600_000 + 5_000)
      // The customer by email too, as every /v1 route names it; unknown: 404, nothing written.
      expect((await post(server, org.apiKey, "/v1/portal/sessions", { customer: "bob@example.com" })).status).toBe(200)
      const unknown = await post(server, org.apiKey, "/v1/portal/sessions", { customer: "nobody" })
      expect(unknown).toMatchObject({ status: 404, body: { success: false, code: "customer_not_found" } })
      const badUrl = await post(server, org.apiKey, "/v1/portal/sessions", {
        customer: "ada",
        returnUrl: "javascript:x"
      })
      expect(badUrl.status).toBe(400)
      expect((await post(server, "sk_test_nope", "/v1/portal/sessions", { customer: "ada" })).status).toBe(401)
    })

    test("the link opens a session once; its cookie is HttpOnly, SameSite=Strict, Path=/portal, ≤ 1 hour", async () => {
      const created = await post(server, org.apiKey, "/v1/portal/sessions", { customer: "ada" })
      const linkPath = new URL(created.body.url).pathname
      const page = await server.fetch(linkPath)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain(`data-view="link"`)
      const token = linkPath.slice("/portal/link/".length)
      const redeem = (origin: string) =>
        server.fetch("/portal/link", { method: "POST", headers: { origin }, body: JSON.stringify({ token }) })
      // From another origin: refused, the link still good.
      const foreign = await redeem("https://evil.example")
      expect(foreign.status).toBe(403)
      expect(foreign.headers.get("set-cookie")).toBeNull()
      const first = await redeem(server.baseUrl)
      expect(first.status).toBe(200)
      expect(await first.json()).toEqual({ success: true })
      const setCookie = first.headers.get("set-cookie")!
      expect(setCookie).toMatch(/^billing_portal=[^;]+; /)
      expect(setCookie).toContain("HttpOnly")
      expect(setCookie).toContain("SameSite=Strict")
      expect(setCookie).toContain("Path=/portal;")
      expect(setCookie).not.toContain("Secure")
      const maxAge = Number(/Max-Age=(\d+)/.exec(setCookie)![1])
      expect(maxAge).toBeGreaterThan(3_500)
      expect(maxAge).toBeLessThanOrEqual(3_600)
      // Only the secret's hash is stored: the cookie's secret appears in no table.
      const second = await redeem(server.baseUrl)
      expect(second.status).toBe(401)
      expect(await second.json()).toMatchObject({ success: false, code: "portal_link_invalid" })
      expect(second.headers.get("set-cookie")).toBeNull()
      for (const forged of [`${org.id}.nope`, "nodot", "", `x.${token.split(".")[1]}`]) {
        const answer = await server.fetch("/portal/link", {
          method: "POST",
          headers: { origin: server.baseUrl },
          body: JSON.stringify({ token: forged })
        })
        expect(answer.status).toBe(401)
      }
      // Behind an https proxy the cookie is Secure.
      const again = await post(server, org.apiKey, "/v1/portal/sessions", { customer: "ada" })
      const secure = await server.fetch("/portal/link", {
        method: "POST",
        headers: { origin: server.baseUrl, "x-forwarded-proto": "https" },
        body: JSON.stringify({ token: new URL(again.body.url).pathname.slice("/portal/link/".length) })
      })
      expect(secure.headers.get("set-cookie")).toContain("; Secure")
    })

    test("pages: the shell with its view, CSRF token, escaped vendor name and return URL; CSP on everything", async () => {
      const portal = await openPortal(server, org, "ada", `https://vendor.example/back?a=1&b="2"`)
      const views = { "/portal": "overview", "/portal/invoices": "invoices", "/portal/plans": "plans" } as const
      for (const [path, view] of [...Object.entries(views), ["/portal/payment-methods", "payment-methods"]]) {
        const page = await portal.get(path!)
        expect(page.status).toBe(200)
        expect(page.headers.get("content-security-policy")).toBe(CSP)
        expect(page.headers.get("x-frame-options")).toBe("DENY")
        expect(page.headers.get("cache-control")).toBe("no-store")
        const text = await page.text()
        expect(text).toContain(`data-view="${view}"`)
        expect(text).toContain(`<meta name="csrf-token" content="${portal.csrf}">`)
        expect(text).toContain(`data-return-url="https://vendor.example/back?a=1&amp;b=&quot;2&quot;"`)
        expect(text).toContain(`<script type="module" src="/portal/assets/portal.js"></script>`)
        expect(text).toContain(`<link rel="stylesheet" href="/portal/assets/portal.css">`)
        expect(text).not.toContain("Ada")
      }
      const json = await portal.get("/portal/api/overview")
      expect(json.headers.get("content-security-policy")).toBe(CSP)
      expect(json.headers.get("content-type")).toBe("application/json")
      // Without a session: pages go to /portal/expired, JSON is 401.
      const page = await server.fetch("/portal/plans", { redirect: "manual" })
      expect(page.status).toBe(303)
      expect(page.headers.get("location")).toBe("/portal/expired")
      expect(page.headers.get("content-security-policy")).toBe(CSP)
      const expired = await server.fetch("/portal/expired")
      expect(expired.status).toBe(200)
      expect(await expired.text()).toContain(`data-view="expired"`)
      const api = await server.fetch("/portal/api/overview")
      expect(api.status).toBe(401)
      expect(api.headers.get("content-security-policy")).toBe(CSP)
      expect(await api.json()).toMatchObject({ success: false, error: "Unauthorized", code: "unauthorized" })
      // The dashboard's cookie is no portal session, and a portal cookie no dashboard session.
      expect((await server.fetch("/dashboard/api/overview", { headers: { cookie: portal.cookie } })).status).toBe(401)
      const unknown = await portal.get("/portal/api/nothing")
      expect(unknown.status).toBe(404)
      expect((await portal.get("/portal/nothing")).status).toBe(404)
    })

    test("the vendor's name comes from its billing profile, escaped in the shell", async () => {
      const profile = await post(server, org.apiKey, "/v1/billing/profile", { legalName: `Acme <b>&</b> "Sons"` })
      expect(profile.status).toBe(200)
      const portal = await openPortal(server, org, "bob")
      const text = await (await portal.get("/portal")).text()
      expect(text).toContain(`data-vendor="Acme &lt;b&gt;&amp;&lt;/b&gt; &quot;Sons&quot;"`)
      expect(text).not.toContain("<b>")
      const overview = (await (await portal.get("/portal/api/overview")).json()) as any
      expect(overview.vendor).toEqual({ name: `Acme <b>&</b> "Sons"`, returnUrl: null })
      await post(server, org.apiKey, "/v1/billing/profile", { legalName: null })
    })

    test("overview: the customer's plan, features against limits, credits; markup only as data", async () => {
      const portal = await openPortal(server, org, "ada", "https://vendor.example/")
      await post(server, org.apiKey, "/v1/track", { customer: "ada", feature: "tokens", value: 120 })
      const answer = await portal.get("/portal/api/overview")
      expect(answer.status).toBe(200)
      const body = (await answer.json()) as any
      expect(body.vendor).toEqual({ name: expect.any(String), returnUrl: "https://vendor.example/" })
      expect(body.customer).toEqual({ id: "ada", name: HOSTILE, email: "ada@example.com" })
      expect(Date.parse(body.expiresAt)).toBeGreaterThan(clock.clock.unsafeCurrentTimeMillis())
      const subs = (await (await server.fetch("/v1/subscriptions?customer=ada", { apiKey: org.apiKey })).json()) as any
      expect(body.subscriptions).toEqual([{ ...subs.subscriptions[0], planName: "Free", price: null }])
      expect(body.features).toHaveLength(1)
      expect(body.features[0].feature).toEqual({ slug: "tokens", name: "Tokens", type: "metered", unit: "token" })
      const check = await post(server, org.apiKey, "/v1/check", { customer: "ada", feature: "tokens", value: 0 })
      expect(body.features[0].state).toEqual(check.body)
      expect(body.features[0].state).toMatchObject({ allowed: true, usage: 120, limit: 1000 })
      expect(body.credits).toEqual([{ creditSystem: { slug: "credits", name: "AI credits" }, balance: 0 }])
      expect(body.creditBalance).toEqual({})
      // Markup stays data: the JSON string carries it escaped as JSON, never rewritten.
      expect(await (await portal.get("/portal/api/overview")).text()).toContain(JSON.stringify(HOSTILE).slice(1, -1))
      expect((await auditOf(server, org.id)).some((r) => r.action === "session.open" && r.outcome === "ok")).toBe(true)
    })

    test("a session expires with its link's hour (the service's clock); sign-out ends it at once", async () => {
      const portal = await openPortal(server, org, "bob")
      expect((await portal.get("/portal/api/overview")).status).toBe(200)
      const created = await post(server, org.apiKey, "/v1/portal/sessions", { customer: "bob" })
      clock.advance(3_600_000 + 1_000)
      expect((await portal.get("/portal/api/overview")).status).toBe(401)
      const page = await server.fetch("/portal", { headers: { cookie: portal.cookie }, redirect: "manual" })
      expect(page.status).toBe(303)
      // An unused link past its hour opens nothing.
      const late = await server.fetch("/portal/link", {
        method: "POST",
        headers: { origin: server.baseUrl },
        body: JSON.stringify({ token: new URL(created.body.url).pathname.slice("/portal/link/".length) })
      })
      expect(late.status).toBe(401)

      const fresh = await openPortal(server, org, "bob")
      // Sign-out without the CSRF token: refused, still signed in.
      const refused = await server.fetch("/portal/sign-out", {
        method: "POST",
        headers: { cookie: fresh.cookie, origin: server.baseUrl }
      })
      expect(refused.status).toBe(403)
      expect((await fresh.get("/portal/api/overview")).status).toBe(200)
      const out = await fresh.post("/portal/sign-out")
      expect(out.status).toBe(200)
      expect(out.headers.get("set-cookie")).toContain("Max-Age=0")
      expect((await fresh.get("/portal/api/overview")).status).toBe(401)
    })
  })
}
