import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Renewals } from "../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, SLOW_HOOK_MS, startServer, type TestServer } from "./support/harness.ts"

const DAY = 86_400_000
const catalog = {
  features: [{ slug: "calls", name: "Calls", type: "metered" }],
  plans: [
    { slug: "base", name: "Base", price: 10_000, currency: "NGN", interval: "monthly", planGroup: "base" },
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      planGroup: "payg",
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 7 }]
    }
  ],
  coupons: [{ slug: "half-once", name: "Half, once", percentOff: 50, duration: "once" }]
}

/**
 * decisions.md §15: a `once` discount takes one invoice, also when a renewal run and a usage invoice of the same
 * customer are finalized at the same moment. Before: both read one use left and both were discounted (PostgreSQL),
 * and the run's transaction (holding the invoice counter) and the request (holding the customer's discount row)
 * could wait on each other until PostgreSQL aborted one ("deadlock detected").
 */
for (const database of databases()) {
  describe(`a once discount under concurrent finalizations on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    }, SLOW_HOOK_MS)
    afterAll(() => server.close(), SLOW_HOOK_MS)

    test("renewals and usage invoices at once: each customer's discount on exactly one invoice, numbers consecutive", async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      const customers = Array.from({ length: 8 }, (_, i) => `c${i}`)
      for (const id of customers) {
        expect((await post(server, apiKey, "/v1/customers", { id, email: `${id}@example.com` })).status).toBe(200)
        const attached = await post(server, apiKey, "/v1/attach", { customer: id, product: "base" })
        await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        expect((await post(server, apiKey, `/v1/customers/${id}/discount`, { coupon: "half-once" })).status).toBe(200)
        expect((await post(server, apiKey, "/v1/track", { customer: id, feature: "calls", value: 1000 })).status).toBe(
          200
        )
      }
      // Each first payment is an invoice (h18), made before the race; only the race's invoices are judged below.
      const list = async (id: string) =>
        (await (await server.fetch(`/v1/billing/invoices?customer=${id}`, { apiKey })).json()) as any
      const firstPayments = new Set<string>()
      for (const id of customers) for (const i of (await list(id)).invoices) firstPayments.add(i.id)
      clock.advance(32 * DAY)
      const [report, ...generated] = await Promise.all([
        server.run(Effect.flatMap(Renewals, (r) => r.runDue)),
        ...customers.map((id) => post(server, apiKey, "/v1/billing/invoice", { customer: id }))
      ])
      // The run renews every due subscription of the database (other suites' too, on a shared PostgreSQL).
      expect(report.renewed).toBeGreaterThanOrEqual(customers.length)
      expect(generated.map((g) => g.status)).toEqual(customers.map(() => 200))
      const numbers: Array<string> = []
      for (const id of customers) {
        const all: Array<any> = (await list(id)).invoices
        numbers.push(...all.map((i) => i.number))
        const invoices = all.filter((i) => !firstPayments.has(i.id))
        expect({ id, discounts: invoices.map((i) => i.discount).sort((a, b) => a - b) }).toEqual({
          id,
          discounts: [0, invoices.find((i) => i.discount > 0)?.subtotal / 2]
        })
      }
      expect(numbers.sort()).toEqual(
        customers
          .flatMap((_, i) => [3 * i + 1, 3 * i + 2, 3 * i + 3])
          .map((n) => `INV-${String(n).padStart(6, "0")}`)
          .sort()
      )
    }, 60_000)
  })
}
