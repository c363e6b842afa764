import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, HashMap, Logger, LogLevel } from "effect"
import { PortalSessions } from "../../src/portal/Sessions.ts"
import { CSP } from "../../src/web/pages.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { post } from "../support/catalog.ts"
import { databases, ok, startServer, type TestServer } from "../support/harness.ts"
import { auditOf, HOSTILE, openPortal, type Org, portalCatalog, saveCard, seedOrg } from "./support.ts"

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
        { id: "bob", name: "Bob" },
        { id: "cara", name: "Cara" }
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
      // The typed client.
      const client = await server.client(org.apiKey)
      const typed = await ok(client.portal.createPortalSession({ payload: { customer: "ada" } }))
      expect(typed.url).toStartWith(`${new URL(created.body.url).origin}/portal/link/${org.id}.`)
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
      // Redeemed by several requests at once: one session, the others 401.
      const raced = await post(server, org.apiKey, "/v1/portal/sessions", { customer: "ada" })
      const racedToken = new URL(raced.body.url).pathname.slice("/portal/link/".length)
      const answers = await Promise.all(
        Array.from({ length: 8 }, () =>
          server.fetch("/portal/link", {
            method: "POST",
            headers: { origin: server.baseUrl },
            body: JSON.stringify({ token: racedToken })
          })
        )
      )
      expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401])
      // The link page itself: no referrer (the token is in its URL), the same CSP.
      expect(page.headers.get("referrer-policy")).toBe("no-referrer")
      expect(page.headers.get("content-security-policy")).toBe(CSP)
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

    test("every change goes through /v1's services: cards, plan preview and change, cancel, resume, undo", async () => {
      const v1 = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const json = async (answer: Response) => ({ status: answer.status, body: (await answer.json()) as any })
      const portal = await openPortal(server, org, "cara")

      // Payment methods: the provider's setup flow, back to the portal's page; the wallet as /v1 shows it.
      const setup = await json(await portal.post("/portal/api/payment-methods/setup"))
      expect(setup.status).toBe(200)
      expect(setup.body.url).toContain("/simulated/setup/")
      expect((await json(await portal.get("/portal/api/payment-methods"))).body).toEqual({ paymentMethods: [] })
      const cards = await saveCard(server, org, "cara")
      const second = (await saveCard(server, org, "cara", "declining")).find((m) => m.id !== cards[0]!.id)!
      const wallet = await json(await portal.get("/portal/api/payment-methods"))
      expect(wallet.body).toEqual({ paymentMethods: (await v1("/v1/wallet?customer=cara")).paymentMethods })
      const made = await json(await portal.post(`/portal/api/payment-methods/${second.id}/default`))
      expect(made.status).toBe(200)
      expect(made.body.paymentMethods[0]).toMatchObject({ id: second.id, isDefault: true })
      expect((await v1("/v1/wallet?customer=cara")).paymentMethods[0].id).toBe(second.id)
      expect((await v1("/v1/events?type=payment_method.updated&customer=cara")).data).toHaveLength(1)
      // Back to the card that pays, then the declining one removed.
      await portal.post(`/portal/api/payment-methods/${cards[0]!.id}/default`)
      const removed = await json(await portal.post(`/portal/api/payment-methods/${second.id}/remove`))
      expect(removed.status).toBe(200)
      expect(removed.body.paymentMethods.map((m: any) => m.id)).toEqual([cards[0]!.id])
      expect((await v1("/v1/events?type=payment_method.removed&customer=cara")).data).toHaveLength(1)

      // Plans: the portal plans and the current one; a plan not offered is unknown to the portal.
      const plans = await json(await portal.get("/portal/api/plans"))
      expect(plans.body.plans.map((p: any) => [p.slug, p.current])).toEqual([
        ["free", true],
        ["pro", false]
      ])
      expect(plans.body.plans[1]).toEqual({
        slug: "pro",
        name: "Pro",
        group: "main",
        price: { amount: 500000, currency: "NGN", interval: "monthly" },
        features: [
          { feature: "tokens", name: "Tokens", type: "metered", limit: 5000, reset: "monthly" },
          { feature: "support", name: "Priority support", type: "boolean", limit: null, reset: null }
        ],
        current: false
      })
      for (const route of ["/portal/api/plans/preview", "/portal/api/plans/change"]) {
        const team = await json(await portal.post(route, { plan: "team" }))
        expect(team).toMatchObject({ status: 404, body: { success: false, code: "plan_not_found" } })
        for (const bad of [{}, { plan: 7 }, { plan: "" }]) {
          const invalid = await json(await portal.post(route, bad))
          expect(invalid).toMatchObject({ status: 400, body: { success: false, code: "invalid_request" } })
        }
      }
      expect((await v1("/v1/subscriptions?customer=cara")).subscriptions[0].plan).toBe("free")

      // The §14 preview exactly as /v1 answers it for this customer; then the change, and /v1 shows it.
      const preview = await json(await portal.post("/portal/api/plans/preview", { plan: "pro" }))
      expect(preview.status).toBe(200)
      const direct = await post(server, org.apiKey, "/v1/attach/preview", { customer: "cara", product: "pro" })
      const stable = (p: any) => ({ ...p, effectiveAt: undefined, lines: p.lines.map((l: any) => l.description) })
      expect(stable(preview.body)).toEqual(stable(direct.body))
      expect(preview.body).toMatchObject({ plan: "pro", previousPlan: "free", total: 500000 })
      const changed = await json(await portal.post("/portal/api/plans/change", { plan: "pro" }))
      expect(changed.status).toBe(200)
      expect(changed.body).toMatchObject({ success: true, checkoutUrl: null, subscription: { plan: "pro" } })
      const [sub] = (await v1("/v1/subscriptions?customer=cara")).subscriptions
      expect(sub).toMatchObject({ id: changed.body.subscription.id, plan: "pro", status: "active" })
      const updated = (await v1("/v1/events?type=subscription.updated&customer=cara")).data
      expect(updated[0].data).toMatchObject({ id: sub.id, plan: "pro", previousPlan: "free" })

      // Invoices: what /v1 lists (drafts aside), newest first, each with its hosted page and PDF.
      const invoices = await json(await portal.get("/portal/api/invoices"))
      const listed = (await v1("/v1/billing/invoices?customer=cara")).invoices.filter((i: any) => i.status !== "draft")
      expect(invoices.body.invoices.map((i: any) => i.id).sort()).toEqual(listed.map((i: any) => i.id).sort())
      expect(invoices.body.invoices.length).toBeGreaterThan(0)
      for (const invoice of invoices.body.invoices) {
        expect(invoice.pdfUrl).toBe(`${invoice.hostedUrl}/pdf`)
        expect(invoice).toEqual({ ...listed.find((i: any) => i.id === invoice.id), pdfUrl: invoice.pdfUrl })
        const pdf = await server.fetch(new URL(invoice.pdfUrl).pathname)
        expect(pdf.status).toBe(200)
        expect(pdf.headers.get("content-type")).toContain("application/pdf")
      }

      // Cancel at period end, undo it; a scheduled downgrade, undo it.
      const cancel = await json(await portal.post(`/portal/api/subscriptions/${sub.id}/cancel`))
      expect(cancel.body).toMatchObject({ success: true, subscription: { id: sub.id, cancelAtPeriodEnd: true } })
      expect((await v1("/v1/subscriptions?customer=cara")).subscriptions[0].cancelAtPeriodEnd).toBe(true)
      const resume = await json(await portal.post(`/portal/api/subscriptions/${sub.id}/resume`))
      expect(resume.body).toMatchObject({ success: true, subscription: { id: sub.id, cancelAtPeriodEnd: false } })
      expect((await v1("/v1/events?type=subscription.resumed&customer=cara")).data).toHaveLength(1)
      const again = await json(await portal.post(`/portal/api/subscriptions/${sub.id}/resume`))
      expect(again).toMatchObject({ status: 409, body: { code: "subscription_not_canceling" } })
      const down = await json(await portal.post("/portal/api/plans/change", { plan: "free" }))
      expect(down.status).toBe(200)
      expect(down.body.subscription.scheduledChange).toMatchObject({ plan: "free" })
      const undo = await json(await portal.post(`/portal/api/subscriptions/${sub.id}/cancel-change`))
      expect(undo.status).toBe(200)
      expect(undo.body.subscription.scheduledChange).toBeUndefined()
      expect((await v1("/v1/subscriptions?customer=cara")).subscriptions[0]).toMatchObject({ plan: "pro" })
      expect((await v1("/v1/subscriptions?customer=cara")).subscriptions[0].scheduledChange).toBeUndefined()

      // Every POST audited with its outcome, refusals included.
      const audit = (await auditOf(server, org.id)).filter((r) => r.customerId === sub.customerId)
      expect(audit.map((r) => [r.action, r.outcome])).toEqual([
        ["session.open", "ok"],
        ["payment_method.setup", "ok"],
        ["payment_method.default", "ok"],
        ["payment_method.default", "ok"],
        ["payment_method.remove", "ok"],
        ["plan.preview", "refused 404"],
        ...Array.from({ length: 3 }, () => ["plan.preview", "refused 400"]),
        ["plan.change", "refused 404"],
        ...Array.from({ length: 3 }, () => ["plan.change", "refused 400"]),
        ["plan.preview", "ok"],
        ["plan.change", "ok"],
        ["subscription.cancel", "ok"],
        ["subscription.resume", "ok"],
        ["subscription.resume", "refused 409"],
        ["plan.change", "ok"],
        ["subscription.cancel_change", "ok"]
      ])
    })

    test("a pending subscription's first payment: checkout through /v1, its answer as it is; own only", async () => {
      // An organization without a plan given to every new customer, so that Pro is a new subscription, not a change.
      const org = await server.createOrg()
      const noFree = { ...portalCatalog, plans: portalCatalog.plans.map((p) => ({ ...p, autoEnable: false })) }
      await seedOrg(server, org, [], noFree)
      const v1 = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const json = async (answer: Response) => ({ status: answer.status, body: (await answer.json()) as any })
      const attachedUrl = new Map<string, string>()
      for (const id of ["dan", "eve"]) {
        const created = await post(server, org.apiKey, "/v1/customers", { id, name: id, email: `${id}@example.com` })
        expect(created.status).toBe(200)
        // No card: Pro waits for its first payment.
        const attached = await post(server, org.apiKey, "/v1/attach", { customer: id, product: "pro" })
        expect(attached.body.subscription.status).toBe("pending")
        attachedUrl.set(id, attached.body.checkoutUrl)
      }
      const subOf = async (id: string) => (await v1(`/v1/subscriptions?customer=${id}`)).subscriptions[0]
      const dan = await subOf("dan")
      const portal = await openPortal(server, org, "dan")
      // Another customer's pending subscription: as unknown as one that does not exist, and not paid.
      const eve = await subOf("eve")
      for (const id of [eve.id, "sub_nope"]) {
        const refused = await json(await portal.post(`/portal/api/subscriptions/${id}/checkout`))
        expect(refused).toMatchObject({ status: 404, body: { success: false, code: "subscription_not_found" } })
      }
      expect(await subOf("eve")).toEqual(eve)

      // No card: /v1's answer, as it is. The attach opened a page already, and /v1 answers with it (one open page
      // per pending subscription, §7, whatever callback the attach gave it; the portal's `<origin>/portal` is used
      // when /v1 opens a new one).
      const answer = async (path: string) => {
        const response = await server.fetch(new URL(path).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok",
          redirect: "manual"
        })
        return { status: response.status, location: response.headers.get("location") }
      }
      const first = await json(await portal.post(`/portal/api/subscriptions/${dan.id}/checkout`))
      expect(first).toMatchObject({
        status: 200,
        body: { success: true, activatedDirectly: false, code: "checkout_required" }
      })
      expect(first.body.checkoutUrl).toBe(attachedUrl.get("dan"))
      // Paid there, the subscription is active.
      expect((await answer(first.body.checkoutUrl)).status).toBeOneOf([200, 303])
      expect(await subOf("dan")).toMatchObject({ id: dan.id, status: "active" })
      // Not pending any more: /v1's refusal, as it is.
      const again = await json(await portal.post(`/portal/api/subscriptions/${dan.id}/checkout`))
      expect(again).toMatchObject({ status: 409, body: { success: false, code: "subscription_not_pending" } })

      // A saved card: the checkout charges it and activates at once.
      await saveCard(server, org, "eve")
      const evePortal = await openPortal(server, org, "eve")
      const direct = await json(await evePortal.post(`/portal/api/subscriptions/${eve.id}/checkout`))
      expect(direct).toMatchObject({ status: 200, body: { activatedDirectly: true, checkoutUrl: null } })
      expect(await subOf("eve")).toMatchObject({ id: eve.id, status: "active" })
      expect((await v1("/v1/events?type=subscription.activated&customer=eve")).data).toHaveLength(1)

      const audit = (await auditOf(server, org.id)).filter((r) => r.action === "subscription.checkout")
      expect(audit.map((r) => [r.objectId, r.outcome])).toEqual([
        [eve.id, "refused 404"],
        ["sub_nope", "refused 404"],
        [dan.id, "ok"],
        [dan.id, "refused 409"],
        [eve.id, "ok"]
      ])
    })

    test("each audited change is also a `portal change` log line with organization, customer, action, object, outcome", async () => {
      const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
      const capture = Logger.make(({ message, annotations }) => {
        lines.push({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
      })
      const session = {
        id: "pss_test",
        organization: { id: org.id, slug: org.slug, name: "Org" },
        customerId: "cus_test",
        csrfToken: "t",
        returnUrl: null,
        expiresAt: 0
      }
      await server.run(
        Effect.flatMap(PortalSessions, (s) => s.audit(session, "subscription.cancel", "sub_x", "refused 404")).pipe(
          // Whatever level the test server logs at, the line is an info line: caught here beside its own loggers.
          Logger.withMinimumLogLevel(LogLevel.Info),
          Effect.provide(Logger.add(capture))
        )
      )
      const line = lines.find((l) => JSON.stringify(l.message).includes("portal change"))!
      expect(line.annotations).toMatchObject({
        organization: org.id,
        customer: "cus_test",
        action: "subscription.cancel",
        object: "sub_x",
        outcome: "refused 404"
      })
      const rows = (await auditOf(server, org.id)).filter((r) => r.objectId === "sub_x")
      expect(rows).toEqual([
        { action: "subscription.cancel", objectId: "sub_x", customerId: "cus_test", outcome: "refused 404" }
      ])
    })
  })
}
