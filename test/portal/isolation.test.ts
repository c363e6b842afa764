import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { auditOf, openPortal, type Org, type Portal, portalCatalog, saveCard, seedOrg } from "./support.ts"

/**
 * decisions.md §17: a session reaches one customer of one organization. Every portal route is tried with another
 * customer's ids and from another organization's session; without a cookie; and every change without the CSRF
 * header or from a foreign origin. Each refusal leaves /v1's view of everything unchanged.
 */
for (const database of databases()) {
  describe(`customer portal isolation on ${database.name}`, () => {
    let server: TestServer
    let a: Org
    let b: Org
    let ada: Portal
    let bobSub: string
    let bobCard: string
    let adaSub: string
    let adaCard: string
    let foreignPortal: Portal

    /** Everything /v1 shows of an organization's customers, and its events: what a refusal must not change. */
    const state = async (org: Org, customers: ReadonlyArray<string>) => {
      const out: Record<string, unknown> = {}
      for (const c of customers) {
        for (const path of [`/v1/subscriptions?customer=${c}`, `/v1/wallet?customer=${c}`, `/v1/customers/${c}`]) {
          out[path] = await (await server.fetch(path, { apiKey: org.apiKey })).json()
        }
      }
      out.events = await (await server.fetch("/v1/events?limit=100", { apiKey: org.apiKey })).json()
      return out
    }

    beforeAll(async () => {
      server = await startServer(database.config)
      a = await server.createOrg()
      b = await server.createOrg()
      await seedOrg(server, a, [
        { id: "ada", name: "Ada" },
        { id: "bob", name: "Bob the other customer" }
      ])
      // Organization B: the same customer ids and plan slugs, and a portal plan of its own.
      await seedOrg(server, b, [{ id: "ada", name: "Ada of B" }])
      await syncCatalog(server, b.apiKey, {
        ...portalCatalog,
        plans: [...portalCatalog.plans, { slug: "b-only", name: "B only", portal: true, planGroup: "main" }]
      })
      for (const customer of ["ada", "bob"]) {
        await saveCard(server, a, customer)
        const attached = await post(server, a.apiKey, "/v1/attach", { customer, product: "pro" })
        expect(attached.body.subscription.status).toBe("active")
      }
      const subOf = async (customer: string) =>
        ((await (await server.fetch(`/v1/subscriptions?customer=${customer}`, { apiKey: a.apiKey })).json()) as any)
          .subscriptions[0].id as string
      const cardOf = async (customer: string) =>
        ((await (await server.fetch(`/v1/wallet?customer=${customer}`, { apiKey: a.apiKey })).json()) as any)
          .paymentMethods[0].id as string
      adaSub = await subOf("ada")
      bobSub = await subOf("bob")
      adaCard = await cardOf("ada")
      bobCard = await cardOf("bob")
      // Bob's subscription set to cancel, so that resume would change it if it could reach it.
      await post(server, a.apiKey, `/v1/subscriptions/${bobSub}/cancel`, {})
      ada = await openPortal(server, a, "ada")
      foreignPortal = await openPortal(server, b, "ada")
    }, 60_000)
    afterAll(() => server.close())

    /** Every change route of the portal, aimed at the given subscription and payment method. */
    const changes = (sub: string, card: string): ReadonlyArray<readonly [string, unknown]> => [
      [`/portal/api/subscriptions/${sub}/cancel`, {}],
      [`/portal/api/subscriptions/${sub}/resume`, {}],
      [`/portal/api/subscriptions/${sub}/cancel-change`, {}],
      [`/portal/api/subscriptions/${sub}/checkout`, {}],
      [`/portal/api/payment-methods/${card}/default`, {}],
      [`/portal/api/payment-methods/${card}/remove`, {}]
    ]
    const everyPost = (sub: string, card: string) => [
      ...changes(sub, card),
      ["/portal/api/payment-methods/setup", {}] as const,
      ["/portal/api/plans/preview", { plan: "pro" }] as const,
      ["/portal/api/plans/change", { plan: "free" }] as const,
      ["/portal/sign-out", {}] as const
    ]
    const READS = ["/portal/api/overview", "/portal/api/invoices", "/portal/api/payment-methods", "/portal/api/plans"]

    test("another customer's subscription or card answers as an unknown one, and nothing changes", async () => {
      const before = await state(a, ["ada", "bob"])
      for (const [path, body] of changes(bobSub, bobCard)) {
        const answer = await ada.post(path, body)
        const text = await answer.text()
        expect({ path, status: answer.status }).toEqual({ path, status: 404 })
        expect(JSON.parse(text).code).toMatch(/^(subscription|payment_method)_not_found$/)
        // The same answer as an id that names nothing.
        const unknown = await ada.post(path.replace(bobSub, "sub_nope").replace(bobCard, "pm_nope"), body)
        expect((await unknown.json()) as any).toMatchObject({ code: JSON.parse(text).code })
      }
      expect(await state(a, ["ada", "bob"])).toEqual(before)
      // Refusals are audited too, under ada's customer id.
      const refused = (await auditOf(server, a.id)).filter((r) => r.outcome === "refused 404")
      expect(refused.map((r) => r.objectId)).toContain(bobSub)
      expect(refused.map((r) => r.objectId)).toContain(bobCard)
    })

    test("the reads show the session's customer only", async () => {
      for (const path of READS) {
        const text = await (await ada.get(path)).text()
        expect(text).not.toContain(bobSub)
        expect(text).not.toContain(bobCard)
        expect(text).not.toContain("Bob the other customer")
        expect(text).not.toContain("Ada of B")
      }
      const overview = (await (await ada.get("/portal/api/overview")).json()) as any
      expect(overview.subscriptions.map((s: any) => s.id)).toEqual([adaSub])
      const wallet = (await (await ada.get("/portal/api/payment-methods")).json()) as any
      expect(wallet.paymentMethods.map((m: any) => m.id)).toEqual([adaCard])
    })

    test("a session of another organization reaches none of this one's ids, nor its plans", async () => {
      const before = await state(a, ["ada", "bob"])
      for (const [sub, card] of [
        [adaSub, adaCard],
        [bobSub, bobCard]
      ] as const) {
        for (const [path, body] of changes(sub, card)) {
          const answer = await foreignPortal.post(path, body)
          expect({ path, status: answer.status }).toEqual({ path, status: 404 })
        }
      }
      // B's own portal plan is B's alone; A's session does not find it.
      const bOnly = await ada.post("/portal/api/plans/preview", { plan: "b-only" })
      expect(bOnly.status).toBe(404)
      const text = await (await foreignPortal.get("/portal/api/overview")).text()
      expect(text).toContain("Ada of B")
      expect(text).not.toContain(adaSub)
      expect(await state(a, ["ada", "bob"])).toEqual(before)
      // A cookie naming A's organization with B's session secret is no session.
      const secret = foreignPortal.cookie.split(".").slice(1).join(".")
      const forged = await server.fetch("/portal/api/overview", {
        headers: { cookie: `billing_portal=${a.id}.${secret}` }
      })
      expect(forged.status).toBe(401)
    })

    test("no cookie: every route 401 (pages go to /portal/expired); nothing changed", async () => {
      const before = await state(a, ["ada", "bob"])
      for (const path of READS)
        expect({ path, status: (await server.fetch(path)).status }).toEqual({ path, status: 401 })
      for (const [path, body] of everyPost(adaSub, adaCard)) {
        if (path === "/portal/sign-out") continue
        const answer = await server.fetch(path, {
          method: "POST",
          headers: { origin: server.baseUrl, "x-csrf-token": ada.csrf },
          body: JSON.stringify(body)
        })
        expect({ path, status: answer.status }).toEqual({ path, status: 401 })
      }
      expect(await state(a, ["ada", "bob"])).toEqual(before)
    })

    test("a change without the CSRF header, with another token, or from a foreign origin: 403, nothing changed", async () => {
      const before = await state(a, ["ada", "bob"])
      const attempts: ReadonlyArray<Record<string, string>> = [
        { origin: server.baseUrl },
        { origin: server.baseUrl, "x-csrf-token": foreignPortal.csrf },
        { origin: "https://evil.example", "x-csrf-token": ada.csrf },
        { "sec-fetch-site": "cross-site", "x-csrf-token": ada.csrf }
      ]
      for (const headers of attempts) {
        for (const [path, body] of everyPost(adaSub, adaCard)) {
          const answer = await server.fetch(path, {
            method: "POST",
            headers: { cookie: ada.cookie, ...headers },
            body: JSON.stringify(body)
          })
          expect({ path, headers, status: answer.status }).toEqual({ path, headers, status: 403 })
          expect((await answer.json()) as any).toMatchObject({ success: false, code: "csrf_token_invalid" })
        }
      }
      expect(await state(a, ["ada", "bob"])).toEqual(before)
      // Still signed in (sign-out was refused too), and the refusals are in the audit.
      expect((await ada.get("/portal/api/overview")).status).toBe(200)
      expect((await auditOf(server, a.id)).filter((r) => r.action === "csrf.refused").length).toBeGreaterThan(0)
    })
  })
}
