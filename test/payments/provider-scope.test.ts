import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * An event settles only payments of the provider it came from (issue 37 item 8): an organization's own Paystack
 * account can sign any body, but a payment made through the simulated provider is not Paystack's to refund, dispute
 * or complete. The events are signed with Paystack's real algorithm by the fake, and delivered over HTTP.
 */
const catalog = {
  features: [{ slug: "images", name: "Images", type: "metered" }],
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
      provider: "simulated",
      features: [{ slug: "images", limit: 10 }]
    }
  ]
}

for (const db of databases()) {
  describe(`provider events stay with their provider's payments (${db.name})`, () => {
    let server: TestServer
    let paystack: FakePaystack

    beforeAll(async () => {
      server = await startServer(db.config)
      paystack = startFakePaystack({ secretKey: `sk_test_scope_${db.name}` })
    })
    afterAll(async () => {
      await paystack.stop()
      await server.close()
    })

    /** What the customer's browser does on the simulated hosted page. */
    const payOnPage = async (checkoutUrl: string) => {
      const done = await server.fetch(new URL(checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect(done.status).toBe(200)
    }

    const payments = (orgId: string) =>
      server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ reference: string; provider: string; amountRefunded: string; disputed: number | boolean }>`
            SELECT reference, provider, amount_refunded, disputed FROM payments
            WHERE organization_id = ${orgId} ORDER BY created_at, id`
        )
      )

    const deliver = async (orgSlug: string, hook: { body: string; headers: Readonly<Record<string, string>> }) => {
      const response = await server.fetch(`/webhooks/${orgSlug}/paystack`, {
        method: "POST",
        body: hook.body,
        headers: hook.headers
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { skipped: boolean }
    }

    const events = (orgId: string, type: string) =>
      server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql`SELECT id FROM outbound_events WHERE organization_id = ${orgId} AND type = ${type}`
        )
      )

    test("a refund and a dispute signed by the organization's own Paystack account leave a simulated payment alone", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const bought = await post(server, org.apiKey, "/v1/addon", { customer: "buyer", pack: "small" })
      expect(bought.status).toBe(200)
      await payOnPage(bought.body.checkoutUrl)
      const [paid] = await payments(org.id)
      expect(paid).toMatchObject({ provider: "simulated", amountRefunded: "0" })
      const balance = async () =>
        (await post(server, org.apiKey, "/v1/check", { customer: "buyer", feature: "images" })).body.credits
      const before = await balance()
      expect(before.addonBalance).toBe(100)

      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      const refund = paystack.webhook("refund.processed", {
        status: "processed",
        transaction_reference: paid!.reference,
        refund_reference: `rf-${crypto.randomUUID()}`,
        amount: "50000",
        currency: "NGN",
        customer: { email: "buyer@example.com" },
        domain: "test"
      })
      expect(await deliver(org.slug, refund)).toMatchObject({ skipped: true })
      const dispute = paystack.webhook("charge.dispute.create", {
        id: 9_001,
        refund_amount: 50000,
        currency: "NGN",
        status: "awaiting-merchant-feedback",
        resolution: null,
        domain: "test",
        transaction: {
          id: 9_002,
          reference: paid!.reference,
          amount: 50000,
          currency: "NGN",
          status: "success",
          metadata: { organization_id: org.id }
        },
        category: "chargeback",
        customer: { email: "buyer@example.com" }
      })
      expect(await deliver(org.slug, dispute)).toMatchObject({ skipped: true })

      const [after] = await payments(org.id)
      expect(after).toMatchObject({ amountRefunded: "0" })
      expect(Boolean(Number(after!.disputed))).toBe(false)
      expect((await balance()).addonBalance).toBe(100)
      expect(await events(org.id, "payment.refunded")).toHaveLength(0)
      expect(await events(org.id, "payment.disputed")).toHaveLength(0)
    })

    test("a charge.success signed by the organization's own Paystack account does not pay a simulated checkout", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "buyer", product: "basic" })
      expect(attached.body.subscription.status).toBe("pending")
      const checkout = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ reference: string; provider: string }>`SELECT reference, provider FROM checkouts
            WHERE organization_id = ${org.id} AND target_id = ${attached.body.subscription.id}`
        )
      )
      expect(checkout).toHaveLength(1)
      expect(checkout[0]!.provider).toBe("simulated")
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      const success = paystack.webhook("charge.success", {
        id: 9_003,
        reference: checkout[0]!.reference,
        amount: 500000,
        currency: "NGN",
        status: "success",
        metadata: { organization_id: org.id },
        customer: { email: "buyer@example.com" }
      })
      expect(await deliver(org.slug, success)).toMatchObject({ skipped: true })
      const subs = (await (
        await server.fetch("/v1/subscriptions?customer=buyer", { apiKey: org.apiKey })
      ).json()) as any
      expect(subs.subscriptions.map((s: { status: string }) => s.status)).toEqual(["pending"])
    })
  })
}
