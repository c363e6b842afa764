import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { SIGNATURE_HEADER, sign } from "../../src/payments/simulated/SimulatedAdapter.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "images", name: "Images", type: "metered" }
  ],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "images", creditCost: 1 }] }],
  creditPacks: [
    { slug: "small", name: "Small pack", credits: 100, price: 50000, currency: "NGN", creditSystem: "credits" }
  ],
  plans: [
    {
      slug: "basic",
      name: "Basic",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 1000 }]
    },
    {
      slug: "plus",
      name: "Plus",
      price: 900000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 5000 }]
    }
  ]
}

for (const database of databases()) {
  describe(`money in through the simulated provider on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      return { org, call, get }
    }

    /** What the customer's browser does on the hosted page. */
    const complete = async (checkoutUrl: string, query = "") => {
      const path = new URL(checkoutUrl).pathname
      const page = await server.fetch(path)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain("<form")
      const done = await server.fetch(path + query, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect(done.status).toBe(200)
      return done.text()
    }

    test("a paid plan waits in pending with a checkout; paying it activates the plan and saves the card", async () => {
      const { call, get } = await setup()
      const attached = await call("/v1/attach", { customer: "buyer", product: "basic" })
      expect(attached.status).toBe(200)
      expect(attached.body.subscription.status).toBe("pending")
      expect((await call("/v1/check", { customer: "buyer", feature: "tokens" })).body.code).toBe(
        "no_active_subscription"
      )
      expect(await complete(attached.body.checkoutUrl)).toContain("Payment complete")
      const subs = await get("/v1/subscriptions?customer=buyer")
      expect(subs.subscriptions[0]).toMatchObject({ plan: "basic", status: "active" })
      expect((await call("/v1/check", { customer: "buyer", feature: "tokens" })).body).toMatchObject({
        allowed: true,
        limit: 1000
      })
      const wallet = await get("/v1/wallet?customer=buyer")
      expect(wallet.paymentMethods).toMatchObject([
        { provider: "simulated", type: "card", last4: "4242", isDefault: true }
      ])
      expect(JSON.stringify(wallet)).not.toContain("sim_pm_")
      // With a saved card, a plan of the same group is a change of the subscription (decisions.md §14): the prorated
      // difference is charged at once (here, at the period's start, the whole difference).
      const upgraded = await call("/v1/attach", { customer: "buyer", product: "plus" })
      expect(upgraded.body).toMatchObject({
        checkoutUrl: null,
        subscription: { id: subs.subscriptions[0].id, plan: "plus", status: "active" },
        invoice: { status: "paid", total: 400000, amountPaid: 400000 }
      })
      const after = await get("/v1/subscriptions?customer=buyer")
      expect(after.subscriptions.map((s: any) => [s.plan, s.status])).toEqual([["plus", "active"]])
    })

    test("a declined checkout leaves the subscription pending; its checkout route answers the same page, then 409 once paid", async () => {
      const { call } = await setup()
      const attached = await call("/v1/attach", { customer: "buyer", product: "basic" })
      expect(await complete(attached.body.checkoutUrl, "?outcome=decline")).toContain("Declined")
      const id = attached.body.subscription.id
      const retry = await call(`/v1/subscriptions/${id}/checkout`, {})
      // One attempt in flight per subscription (decisions.md §7): the page is still payable, so it is the answer.
      expect(retry.body).toMatchObject({ success: true, activatedDirectly: false, code: "checkout_required" })
      expect(retry.body.checkoutUrl).toBe(attached.body.checkoutUrl)
      expect(retry.body.reference).toBeString()
      await complete(retry.body.checkoutUrl)
      expect((await call(`/v1/subscriptions/${id}/checkout`, {})).body).toMatchObject({
        code: "subscription_not_pending"
      })
    })

    test("ten concurrent completions of one checkout: the plan paid once, one saved card, one default", async () => {
      const { call, get, org } = await setup()
      const attached = await call("/v1/attach", { customer: "buyer", product: "basic" })
      const path = new URL(attached.body.checkoutUrl).pathname
      const completions = await Promise.all(
        Array.from({ length: 10 }, () =>
          server.fetch(path, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: "outcome=pay&card=ok"
          })
        )
      )
      expect(completions.every((r) => r.status === 200)).toBe(true)
      const wallet = await get("/v1/wallet?customer=buyer")
      expect(wallet.paymentMethods).toHaveLength(1)
      expect(wallet.paymentMethods[0].isDefault).toBe(true)
      const paid = await server.app.runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              n: number
            }>`SELECT COUNT(*) AS n FROM payments WHERE organization_id = ${org.id} AND status = 'succeeded'`
        )
      )
      expect(Number(paid[0]!.n)).toBe(1)
      expect((await get("/v1/subscriptions?customer=buyer")).subscriptions[0]).toMatchObject({ status: "active" })
    })

    test("credit packs: checkout adds the credits once; with a saved card they are added at once", async () => {
      const { call, org } = await setup()
      const bought = await call("/v1/addon", { customer: "buyer", pack: "small", quantity: 2 })
      expect(bought.body).toMatchObject({
        success: true,
        requiresCheckout: true,
        quantity: 2,
        credits: 200,
        balance: null
      })
      const path = new URL(bought.body.checkoutUrl).pathname
      await complete(bought.body.checkoutUrl)
      // The same page again does nothing more.
      const again = await server.fetch(path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay"
      })
      expect(await again.text()).toContain("Already completed")
      const check = await call("/v1/check", { customer: "buyer", feature: "images", value: 1 })
      expect(check.body).toMatchObject({ allowed: true, code: "addon_credits_used", credits: { addonBalance: 200 } })
      const instant = await call("/v1/addon", { customer: "buyer", pack: "small" })
      expect(instant.body).toMatchObject({ requiresCheckout: false, checkoutUrl: null, credits: 100, balance: 300 })
      // Paid amounts are recorded in minor units: 2 × 50000, then 50000.
      const amounts = await server.app.runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              amount: string
            }>`SELECT amount FROM payments WHERE organization_id = ${org.id} AND status = 'succeeded'
          ORDER BY created_at`
        )
      )
      expect(amounts.map((a) => Number(a.amount))).toEqual([100000, 50000])
      expect((await call("/v1/addon", { customer: "buyer", pack: "nope" })).body.code).toBe("pack_not_found")
      expect((await call("/v1/addon", { customer: "buyer", pack: "small", currency: "USD" })).status).toBe(400)
      expect((await call("/v1/addon", { customer: "buyer", pack: "small", quantity: 0 })).status).toBe(400)
    })

    test("wallet: a setup page saves a card; removing it works once", async () => {
      const { call, get } = await setup()
      const setupSession = await call("/v1/wallet/setup", { customer: "buyer" })
      expect(setupSession.status).toBe(200)
      expect(setupSession.body.url).toContain("/simulated/setup/")
      expect(await complete(setupSession.body.url)).toContain("Card saved")
      const [method] = (await get("/v1/wallet?customer=buyer")).paymentMethods
      expect(method).toMatchObject({ type: "card", isDefault: true })
      expect((await call("/v1/wallet/remove", { customer: "buyer", id: method.id })).body).toEqual({ success: true })
      expect((await get("/v1/wallet?customer=buyer")).paymentMethods).toEqual([])
      const again = await call("/v1/wallet/remove", { customer: "buyer", id: method.id })
      expect(again).toMatchObject({ status: 404, body: { code: "payment_method_not_found" } })
    })

    test("a saved card that is declined falls back to a checkout", async () => {
      const { call } = await setup()
      const setupSession = await call("/v1/wallet/setup", { customer: "buyer" })
      const path = new URL(setupSession.body.url).pathname
      await server.fetch(path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=declining"
      })
      const attached = await call("/v1/attach", { customer: "buyer", product: "basic" })
      expect(attached.body.subscription.status).toBe("pending")
      expect(attached.body.checkoutUrl).toContain("/simulated/checkout/")
      expect(attached.body.message).toContain("declined")
    })

    test("webhooks: signatures, routing, replays and unknown names", async () => {
      const { org, call } = await setup()
      const attached = await call("/v1/attach", { customer: "buyer", product: "basic" })
      const reference = new URL(attached.body.checkoutUrl).pathname.split("/").pop()!
      const account = await server.app.runtime.runPromise(
        Effect.map(ProviderAccounts, (a) => Option.getOrThrow(a.managed("simulated")))
      )
      const event = (id: string, metadata: Record<string, string>) =>
        JSON.stringify({
          id,
          type: "payment.succeeded",
          data: { reference, amount: 500000, currency: "NGN", metadata }
        })
      const deliver = (path: string, body: string, signature = sign(account.webhookSecret!, body)) =>
        server.fetch(path, {
          method: "POST",
          body,
          headers: { "content-type": "application/json", [SIGNATURE_HEADER]: signature }
        })

      const body = event("evt-1", { organization_id: org.id, reference })
      const forged = await deliver("/webhooks/sandbox/simulated", body, "0".repeat(64))
      expect(forged.status).toBe(401)
      expect(await forged.json()).toMatchObject({ success: false, code: "invalid_signature" })
      const first = await deliver("/webhooks/sandbox/simulated", body)
      expect(await first.json()).toEqual({ success: true, received: true, skipped: false })
      const replay = await deliver("/webhooks/sandbox/simulated", body)
      expect(await replay.json()).toEqual({ success: true, received: true, skipped: true })
      const orphan = await deliver("/webhooks/sandbox/simulated", event("evt-2", {}))
      expect(await orphan.json()).toEqual({ success: true, received: true, skipped: true })
      expect((await deliver("/webhooks/sandbox/nope", body)).status).toBe(404)
      expect(await (await deliver("/webhooks/no-such-org/simulated", body)).json()).toMatchObject({
        code: "organization_not_found"
      })
      // By slug on the organization's own route, verified with the same (managed) secret: a replay there too.
      const bySlug = await deliver(`/webhooks/${org.slug}/simulated`, body)
      expect(await bySlug.json()).toEqual({ success: true, received: true, skipped: true })
      const subs = (await (
        await server.fetch("/v1/subscriptions?customer=buyer", { apiKey: org.apiKey })
      ).json()) as any
      expect(subs.subscriptions[0].status).toBe("active")
    })
  })
}

describe("live deployments", () => {
  test("no simulated provider, no sandbox route, and paid plans need a configured provider", async () => {
    const server = await startServer({ dataDir: ":memory:", appEnv: "live" })
    try {
      const org = await server.createOrg()
      expect(org.apiKey).toStartWith("sk_live_")
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "buyer", product: "basic" })
      expect(attached).toMatchObject({ status: 422, body: { code: "provider_not_configured" } })
      const subs = (await (
        await server.fetch("/v1/subscriptions?customer=buyer", { apiKey: org.apiKey })
      ).json()) as any
      expect(subs.subscriptions).toEqual([])
      const sandbox = await server.fetch("/webhooks/sandbox/paystack", { method: "POST", body: "{}" })
      expect(sandbox.status).toBe(404)
      const hosted = await server.fetch("/simulated/checkout/x/y")
      expect(hosted.status).toBe(404)
    } finally {
      await server.close()
    }
  })
})
