import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Either } from "effect"
import { Invoices } from "../src/billing/Invoices.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * Free plans can still price usage: overage at `overagePrice`, usage-based packages and tiers. Every plan names its
 * currency, which is the currency of the invoices for the usage it prices.
 */
const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "calls", name: "API calls", type: "metered" },
    { slug: "images", name: "Images", type: "metered" },
    { slug: "units", name: "Units", type: "metered" },
    { slug: "pings", name: "Pings", type: "metered" },
    { slug: "exports", name: "Exports", type: "metered" }
  ],
  creditSystems: [{ slug: "ai-credits", name: "AI credits", features: [{ feature: "images", creditCost: 5 }] }],
  plans: [
    {
      slug: "free",
      name: "Free",
      currency: "NGN",
      features: [
        // 10 included, then 25 per package of 10 tokens.
        { slug: "tokens", limit: 10, overage: "charge", overagePrice: 25, billingUnits: 10 },
        // Every call billed: 10 × 1, then 0.5 each plus a flat 100.
        {
          slug: "calls",
          usageModel: "usage_based",
          ratingModel: "graduated",
          tiers: [
            { upTo: 10, unitPrice: 1 },
            { upTo: null, unitPrice: 0.5, flatFee: 100 }
          ]
        },
        // Credits at a fractional price: 0.25 per credit, an image costs 5 credits.
        { slug: "ai-credits", usageModel: "usage_based", pricePerUnit: 0.25 },
        { slug: "units", usageModel: "usage_based", pricePerUnit: 3 },
        { slug: "pings", usageModel: "usage_based", pricePerUnit: 0 }
      ]
    },
    {
      slug: "usd-exports",
      name: "Exports (USD)",
      currency: "usd",
      planGroup: "exports",
      features: [{ slug: "exports", usageModel: "usage_based", pricePerUnit: 1.5 }]
    }
  ]
}

for (const database of databases()) {
  describe(`invoices on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      return { status: response.status, body: (await response.json()) as any }
    }

    const setup = async (catalogJson: Record<string, unknown> = catalog) => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalogJson)
      const customer = async (ref: string, plans: ReadonlyArray<string> = ["free"]) => {
        const created = await post(server, apiKey, "/v1/customers", { id: ref, email: `${ref}@example.com` })
        expect(created.status).toBe(200)
        for (const plan of plans) {
          const attached = await post(server, apiKey, "/v1/attach", { customer: ref, product: plan })
          expect(attached.status).toBe(200)
        }
        return created.body.id as string
      }
      /** Each event a second after the last, so spans and "newest first" are unambiguous. */
      const track = async (customer: string, feature: string, value: number) => {
        clock.advance(1_000)
        const tracked = await post(server, apiKey, "/v1/track", { customer, feature, value })
        expect(tracked.body).toMatchObject({ allowed: true })
        return tracked.body
      }
      const generate = (customer: string) => post(server, apiKey, "/v1/billing/invoice", { customer })
      return { apiKey, customer, track, generate }
    }

    const query = <A extends object>(text: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
      server.app.runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.orDie(text(sql))))

    const eventsOf = (customerId: string) =>
      query(
        (sql) =>
          sql<{
            id: string
            billable: number
            invoiceId: string | null
          }>`SELECT id, billable, invoice_id FROM usage_events
          WHERE customer_id = ${customerId} ORDER BY id`
      )

    test("generate: exact lines and amounts, the events billed once, then the next invoice number", async () => {
      const { apiKey, customer, track, generate } = await setup()
      const cust = await customer("cust")
      await track("cust", "tokens", 8) // included
      await track("cust", "tokens", 7) // 2 included, 5 over
      await track("cust", "calls", 6)
      await track("cust", "images", 3) // 15 credits
      await track("cust", "calls", 8)
      await track("cust", "tokens", 9) // 9 over: 14 over in all

      const expectedLines = [
        // 15 credits × 0.25 = 3.75 → 4
        {
          feature: "ai-credits",
          description: "AI credits usage (Free)",
          quantity: 15,
          unitPrice: 0.25,
          amount: 4,
          tierBreakdown: []
        },
        // 14 calls: 10 × 1 + (4 × 0.5 + 100)
        {
          feature: "calls",
          description: "API calls usage (Free)",
          quantity: 14,
          unitPrice: 8,
          amount: 112,
          tierBreakdown: [
            { tier: 0, units: 10, unitPrice: 1, flatFee: 0, amount: 10 },
            { tier: 1, units: 4, unitPrice: 0.5, flatFee: 100, amount: 102 }
          ]
        },
        // 14 tokens over: 2 packages of 10 at 25
        {
          feature: "tokens",
          description: "Tokens overage (Free)",
          quantity: 14,
          unitPrice: 2.5,
          amount: 50,
          tierBreakdown: []
        }
      ]

      // Before invoicing: the same computation, writing nothing.
      const unbilled = await get(apiKey, "/v1/billing/usage?customer=cust")
      expect(unbilled).toEqual({
        status: 200,
        body: {
          success: true,
          customers: [
            {
              customerId: cust,
              currency: "NGN",
              lines: [
                { feature: "ai-credits", usage: 15, included: 0, billableUnits: 15, amount: 4, tierBreakdown: [] },
                {
                  feature: "calls",
                  usage: 14,
                  included: 0,
                  billableUnits: 14,
                  amount: 112,
                  tierBreakdown: expectedLines[1]!.tierBreakdown
                },
                // The overage events' span holds 7 + 9 tokens, 2 of them within the plan.
                { feature: "tokens", usage: 16, included: 2, billableUnits: 14, amount: 50, tierBreakdown: [] }
              ],
              total: 166
            }
          ]
        }
      })

      clock.advance(1_000)
      const first = await generate("cust")
      expect(first.status).toBe(200)
      const invoice = first.body.invoice
      expect(first.body).toEqual({ success: true, invoice, invoices: [invoice] })
      expect(invoice).toEqual({
        id: expect.stringMatching(/^inv_/),
        number: "INV-000001",
        customerId: cust,
        currency: "NGN",
        status: "open",
        lines: expectedLines.map((line) => ({
          ...line,
          periodStart: expect.stringMatching(/Z$/),
          periodEnd: expect.stringMatching(/Z$/),
          discounts: [],
          taxes: []
        })),
        subtotal: 166,
        discount: 0,
        tax: 0,
        total: 166,
        hostedUrl: expect.stringMatching(/^http:\/\/localhost\/i\//),
        amountPaid: 0,
        creditApplied: 0,
        amountDue: 166,
        amountRefunded: 0,
        createdAt: expect.any(Number),
        paidAt: null
      })
      // A line's period is the span of its events.
      const tokensLine = invoice.lines[2]
      const span = Date.parse(tokensLine.periodEnd) - Date.parse(tokensLine.periodStart)
      expect(span).toBeGreaterThanOrEqual(4_000) // four tracks apart (the clock keeps running)
      expect(span).toBeLessThan(5_000)

      // Exactly the billable events are on the invoice; the included one is not.
      const events = await eventsOf(cust)
      expect(events.map((e) => [Number(e.billable) > 0, e.invoiceId])).toEqual([
        [false, null],
        [true, invoice.id],
        [true, invoice.id],
        [true, invoice.id],
        [true, invoice.id],
        [true, invoice.id]
      ])

      // Nothing is left: a second generate is a 409 and unbilled usage is empty.
      const again = await generate("cust")
      expect(again).toMatchObject({ status: 409, body: { success: false, code: "nothing_to_invoice" } })
      expect((await get(apiKey, "/v1/billing/usage?customer=cust")).body).toEqual({ success: true, customers: [] })

      // New usage: a second invoice with the next number.
      await track("cust", "calls", 2)
      clock.advance(1_000)
      const second = await generate("cust")
      expect(second.status).toBe(200)
      expect(second.body.invoice).toMatchObject({
        number: "INV-000002",
        total: 2,
        lines: [{ feature: "calls", quantity: 2, amount: 2 }]
      })

      const listed = await get(apiKey, "/v1/billing/invoices?customer=cust")
      expect(listed.status).toBe(200)
      expect(listed.body.invoices.map((i: any) => i.number)).toEqual(["INV-000002", "INV-000001"])
      expect(listed.body.invoices[1]).toEqual(invoice)
    })

    test("two currencies: one invoice per currency", async () => {
      const { customer, track, generate } = await setup()
      await customer("multi", ["free", "usd-exports"])
      await track("multi", "calls", 1)
      await track("multi", "exports", 3) // 3 × 1.5 = 4.5 → 5
      const generated = await generate("multi")
      expect(generated.status).toBe(200)
      const invoices = generated.body.invoices
      expect(invoices.map((i: any) => [i.number, i.currency, i.total, i.lines.map((l: any) => l.feature)])).toEqual([
        ["INV-000001", "NGN", 1, ["calls"]],
        ["INV-000002", "USD", 5, ["exports"]]
      ])
      expect(generated.body.invoice).toEqual(invoices[0])
      expect(invoices[1].lines[0]).toMatchObject({ quantity: 3, unitPrice: 1.5, amount: 5 })
    })

    test("unbilled usage of every customer; list by customer; unknown customers are 404", async () => {
      const { apiKey, customer, track, generate } = await setup()
      const a = await customer("a")
      const b = await customer("b")
      await customer("idle")
      await track("a", "units", 2)
      await track("b", "units", 5)
      await track("b", "pings", 1)

      const all = await get(apiKey, "/v1/billing/usage")
      expect(all.status).toBe(200)
      expect(
        all.body.customers.map((c: any) => [c.customerId, c.currency, c.total, c.lines.map((l: any) => l.feature)])
      ).toEqual(
        [
          [a, "NGN", 6, ["units"]],
          [b, "NGN", 15, ["pings", "units"]]
        ].sort((x, y) => (x[0]! < y[0]! ? -1 : 1))
      )
      expect((await get(apiKey, "/v1/billing/usage?customer=idle")).body).toEqual({ success: true, customers: [] })

      expect((await generate("a")).status).toBe(200)
      expect((await generate("b")).status).toBe(200)
      expect((await generate("idle")).body.code).toBe("nothing_to_invoice")

      const listAll = await get(apiKey, "/v1/billing/invoices")
      expect(listAll.body.invoices.map((i: any) => [i.number, i.customerId])).toEqual([
        ["INV-000002", b],
        ["INV-000001", a]
      ])
      const listA = await get(apiKey, `/v1/billing/invoices?customer=${a}`)
      expect(listA.body.invoices.map((i: any) => i.number)).toEqual(["INV-000001"])
      expect((await get(apiKey, "/v1/billing/invoices?customer=idle")).body).toEqual({ success: true, invoices: [] })

      for (const path of ["/v1/billing/invoices?customer=nobody", "/v1/billing/usage?customer=nobody"]) {
        expect(await get(apiKey, path)).toMatchObject({ status: 404, body: { code: "customer_not_found" } })
      }
      expect(await generate("nobody")).toMatchObject({ status: 404, body: { code: "customer_not_found" } })
    })

    test("another organization cannot see or generate the invoices", async () => {
      const first = await setup()
      const cust = await first.customer("shared-name")
      await first.track("shared-name", "units", 1)
      expect((await first.generate("shared-name")).status).toBe(200)

      const other = await setup()
      expect((await get(other.apiKey, "/v1/billing/invoices")).body).toEqual({ success: true, invoices: [] })
      expect((await get(other.apiKey, "/v1/billing/usage")).body).toEqual({ success: true, customers: [] })
      // The first organization's customer id names no one here.
      expect(await get(other.apiKey, `/v1/billing/invoices?customer=${cust}`)).toMatchObject({ status: 404 })
      expect(await other.generate(cust)).toMatchObject({ status: 404, body: { code: "customer_not_found" } })
      // Its own numbering starts at 1 and its own customer of the same name has its own invoices.
      await other.customer("shared-name")
      await other.track("shared-name", "units", 1)
      expect((await other.generate("shared-name")).body.invoice.number).toBe("INV-000001")
      expect((await get(first.apiKey, "/v1/billing/invoices")).body.invoices).toHaveLength(1)
    })

    test("an invoice with nothing to collect is paid at once", async () => {
      const { customer, track, generate } = await setup()
      await customer("zero")
      await track("zero", "pings", 4)
      const generated = await generate("zero")
      expect(generated.body.invoice).toMatchObject({
        status: "paid",
        total: 0,
        amountDue: 0,
        paidAt: expect.stringMatching(/Z$/)
      })
    })

    test("a plan that prices usage without a currency: a sync warning, invoiced in NGN", async () => {
      const noCurrency = {
        features: [{ slug: "units", name: "Units", type: "metered" }],
        plans: [
          { slug: "free", name: "Free", features: [{ slug: "units", usageModel: "usage_based", pricePerUnit: 2 }] }
        ]
      }
      const { apiKey } = await server.createOrg()
      const synced = (await syncCatalog(server, apiKey, noCurrency)) as { warnings: Array<string> }
      expect(synced.warnings).toEqual([expect.stringContaining("plan 'free' prices usage but names no currency")])
      await post(server, apiKey, "/v1/customers", { id: "c", email: "c@example.com" })
      expect((await post(server, apiKey, "/v1/attach", { customer: "c", product: "free" })).status).toBe(200)
      await post(server, apiKey, "/v1/track", { customer: "c", feature: "units", value: 2 })
      const generated = await post(server, apiKey, "/v1/billing/invoice", { customer: "c" })
      expect(generated.body.invoice).toMatchObject({ currency: "NGN", total: 4 })
    })

    test("concurrent generates never bill an event twice", async () => {
      const { apiKey, customer, track } = await setup()
      const cust = await customer("racer")
      for (let i = 0; i < 12; i++) await track("racer", "units", 1 + (i % 3))
      // Ten generates race each other and more usage being recorded.
      const results = await Promise.all([
        ...Array.from({ length: 10 }, () => post(server, apiKey, "/v1/billing/invoice", { customer: "racer" })),
        ...Array.from({ length: 8 }, (_, i) =>
          post(server, apiKey, "/v1/track", { customer: "racer", feature: "units", value: i + 1 })
        )
      ])
      const generates = results.slice(0, 10)
      for (const r of generates) {
        expect([200, 409]).toContain(r.status)
        if (r.status === 409) expect(r.body.code).toBe("nothing_to_invoice")
      }
      expect(generates.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(1)
      // Sweep whatever the racing tracks left.
      const last = await post(server, apiKey, "/v1/billing/invoice", { customer: "racer" })
      expect([200, 409]).toContain(last.status)

      const events = await eventsOf(cust)
      const units = events.reduce((sum, e) => sum + Number(e.billable), 0) / 1_000_000
      expect(units).toBe(12 + 8 + 4 + 36) // 1,2,3 four times; then 1..8
      expect(events.every((e) => e.invoiceId !== null)).toBe(true)

      const invoices = (await get(apiKey, "/v1/billing/invoices?customer=racer")).body.invoices as Array<any>
      const invoiceIds = new Set(invoices.map((i) => i.id))
      expect(events.every((e) => invoiceIds.has(e.invoiceId))).toBe(true)
      // Each event counted once: the invoices' quantities add up to the recorded units, their totals to the rated total.
      expect(invoices.flatMap((i) => i.lines).reduce((sum: number, l: any) => sum + l.quantity, 0)).toBe(units)
      expect(invoices.reduce((sum, i) => sum + i.total, 0)).toBe(units * 3)
      // Numbers are distinct and consecutive.
      expect(invoices.map((i) => i.number).sort()).toEqual(
        Array.from({ length: invoices.length }, (_, i) => `INV-${String(i + 1).padStart(6, "0")}`)
      )
      expect((await get(apiKey, "/v1/billing/usage?customer=racer")).body.customers).toEqual([])
    })

    test("service API: createInvoice numbers from the same sequence; get; markPaid is idempotent", async () => {
      const { apiKey, customer, track, generate } = await setup()
      const cust = await customer("svc")
      await track("svc", "units", 1)
      expect((await generate("svc")).body.invoice.number).toBe("INV-000001")
      const orgId = (await get(apiKey, "/v1/billing/invoices")).body.invoices[0].id as string
      const org = await query(
        (sql) => sql<{ organizationId: string }>`SELECT organization_id FROM invoices WHERE id = ${orgId}`
      ).then((rows) => rows[0]!.organizationId)

      const run = <A, E>(f: (invoices: Effect.Effect.Success<typeof Invoices>) => Effect.Effect<A, E>) =>
        server.app.runtime.runPromise(Effect.either(Effect.flatMap(Invoices, f)))

      const start = Date.UTC(2025, 0, 1)
      const end = Date.UTC(2025, 1, 1)
      const created = await run((invoices) =>
        invoices.createInvoice(
          org,
          cust,
          "ngn",
          [
            {
              feature: "free",
              description: "Free plan, January",
              quantity: 1,
              unitPrice: "5000",
              amount: "5000",
              periodStart: start,
              periodEnd: end
            },
            {
              feature: "units",
              description: "Units usage",
              quantity: 3,
              unitPrice: "0.5",
              amount: "1.5",
              periodStart: start,
              periodEnd: end
            }
          ],
          { subscriptionId: "sub_x", periodStart: start, periodEnd: end }
        )
      )
      const invoice = Either.getOrThrow(created)
      expect(invoice).toMatchObject({
        number: "INV-000002",
        currency: "NGN",
        status: "open",
        subscriptionId: "sub_x",
        subtotal: "5002",
        total: "5002",
        amountPaid: "0",
        periodStart: start,
        periodEnd: end
      })
      expect(Either.getOrThrow(await run((i) => i.get(org, invoice.id)))).toEqual(invoice)
      const missing = await run((i) => i.get(org, "inv_nope"))
      expect(Either.isLeft(missing) && missing.left).toMatchObject({ _tag: "NotFound", code: "invoice_not_found" })

      const paidAt = Date.UTC(2025, 0, 3)
      const paid = Either.getOrThrow(await run((i) => i.markPaid(org, invoice.id, 5002, paidAt)))
      expect(paid).toMatchObject({ status: "paid", amountPaid: "5002", paidAt })
      const again = Either.getOrThrow(await run((i) => i.markPaid(org, invoice.id, 5002, paidAt + 1)))
      expect(again).toEqual(paid)

      const listed = (await get(apiKey, "/v1/billing/invoices?customer=svc")).body.invoices as Array<any>
      expect(listed.find((i) => i.id === invoice.id)).toMatchObject({
        status: "paid",
        amountPaid: 5002,
        amountDue: 0,
        paidAt: "2025-01-03T00:00:00.000Z",
        lines: [
          { feature: "free", amount: 5000 },
          { feature: "units", unitPrice: 0.5, amount: 2 }
        ]
      })
    })
  })
}
