import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * Money leaves the service exact or not at all (issue 37 item 5): a line or an invoice total past
 * Number.MAX_SAFE_INTEGER minor units is refused with 422 `amount_too_large` where it would be shown or billed (the
 * unbilled view, invoice generation), naming its exact amount; nothing is invoiced. At the bound exactly, every place
 * money leaves (the view, the invoice, its event, the pay request's checkout) carries it to the last unit.
 */
const BOUND = 9_007_199_254_740_991
// 9007199254740991 = 6361 × 69431 × 20394401: a price and a usage whose product is exactly the bound.
const PRICE_AT_BOUND = 6361 * 69431
const UNITS_AT_BOUND = 20394401

const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "calls", name: "Calls", type: "metered" },
    { slug: "tiered", name: "Tiered", type: "metered" },
    { slug: "seconds", name: "Seconds", type: "metered" }
  ],
  plans: [
    {
      slug: "metered",
      name: "Metered",
      currency: "NGN",
      features: [
        { slug: "tokens", usageModel: "usage_based", pricePerUnit: 987654321987 },
        { slug: "calls", usageModel: "usage_based", pricePerUnit: PRICE_AT_BOUND },
        { slug: "seconds", limit: 100, overage: "charge", overagePrice: 1_000_000_000_000 },
        {
          slug: "tiered",
          usageModel: "usage_based",
          ratingModel: "graduated",
          tiers: [
            { upTo: 10, unitPrice: 1 },
            { upTo: null, unitPrice: 987654321987 }
          ]
        }
      ]
    }
  ]
}

for (const database of databases()) {
  describe(`money past what JSON carries exactly (${database.name})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      return { status: response.status, body: (await response.json()) as any }
    }

    const customerOn = async (ref: string) => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      expect((await post(server, org.apiKey, "/v1/customers", { id: ref, email: `${ref}@example.com` })).status).toBe(
        200
      )
      expect((await post(server, org.apiKey, "/v1/attach", { customer: ref, product: "metered" })).status).toBe(200)
      return org
    }

    const track = async (apiKey: string, customer: string, feature: string, value: number) => {
      const tracked = await post(server, apiKey, "/v1/track", { customer, feature, value })
      expect(tracked.status).toBe(200)
      expect(tracked.body.allowed).toBe(true)
    }

    const invoicedEvents = (orgId: string) =>
      server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql`SELECT id FROM usage_events WHERE organization_id = ${orgId} AND invoice_id IS NOT NULL`
        )
      )

    test("the issue's reproduction: 8657216995426363459413 minor units is refused at the view and at generation, exactly named", async () => {
      const org = await customerOn("big")
      await track(org.apiKey, "big", "tokens", 8765432197.5)
      await track(org.apiKey, "big", "tokens", 1)
      const exact = "8657216995426363459413"

      const view = await get(org.apiKey, "/v1/billing/usage?customer=big")
      expect(view.status).toBe(422)
      expect(view.body).toMatchObject({ success: false, code: "amount_too_large" })
      expect(view.body.message).toContain(exact)
      expect(view.body.message).toContain(String(BOUND))
      // Without a customer too: the organization's view names the customer.
      const all = await get(org.apiKey, "/v1/billing/usage")
      expect(all.status).toBe(422)
      expect(all.body.message).toContain(exact)

      const generated = await post(server, org.apiKey, "/v1/billing/invoice", { customer: "big" })
      expect(generated.status).toBe(422)
      expect(generated.body).toMatchObject({ code: "amount_too_large" })
      expect(generated.body.message).toContain(exact)
      // Nothing was invoiced: no invoice, no event moved, and asking again says the same.
      expect((await get(org.apiKey, "/v1/billing/invoices?customer=big")).body.invoices).toEqual([])
      expect(await invoicedEvents(org.id)).toHaveLength(0)
      expect((await post(server, org.apiKey, "/v1/billing/invoice", { customer: "big" })).status).toBe(422)
    })

    test("tiered pricing: a track whose answer would show the window's amount past the bound is refused, nothing recorded", async () => {
      const org = await customerOn("tiers")
      // 10 × 1 + 9119 × 987654321987 = 9006419762199463: within the bound, shown exactly.
      const within = await post(server, org.apiKey, "/v1/track", { customer: "tiers", feature: "tiered", value: 9129 })
      expect(within.status).toBe(200)
      expect(within.body.details.tierBreakdown.map((t: { amount: number }) => t.amount)).toEqual([10, 9006419762199453])
      // One more unit would be 9007407416521450.
      const past = await post(server, org.apiKey, "/v1/track", { customer: "tiers", feature: "tiered", value: 1 })
      expect(past.status).toBe(400)
      expect(past.body).toMatchObject({ code: "invalid_request", details: [{ path: "value" }] })
      expect(past.body.message).toContain("9007407416521450")
      expect(past.body.message).toContain(String(BOUND))
      const check = await post(server, org.apiKey, "/v1/check", { customer: "tiers", feature: "tiered", value: 1 })
      expect(check.status).toBe(400)
      const batch = await post(server, org.apiKey, "/v1/track/batch", {
        events: [{ customer: "tiers", feature: "tiered", value: 1 }]
      })
      expect(JSON.stringify(batch.body)).toContain("9007407416521450")
      const still = await post(server, org.apiKey, "/v1/check", { customer: "tiers", feature: "tiered", value: 0 })
      expect(still.status).toBe(200)
      expect(still.body.usage).toBe(9129)
    })

    test("a month's overage spend past the bound is refused: overage.spend_cap_reached carries it exactly or not at all", async () => {
      const org = await customerOn("spender")
      const limit = await post(server, org.apiKey, "/v1/customers/overage-limit", {
        customer: "spender",
        maxOverageAmount: 1_000_000_000_000,
        onLimitReached: "notify"
      })
      expect(limit.status).toBe(200)
      const track = (value: number) =>
        post(server, org.apiKey, "/v1/track", { customer: "spender", feature: "seconds", value })
      // 100 included, then 9,000 units of overage at 10^12: 9e15, past the cap (notify) and within the bound.
      expect((await track(9100)).body).toMatchObject({ allowed: true, code: "tracked_overage" })
      // 8 more would make the month's spend 9008000000000000.
      const past = await track(8)
      expect(past.status).toBe(400)
      expect(past.body.message).toContain("9008000000000000")
      const events = (await get(org.apiKey, "/v1/events?type=overage.spend_cap_reached")).body.data
      expect(events.map((e: { data: { spent: number } }) => e.data.spent)).toEqual([9_000_000_000_000_000])
      expect(
        (await post(server, org.apiKey, "/v1/check", { customer: "spender", feature: "seconds" })).body.usage
      ).toBe(9100)
    })

    test("one unit past the bound is refused; at the bound every place money leaves carries it exactly", async () => {
      const over = await customerOn("over")
      await track(over.apiKey, "over", "calls", UNITS_AT_BOUND + 1)
      const refused = await post(server, over.apiKey, "/v1/billing/invoice", { customer: "over" })
      expect(refused.status).toBe(422)
      expect(refused.body.message).toContain(String(BigInt(BOUND) + BigInt(PRICE_AT_BOUND)))

      const org = await customerOn("edge")
      await track(org.apiKey, "edge", "calls", UNITS_AT_BOUND)
      const view = await get(org.apiKey, "/v1/billing/usage?customer=edge")
      expect(view.status).toBe(200)
      expect(view.body.customers[0].total).toBe(BOUND)
      expect(view.body.customers[0].lines[0].amount).toBe(BOUND)

      const generated = await post(server, org.apiKey, "/v1/billing/invoice", { customer: "edge" })
      expect(generated.status).toBe(200)
      expect(generated.body.invoice).toMatchObject({ total: BOUND, subtotal: BOUND, amountDue: BOUND })
      expect(generated.body.invoice.lines[0].amount).toBe(BOUND)
      const id = generated.body.invoice.id as string

      // The outbound event carries the same number.
      const events = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ data: string }>`SELECT data FROM outbound_events
            WHERE organization_id = ${org.id} AND type = 'invoice.created'`
        )
      )
      expect(events).toHaveLength(1)
      const data = typeof events[0]!.data === "string" ? JSON.parse(events[0]!.data) : events[0]!.data
      expect(JSON.stringify(data)).toContain(`"total":${BOUND}`)

      // Pay: no saved method, so the simulated provider's checkout is opened for exactly the amount due.
      const paid = await post(server, org.apiKey, `/v1/billing/invoice/${id}/pay`, {})
      expect(paid.status).toBe(200)
      expect(paid.body).toMatchObject({ paid: false, invoice: { total: BOUND } })
      const checkouts = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              amount: string
            }>`SELECT amount FROM checkouts WHERE organization_id = ${org.id} AND target_id = ${id}`
        )
      )
      expect(checkouts.map((c) => c.amount)).toEqual([String(BOUND)])
    })
  })
}
