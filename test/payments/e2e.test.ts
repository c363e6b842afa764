import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { SIGNATURE_HEADER, sign } from "../../src/payments/simulated/SimulatedAdapter.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

const catalog = {
  features: [
    { slug: "api-calls", name: "API calls", type: "metered", unit: "calls" },
    { slug: "images", name: "Images", type: "metered" }
  ],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "images", creditCost: 2 }] }],
  creditPacks: [
    { slug: "starter", name: "Starter credits", credits: 100, price: 20000, currency: "NGN", creditSystem: "credits" }
  ],
  plans: [
    {
      slug: "growth",
      name: "Growth",
      price: 1500000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "api-calls", limit: 1000, overage: "charge", overagePrice: 5 }]
    }
  ]
}

for (const database of databases()) {
  describe(`the whole money path on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    /** The simulated provider's signed `payment.succeeded` for a checkout, as its hosted page would send it. */
    const paymentEvent = async (orgId: string, checkoutUrl: string, amount: number) => {
      const reference = new URL(checkoutUrl).pathname.split("/").pop()!
      const account = await server.run(Effect.map(ProviderAccounts, (a) => Option.getOrThrow(a.managed("simulated"))))
      const body = JSON.stringify({
        id: `evt_${crypto.randomUUID()}`,
        type: "payment.succeeded",
        data: {
          reference,
          amount,
          currency: "NGN",
          metadata: { organization_id: orgId, reference },
          method: {
            token: "sim_pm_ok_e2e",
            providerCustomerId: null,
            email: null,
            type: "card",
            brand: "visa",
            last4: "4242",
            expMonth: 12,
            expYear: 2030,
            reusable: true,
            fingerprint: "sim_fp_e2e"
          }
        }
      })
      return {
        body,
        headers: { "content-type": "application/json", [SIGNATURE_HEADER]: sign(account.webhookSecret!, body) }
      }
    }

    test("paid plan → checkout → webhook ×5 → active → overage → invoice → paid with the saved card", async () => {
      const org = await server.createOrg()
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      await syncCatalog(server, org.apiKey, catalog)
      await call("/v1/customers", { id: "acme-user", email: "user@acme.example" })

      const attached = await call("/v1/attach", { customer: "acme-user", product: "growth" })
      expect(attached.body.subscription.status).toBe("pending")
      const page = await server.fetch(new URL(attached.body.checkoutUrl).pathname)
      expect(await page.text()).toContain("NGN 15,000.00")

      const event = await paymentEvent(org.id, attached.body.checkoutUrl, 1500000)
      const acks = []
      for (let i = 0; i < 5; i++) {
        const response = await server.fetch("/webhooks/sandbox/simulated", {
          method: "POST",
          body: event.body,
          headers: event.headers
        })
        acks.push(await response.json())
      }
      expect(acks[0]).toEqual({ success: true, received: true, skipped: false })
      for (const later of acks.slice(1)) expect(later).toEqual({ success: true, received: true, skipped: true })
      const counts = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ payments: number; methods: number }>`SELECT
          (SELECT COUNT(*) FROM payments WHERE organization_id = ${org.id} AND status = 'succeeded') AS payments,
          (SELECT COUNT(*) FROM payment_methods WHERE organization_id = ${org.id}) AS methods`
        )
      )
      expect(counts.map((c) => [Number(c.payments), Number(c.methods)])).toEqual([[1, 1]])
      expect((await get("/v1/subscriptions?customer=acme-user")).subscriptions[0].status).toBe("active")

      // 1,000 included, then 40 calls of overage at 5 kobo each.
      expect((await call("/v1/track", { customer: "acme-user", feature: "api-calls", value: 1000 })).body.code).toBe(
        "tracked"
      )
      const over = await call("/v1/track", { customer: "acme-user", feature: "api-calls", value: 40 })
      expect(over.body).toMatchObject({ allowed: true, code: "tracked_overage", usage: 1040, balance: -40 })

      const unbilled = await get("/v1/billing/usage?customer=acme-user")
      expect(unbilled.customers[0]).toMatchObject({ currency: "NGN", total: 200 })
      const generated = await call("/v1/billing/invoice", { customer: "acme-user" })
      expect(generated.body.invoice).toMatchObject({
        status: "open",
        currency: "NGN",
        total: 200,
        amountDue: 200,
        lines: [{ feature: "api-calls", quantity: 40, unitPrice: 5, amount: 200 }]
      })
      const paid = await call(`/v1/billing/invoice/${generated.body.invoice.id}/pay`, {})
      expect(paid.body).toMatchObject({
        success: true,
        paid: true,
        checkoutUrl: null,
        code: "invoice_paid",
        invoice: { status: "paid", total: 200 }
      })
      const [invoice] = (await get("/v1/billing/invoices?customer=acme-user")).invoices
      expect(invoice).toMatchObject({ status: "paid", amountPaid: 200, amountDue: 0 })
      expect(invoice.paidAt).toBeString()
      expect((await call("/v1/billing/invoice", { customer: "acme-user" })).body.code).toBe("nothing_to_invoice")
    })

    test("a credit-pack payment confirmed by a webhook delivered twice grants its credits once", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const bought = await post(server, org.apiKey, "/v1/addon", { customer: "buyer", pack: "starter" })
      expect(bought.body.requiresCheckout).toBe(true)
      const event = await paymentEvent(org.id, bought.body.checkoutUrl, 20000)
      for (let i = 0; i < 2; i++) {
        await server.fetch("/webhooks/sandbox/simulated", { method: "POST", body: event.body, headers: event.headers })
      }
      // A different event for the same payment (a provider's second notification) changes nothing either.
      const other = await paymentEvent(org.id, bought.body.checkoutUrl, 20000)
      const third = await server.fetch("/webhooks/sandbox/simulated", {
        method: "POST",
        body: other.body,
        headers: other.headers
      })
      expect(await third.json()).toMatchObject({ received: true, skipped: true })
      const check = await post(server, org.apiKey, "/v1/check", { customer: "buyer", feature: "images", value: 0 })
      expect(check.body.credits).toMatchObject({ addonBalance: 100, totalBalance: 100 })
    })

    test("two invoice generations racing for one customer make one invoice with the usage", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        ...catalog,
        plans: [
          {
            slug: "free-metered",
            name: "Free",
            currency: "NGN",
            autoEnable: true,
            features: [{ slug: "api-calls", limit: 0, overage: "charge", overagePrice: 3 }]
          }
        ]
      })
      await post(server, org.apiKey, "/v1/customers", { id: "racer", email: "racer@example.com" })
      for (let i = 0; i < 5; i++)
        await post(server, org.apiKey, "/v1/track", { customer: "racer", feature: "api-calls", value: 2 })
      const [a, b] = await Promise.all([
        post(server, org.apiKey, "/v1/billing/invoice", { customer: "racer" }),
        post(server, org.apiKey, "/v1/billing/invoice", { customer: "racer" })
      ])
      expect([a.status, b.status].sort()).toEqual([200, 409])
      const winner = a.status === 200 ? a : b
      expect(winner.body.invoice).toMatchObject({ total: 30, lines: [{ quantity: 10 }] })
      expect((a.status === 409 ? a : b).body.code).toBe("nothing_to_invoice")
      const invoices = (
        (await (await server.fetch("/v1/billing/invoices?customer=racer", { apiKey: org.apiKey })).json()) as any
      ).invoices
      expect(invoices).toHaveLength(1)
    })
  })
}
