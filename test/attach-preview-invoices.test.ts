import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * `POST /v1/attach/preview` against what the same attach then produces (decisions.md §14–§16): every number of the
 * preview equals the invoice's in `GET /v1/billing/invoices` (plan changes) or the first charge (a new paid
 * subscription), with coupons and taxes; and the numbers follow §15/§16's rules, recomputed here independently.
 */
const DAY = 86_400_000

const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    {
      slug: "basic",
      name: "Basic",
      price: 5_000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens" }]
    },
    { slug: "pro", name: "Pro", price: 20_000, currency: "NGN", interval: "monthly", features: [{ slug: "tokens" }] }
  ],
  coupons: [
    { slug: "quarter", name: "25% once", percentOff: 25, duration: "once" },
    { slug: "flat", name: "NGN 1,500 off", amountOff: 1_500, currency: "NGN", duration: "once", plans: ["pro"] },
    { slug: "loyal", name: "10% on Pro", percentOff: 10, duration: "forever", plans: ["pro"] }
  ],
  promotionCodes: [{ code: "QUARTER", coupon: "quarter" }],
  taxRates: [
    { slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" },
    { slug: "mwst", name: "MwSt", percentage: 19, inclusive: true, country: "DE" }
  ]
}

/** Half-up (away from zero) division of integers. */
const div = (x: bigint, y: bigint) => {
  const negative = x < 0n !== y < 0n
  const ax = x < 0n ? -x : x
  const ay = y < 0n ? -y : y
  const q = ax / ay + ((ax % ay) * 2n >= ay ? 1n : 0n)
  return negative ? -q : q
}

/** §15/§16 from the lines' amounts and discounts: each line's tax on its amount after discounts, then the sums. */
const recompute = (lines: ReadonlyArray<any>, rate: { percentage: number; inclusive: boolean } | null) => {
  let subtotal = 0n
  let discount = 0n
  let tax = 0n
  let exclusive = 0n
  const taxes = lines.map((l) => {
    const amount = BigInt(l.amount)
    const off = l.discounts.reduce((s: bigint, d: any) => s + BigInt(d.amount), 0n)
    subtotal += amount
    discount += off
    if (rate === null) return []
    const p = BigInt(Math.round(rate.percentage * 10_000))
    const t = rate.inclusive ? div((amount - off) * p, 1_000_000n + p) : div((amount - off) * p, 1_000_000n)
    tax += t
    if (!rate.inclusive) exclusive += t
    return [Number(t)]
  })
  return {
    taxes,
    subtotal: Number(subtotal),
    discount: Number(discount),
    tax: Number(tax),
    total: Number(subtotal - discount + exclusive)
  }
}

const comparable = (line: any) => ({
  feature: line.feature,
  description: line.description,
  quantity: line.quantity,
  unitPrice: line.unitPrice,
  amount: line.amount,
  // The preview and the attach are some milliseconds apart (within one second, which is what proration counts).
  periodStart: line.periodStart.slice(0, 19),
  periodEnd: line.periodEnd.slice(0, 19),
  discounts: line.discounts,
  taxes: line.taxes
})

for (const database of databases()) {
  describe(`attach previews against their invoices (${database.name})`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const pay = (checkoutUrl: string) =>
        server.fetch(new URL(checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
      const customer = async (id: string, extra: Record<string, unknown>) =>
        expect((await call("/v1/customers", { id, email: `${id}@example.com`, ...extra })).status).toBe(200)
      /** Subscribed to `plan`, paid at a checkout that saves the card, then a week on. */
      const subscribed = async (id: string, plan: string) => {
        const attached = await call("/v1/attach", { customer: id, product: plan })
        await pay(attached.body.checkoutUrl)
        clock.advance(7 * DAY)
      }
      /** The preview, then the same attach within the same second (proration is by whole seconds). */
      const previewThenAttach = async (body: Record<string, unknown>) => {
        clock.set(Math.ceil(clock.now() / 1000) * 1000 + 1)
        const preview = await call("/v1/attach/preview", body)
        expect(preview.status).toBe(200)
        const attached = await call("/v1/attach", body)
        expect(attached.status).toBe(200)
        return { preview: preview.body, attached: attached.body }
      }
      const invoiceOf = async (customerId: string, id: string) =>
        ((await get(`/v1/billing/invoices?customer=${customerId}`)).invoices as Array<any>).find((i) => i.id === id)
      /** Every number of the preview against the invoice the attach made. */
      const sameNumbers = (preview: any, invoice: any) => {
        expect(preview.lines.map(comparable)).toEqual(invoice.lines.map(comparable))
        expect({
          currency: preview.currency,
          subtotal: preview.subtotal,
          discount: preview.discount,
          tax: preview.tax,
          total: preview.total,
          creditApplied: preview.creditApplied,
          amountDue: preview.amountDue
        }).toEqual({
          currency: invoice.currency,
          subtotal: invoice.subtotal,
          discount: invoice.discount,
          tax: invoice.tax,
          total: invoice.total,
          creditApplied: invoice.creditApplied,
          // Paid with the saved card at once: what was due then is what was paid.
          amountDue: invoice.amountPaid + invoice.amountDue
        })
      }
      return { org, call, get, customer, subscribed, previewThenAttach, invoiceOf, sameNumbers }
    }

    test("an upgrade with a percent promotion code and an exclusive rate: the charge line discounted, the credit line taxed negative", async () => {
      const { customer, invoiceOf, previewThenAttach, sameNumbers, subscribed } = await setup()
      await customer("ng", { address: { line1: "1 Marina", city: "Lagos", country: "NG" } })
      await subscribed("ng", "basic")
      const { attached, preview } = await previewThenAttach({
        customer: "ng",
        product: "pro",
        promotionCode: "quarter"
      })
      const invoice = await invoiceOf("ng", attached.invoice.id)
      sameNumbers(preview, invoice)
      const [credit, charge] = invoice.lines
      expect(credit.amount).toBeLessThan(0)
      expect(credit.discounts).toEqual([])
      expect(charge.discounts).toEqual([{ coupon: "quarter", amount: Number(div(BigInt(charge.amount) * 25n, 100n)) }])
      const rules = recompute(invoice.lines, { percentage: 7.5, inclusive: false })
      expect(invoice.lines.map((l: any) => l.taxes.map((t: any) => t.amount))).toEqual(rules.taxes)
      expect(credit.taxes[0].amount).toBeLessThan(0)
      expect({
        subtotal: invoice.subtotal,
        discount: invoice.discount,
        tax: invoice.tax,
        total: invoice.total
      }).toEqual({
        subtotal: rules.subtotal,
        discount: rules.discount,
        tax: rules.tax,
        total: rules.total
      })
      expect(invoice.status).toBe("paid")
    })

    test("an upgrade with an amount-off coupon and an inclusive rate", async () => {
      const { customer, invoiceOf, previewThenAttach, sameNumbers, subscribed } = await setup()
      await customer("de", { address: { line1: "Hauptstraße 1", city: "Berlin", country: "DE" } })
      await subscribed("de", "basic")
      const { attached, preview } = await previewThenAttach({ customer: "de", product: "pro", coupon: "flat" })
      const invoice = await invoiceOf("de", attached.invoice.id)
      sameNumbers(preview, invoice)
      expect(invoice.lines[1].discounts).toEqual([{ coupon: "flat", amount: 1_500 }])
      const rules = recompute(invoice.lines, { percentage: 19, inclusive: true })
      expect(invoice.lines.map((l: any) => l.taxes.map((t: any) => t.amount))).toEqual(rules.taxes)
      // An inclusive tax is part of the amounts: the total is subtotal − discount.
      expect({ tax: invoice.tax, total: invoice.total }).toEqual({ tax: rules.tax, total: rules.total })
      expect(invoice.tax).not.toBe(0)
    })

    test("a reverse-charge customer whose own discount covers the new plan: discounted, taxed at zero with the note", async () => {
      const { call, customer, invoiceOf, previewThenAttach, sameNumbers, subscribed } = await setup()
      await customer("rc", {
        address: { line1: "Hauptstraße 2", city: "Berlin", country: "DE" },
        taxExempt: "reverse_charge"
      })
      expect((await call("/v1/customers/rc/discount", { coupon: "loyal" })).status).toBe(200)
      await subscribed("rc", "basic")
      const { attached, preview } = await previewThenAttach({ customer: "rc", product: "pro" })
      const invoice = await invoiceOf("rc", attached.invoice.id)
      sameNumbers(preview, invoice)
      const charge = invoice.lines[1]
      expect(charge.discounts).toEqual([{ coupon: "loyal", amount: Number(div(BigInt(charge.amount) * 10n, 100n)) }])
      expect(invoice.lines.map((l: any) => l.taxes.map((t: any) => t.amount))).toEqual([[0], [0]])
      expect(invoice.taxNote).toContain("Reverse charge")
      expect(invoice.total).toBe(invoice.subtotal - invoice.discount)
    })

    test("a downgrade now whose credit exceeds its charge: the surplus, its tax included, is the balance the preview said", async () => {
      const { customer, get, invoiceOf, previewThenAttach, sameNumbers, subscribed } = await setup()
      await customer("down", { address: { line1: "2 Marina", city: "Lagos", country: "NG" } })
      await subscribed("down", "pro")
      const { attached, preview } = await previewThenAttach({ customer: "down", product: "basic", when: "now" })
      const invoice = await invoiceOf("down", attached.invoice.id)
      sameNumbers(preview, invoice)
      const rules = recompute(invoice.lines, { percentage: 7.5, inclusive: false })
      expect(rules.total).toBeLessThan(0)
      expect(invoice.total).toBe(0)
      const balance = (await get("/v1/customers/down")).billing.creditBalance
      expect(balance).toEqual({ NGN: -rules.total })
      expect(preview.creditBalanceAfter).toBe(-rules.total)
    })

    test("a new paid subscription: the preview's first charge (coupon, then tax) is what the payment asks for", async () => {
      const { customer, org, previewThenAttach } = await setup()
      await customer("fresh", { address: { line1: "3 Marina", city: "Lagos", country: "NG" } })
      const { attached, preview } = await previewThenAttach({ customer: "fresh", product: "pro", coupon: "quarter" })
      // 20,000 − 25% = 15,000; VAT 7.5% on it = 1,125; the first charge 16,125.
      expect(preview).toMatchObject({
        subscriptionId: null,
        subtotal: 20_000,
        discount: 5_000,
        tax: 1_125,
        total: 16_125,
        creditApplied: 0,
        amountDue: 16_125,
        lines: [{ feature: "pro", amount: 20_000, discounts: [{ coupon: "quarter", amount: 5_000 }] }]
      })
      expect(preview.lines[0].taxes).toMatchObject([{ rate: "vat-ng", amount: 1_125 }])
      const asked = await server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ amount: string }>`SELECT amount FROM checkouts
            WHERE organization_id = ${org.id} AND target_id = ${attached.subscription.id}`
        }).pipe(Effect.orDie)
      )
      expect(asked.map((r) => Number(r.amount))).toEqual([preview.amountDue])
    })
  })
}
