import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Renewals } from "../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * A subscription's coupon on its plan's usage lines (decisions.md §15 "plan fees and their usage lines";
 * docs/decisions.md "Subscription discounts on usage (h19)"), and a first charge a coupon takes to zero recorded as a
 * paid invoice of total 0.
 */
const DAY = 86_400_000

const catalog = {
  features: [
    { slug: "calls", name: "Calls", type: "metered" },
    { slug: "renders", name: "Renders", type: "metered" },
    { slug: "pages", name: "Pages", type: "metered" }
  ],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 10_000,
      currency: "NGN",
      interval: "monthly",
      features: [
        { slug: "calls", usageModel: "usage_based", pricePerUnit: 3 },
        { slug: "renders", usageModel: "usage_based", pricePerUnit: 7 }
      ]
    },
    {
      slug: "trial",
      name: "Trial",
      price: 10_000,
      currency: "NGN",
      interval: "monthly",
      trialDays: 7,
      planGroup: "trial",
      features: [
        { slug: "calls", usageModel: "usage_based", pricePerUnit: 3 },
        { slug: "renders", usageModel: "usage_based", pricePerUnit: 7 }
      ]
    },
    {
      slug: "other",
      name: "Other",
      price: 5_000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "other",
      features: [{ slug: "pages", usageModel: "usage_based", pricePerUnit: 2 }]
    }
  ],
  coupons: [
    { slug: "eighth", name: "12.5% forever", percentOff: 12.5, duration: "forever" },
    { slug: "thousand", name: "NGN 1,000 off", amountOff: 1_000, currency: "NGN", duration: "forever" },
    { slug: "half", name: "Half off once", percentOff: 50, duration: "once" },
    { slug: "twenty", name: "20% for 2", percentOff: 20, duration: "repeating", durationInCycles: 2 },
    { slug: "free-ride", name: "All of it once", percentOff: 100, duration: "once" },
    { slug: "cust10", name: "10% for the customer", percentOff: 10, duration: "forever" }
  ]
}

/** §15 by hand: x × p / 100 rounded half-up (p with up to 2 decimals), on integers. */
const percentOf = (x: number, p: number) => {
  const num = BigInt(x) * BigInt(Math.round(p * 100))
  const den = 10_000n
  return Number(num / den + ((num % den) * 2n >= den ? 1n : 0n))
}
/** §15 by hand: an amount off spread in proportion, half-up, the last covered line taking the remainder. */
const spread = (off: number, amounts: ReadonlyArray<number>) => {
  const base = amounts.reduce((a, b) => a + b, 0)
  const total = Math.min(off, base)
  let left = total
  return amounts.map((a, i) => {
    const share = i === amounts.length - 1 ? left : Math.min(Math.floor((total * a) / base + 0.5), left)
    left -= share
    return share
  })
}

for (const database of databases()) {
  describe(`subscription discounts on usage (${database.name})`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const customer = async (id: string) =>
        expect((await call("/v1/customers", { id, email: `${id}@example.com` })).status).toBe(200)
      const pay = async (checkoutUrl: string) =>
        expect(
          (
            await server.fetch(new URL(checkoutUrl).pathname, {
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded" },
              body: "outcome=pay&card=ok"
            })
          ).status
        ).toBeLessThan(400)
      /** Attach and pay the first payment (when there is one to pay). */
      const subscribe = async (id: string, product: string, coupon?: string) => {
        const attached = await call("/v1/attach", { customer: id, product, ...(coupon ? { coupon } : {}) })
        expect(attached.status).toBe(200)
        if (attached.body.checkoutUrl) await pay(attached.body.checkoutUrl)
        return attached.body.subscription.id as string
      }
      const track = async (id: string, usage: Record<string, number>) => {
        for (const [feature, value] of Object.entries(usage)) {
          expect((await call("/v1/track", { customer: id, feature, value })).status).toBe(200)
        }
      }
      const generate = async (id: string) => {
        const generated = await call("/v1/billing/invoice", { customer: id })
        expect(generated.status).toBe(200)
        expect(generated.body.invoices).toHaveLength(1)
        return generated.body.invoices[0]
      }
      const invoices = async (id: string) =>
        ((await get(`/v1/billing/invoices?customer=${id}`)).invoices as Array<any>).sort(
          (a, b) => a.createdAt - b.createdAt
        )
      const byFeature = (invoice: any) =>
        Object.fromEntries(invoice.lines.map((l: any) => [l.feature, { amount: l.amount, discounts: l.discounts }]))
      const left = (subscriptionId: string) =>
        server.run(
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            const rows = yield* sql<{ invoicesLeft: number | string | null }>`SELECT invoices_left
              FROM subscription_discounts WHERE organization_id = ${org.id} AND subscription_id = ${subscriptionId}`
            const value = rows[0]?.invoicesLeft
            return value === null || value === undefined ? value : Number(value)
          }).pipe(Effect.orDie)
        )
      const eventsOf = (invoiceId: string) =>
        server.run(
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            return yield* sql<{ type: string; data: string }>`SELECT type, data FROM outbound_events
              WHERE organization_id = ${org.id} AND subject_id = ${invoiceId} ORDER BY id`
          }).pipe(Effect.orDie)
        )
      return { org, call, get, customer, subscribe, track, generate, invoices, byFeature, left, eventsOf }
    }

    test("percent: the subscription's coupon covers its plan's usage lines only, then the customer's on what is left", async () => {
      const { byFeature, call, customer, generate, get, subscribe, track } = await setup()
      await customer("ada")
      await subscribe("ada", "pro", "eighth")
      await subscribe("ada", "other")
      expect((await call("/v1/customers/ada/discount", { coupon: "cust10" })).status).toBe(200)
      await track("ada", { calls: 1234, renders: 101, pages: 333 })
      const unbilled = await get("/v1/billing/usage?customer=ada")
      const invoice = await generate("ada")
      const calls = 1234 * 3
      const renders = 101 * 7
      const pages = 333 * 2
      const eighthCalls = percentOf(calls, 12.5) // 462.75 → 463
      const eighthRenders = percentOf(renders, 12.5) // 88.375 → 88
      expect([eighthCalls, eighthRenders]).toEqual([463, 88])
      const custCalls = percentOf(calls - eighthCalls, 10)
      const custRenders = percentOf(renders - eighthRenders, 10)
      const custPages = percentOf(pages, 10)
      expect(byFeature(invoice)).toEqual({
        calls: {
          amount: calls,
          discounts: [
            { coupon: "eighth", amount: eighthCalls },
            { coupon: "cust10", amount: custCalls }
          ]
        },
        renders: {
          amount: renders,
          discounts: [
            { coupon: "eighth", amount: eighthRenders },
            { coupon: "cust10", amount: custRenders }
          ]
        },
        // The other subscription's usage: not the pro subscription's coupon, only the customer's.
        pages: { amount: pages, discounts: [{ coupon: "cust10", amount: custPages }] }
      })
      const discount = eighthCalls + eighthRenders + custCalls + custRenders + custPages
      expect({ subtotal: invoice.subtotal, discount: invoice.discount, total: invoice.total }).toEqual({
        subtotal: calls + renders + pages,
        discount,
        total: calls + renders + pages - discount
      })
      // What the unbilled usage said the invoice would bill is its subtotal.
      expect(unbilled.customers.map((u: any) => u.total)).toEqual([invoice.subtotal])
    })

    test("amount off: one budget per period, spread over the plan's usage lines in proportion, capped", async () => {
      const { byFeature, customer, generate, invoices, left, subscribe, track } = await setup()
      await customer("bo")
      // A trial: no plan fee has taken the amount off yet this period.
      const id = await subscribe("bo", "trial", "thousand")
      // Less usage than the amount off: capped at the lines, a total of 0, settled at once.
      await track("bo", { calls: 10 })
      expect(await generate("bo")).toMatchObject({ subtotal: 30, discount: 30, total: 0, status: "paid" })
      // The rest of the period's 1,000 spread in proportion, half-up, the last covered line taking the remainder.
      await track("bo", { calls: 1234, renders: 101 })
      const invoice = await generate("bo")
      const [calls, renders] = spread(1_000 - 30, [1234 * 3, 101 * 7])
      expect([calls, renders]).toEqual([814, 156])
      expect(byFeature(invoice)).toEqual({
        calls: { amount: 3702, discounts: [{ coupon: "thousand", amount: calls }] },
        renders: { amount: 707, discounts: [{ coupon: "thousand", amount: renders }] }
      })
      expect(invoice).toMatchObject({ subtotal: 4409, discount: 970, total: 3439, status: "open" })
      // The period's 1,000 is spent: no more off its usage.
      await track("bo", { calls: 100 })
      expect(await generate("bo")).toMatchObject({ subtotal: 300, discount: 0 })
      // The next period: its plan fee takes the 1,000, so its usage gets nothing, as on one invoice of fee and usage.
      clock.advance(32 * DAY)
      await runDue()
      const fee = (await invoices("bo")).find((i) => i.lines[0]?.feature === "trial")
      expect(fee).toMatchObject({ subtotal: 10_000, discount: 1_000, total: 9_000 })
      await track("bo", { calls: 100 })
      expect(await generate("bo")).toMatchObject({ subtotal: 300, discount: 0 })
      expect(await left(id)).toBeNull()
    })

    test("once: the usage of the cycle its plan fee was discounted in; spends no cycle; a trial keeps it for its first invoice", async () => {
      const { customer, generate, invoices, left, subscribe, track } = await setup()
      await customer("cy")
      const paid = await subscribe("cy", "pro", "half")
      expect(await left(paid)).toBe(0)
      await track("cy", { calls: 1001 })
      // 3003 × 50% = 1501.5 → 1502 (half-up)
      expect(await generate("cy")).toMatchObject({ subtotal: 3003, discount: percentOf(3003, 50), total: 1501 })
      clock.advance(32 * DAY)
      await runDue()
      const renewal = (await invoices("cy")).find((i) => i.lines[0]?.feature === "pro" && i.discount === 0)
      expect(renewal).toMatchObject({ subtotal: 10_000, discount: 0, total: 10_000 })
      // The next cycle's plan fee was full price: its usage is too.
      await track("cy", { calls: 10 })
      expect(await generate("cy")).toMatchObject({ subtotal: 30, discount: 0, total: 30 })

      // A trial: usage invoiced during it takes the coupon without spending it; the first invoice still gets it.
      await customer("dee")
      const trial = await subscribe("dee", "trial", "half")
      await track("dee", { calls: 100 })
      expect(await generate("dee")).toMatchObject({ subtotal: 300, discount: 150, total: 150 })
      expect(await left(trial)).toBe(1)
      clock.advance(32 * DAY)
      await runDue()
      const first = (await invoices("dee")).find((i) => i.lines[0]?.feature === "trial")
      expect(first).toMatchObject({ subtotal: 10_000, discount: 5_000, total: 5_000 })
      expect(await left(trial)).toBe(0)
    })

    test("repeating 2: covers the usage of the first charge's cycle and the renewal's that spent the last use, not after", async () => {
      const { customer, generate, left, subscribe, track } = await setup()
      await customer("eve")
      const id = await subscribe("eve", "pro", "twenty")
      expect(await left(id)).toBe(1)
      await track("eve", { calls: 100 })
      expect(await generate("eve")).toMatchObject({ subtotal: 300, discount: 60 })
      expect(await left(id)).toBe(1)
      clock.advance(32 * DAY)
      await runDue()
      expect(await left(id)).toBe(0)
      await track("eve", { calls: 100 })
      expect(await generate("eve")).toMatchObject({ subtotal: 300, discount: 60 })
      clock.advance(32 * DAY)
      await runDue()
      await track("eve", { calls: 100 })
      expect(await generate("eve")).toMatchObject({ subtotal: 300, discount: 0 })
    })

    test("a first charge the coupon takes to zero: one paid invoice of total 0 with the discount, as previewed", async () => {
      const { call, customer, eventsOf, generate, invoices, track } = await setup()
      await customer("fay")
      const body = { customer: "fay", product: "pro", coupon: "free-ride" }
      const preview = await call("/v1/attach/preview", body)
      expect(preview.status).toBe(200)
      const attached = await call("/v1/attach", body)
      expect(attached.body).toMatchObject({ checkoutUrl: null, subscription: { status: "active" } })
      // The same attach again finds it attached: no second invoice.
      expect((await call("/v1/attach", body)).status).toBe(200)
      const all = await invoices("fay")
      expect(all).toHaveLength(1)
      const invoice = all[0]
      expect(invoice).toMatchObject({
        number: "INV-000001",
        status: "paid",
        subtotal: 10_000,
        discount: 10_000,
        tax: 0,
        total: 0,
        amountPaid: 0,
        amountDue: 0
      })
      expect(invoice.paidAt).not.toBeNull()
      expect(invoice.lines).toHaveLength(1)
      expect(invoice.lines[0]).toMatchObject({ feature: "pro", amount: 10_000 })
      expect(invoice.lines[0].discounts).toEqual([{ coupon: "free-ride", amount: 10_000 }])
      const sub = attached.body.subscription
      expect(invoice.lines[0].periodStart).toBe(sub.currentPeriodStart)
      expect(invoice.lines[0].periodEnd).toBe(sub.currentPeriodEnd)
      expect({ subtotal: preview.body.subtotal, discount: preview.body.discount, total: preview.body.total }).toEqual({
        subtotal: invoice.subtotal,
        discount: invoice.discount,
        total: invoice.total
      })
      expect(preview.body.lines.map((l: any) => l.discounts)).toEqual(invoice.lines.map((l: any) => l.discounts))
      expect((await eventsOf(invoice.id)).map((e) => e.type)).toEqual(["invoice.created", "invoice.paid"])
      // The once coupon was spent on this cycle's plan fee: its usage is covered too, to zero.
      await track("fay", { calls: 7 })
      expect(await generate("fay")).toMatchObject({ subtotal: 21, discount: 21, total: 0, status: "paid" })
    })

    test("concurrent identical attaches of a 100%-off coupon: one subscription, one invoice", async () => {
      const { call, customer, invoices } = await setup()
      await customer("gus")
      const body = { customer: "gus", product: "pro", coupon: "free-ride" }
      const results = await Promise.all(Array.from({ length: 6 }, () => call("/v1/attach", body)))
      expect(results.every((r) => r.status === 200)).toBe(true)
      expect(new Set(results.map((r) => r.body.subscription.id)).size).toBe(1)
      expect((await invoices("gus")).map((i) => [i.total, i.status])).toEqual([[0, "paid"]])
    })
  })
}
