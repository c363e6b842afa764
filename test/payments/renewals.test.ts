import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

const DAY = 86_400_000
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 300000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 100 }]
    }
  ]
}

for (const database of databases()) {
  describe(`renewals and collection on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))

    /** An organization whose customer subscribed to Pro and paid with a card that later `card` behaves as given. */
    const subscribed = async (card: "ok" | "declining") => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "sub", email: "sub@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "sub", product: "pro" })
      await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `outcome=pay&card=${card}`
      })
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const subscription = async () => (await get("/v1/subscriptions?customer=sub")).subscriptions[0]
      expect((await subscription()).status).toBe("active")
      return { org, get, subscription, call: (path: string, body: unknown) => post(server, org.apiKey, path, body) }
    }

    test("at period end a saved card is charged: a paid renewal invoice and the next period", async () => {
      const { get, subscription } = await subscribed("ok")
      const before = await subscription()
      clock.advance(32 * DAY)
      const report = await runDue()
      expect(report.renewed).toBeGreaterThanOrEqual(1)
      const after = await subscription()
      expect(after.status).toBe("active")
      expect(after.currentPeriodStart).toBe(before.currentPeriodEnd)
      const { invoices } = await get("/v1/billing/invoices?customer=sub")
      // Newest first: the renewal, then the first payment's own invoice (h18).
      expect(invoices).toHaveLength(2)
      expect(invoices[1]).toMatchObject({ status: "paid", total: 300000, amountPaid: 300000, amountDue: 0 })
      expect(invoices[0]).toMatchObject({
        status: "paid",
        total: 300000,
        amountDue: 0,
        lines: [{ feature: "pro", amount: 300000 }]
      })
      // Nothing is due again until the next period ends.
      expect((await runDue()).renewed).toBe(0)
    })

    test("a declined renewal is past due with access during the grace, then canceled", async () => {
      const { call, subscription } = await subscribed("declining")
      clock.advance(32 * DAY)
      await runDue()
      expect((await subscription()).status).toBe("past_due")
      const during = await call("/v1/check", { customer: "sub", feature: "tokens" })
      expect(during.body).toMatchObject({ allowed: true })
      expect(during.body.details.message).toContain("past due")
      clock.advance(8 * DAY)
      await runDue()
      expect((await subscription()).status).toBe("canceled")
      expect((await call("/v1/check", { customer: "sub", feature: "tokens" })).body.code).toBe("no_active_subscription")
    })

    test("paying the open renewal invoice: checkout fallback, then paid, idempotent", async () => {
      const { call, get, subscription } = await subscribed("declining")
      clock.advance(32 * DAY)
      await runDue()
      const [invoice] = (await get("/v1/billing/invoices?customer=sub")).invoices
      expect(invoice.status).toBe("open")
      const pay = await call(`/v1/billing/invoice/${invoice.id}/pay`, {})
      expect(pay.body).toMatchObject({
        success: true,
        paid: false,
        code: "checkout_required",
        invoice: { id: invoice.id, status: "open", total: 300000 }
      })
      await server.fetch(new URL(pay.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect((await subscription()).status).toBe("active")
      const again = await call(`/v1/billing/invoice/${invoice.id}/pay`, {})
      expect(again.body).toMatchObject({
        paid: true,
        code: "already_paid",
        invoice: { status: "paid", number: invoice.number }
      })
      expect((await call("/v1/billing/invoice/inv_nope/pay", {})).body.code).toBe("invoice_not_found")
    })

    test("cancel at period end takes effect at the end", async () => {
      const { call, subscription } = await subscribed("ok")
      const sub = await subscription()
      await call(`/v1/subscriptions/${sub.id}/cancel`, {})
      clock.advance(32 * DAY)
      await runDue()
      expect((await subscription()).status).toBe("canceled")
    })
  })
}
