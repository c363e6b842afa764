import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { CreditBalance } from "../src/creditBalance/CreditBalance.ts"
import { formatMinor } from "../src/domain/majorUnits.ts"
import { Payments } from "../src/payments/Payments.ts"
import { ProviderAccounts } from "../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { type FakePaystack, startFakePaystack } from "./support/fakePaystack.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"
import { pdfText } from "./support/pdf.ts"

/**
 * docs/decisions.md "The first payment is an invoice (h18)": every successful first payment of a paid subscription is
 * one numbered `paid` invoice of it, with the numbers that were charged (the preview's), listed, announced, rendered,
 * and refundable into credit notes; two settlements of one attempt at once still make one.
 */
const HOUR = 3_600_000

const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    { slug: "pro", name: "Pro", price: 10_000, currency: "NGN", interval: "monthly", features: [{ slug: "tokens" }] },
    { slug: "extra", name: "Extra", price: 3_000, currency: "NGN", interval: "monthly", isAddon: true, features: [] },
    {
      slug: "paid-by-paystack",
      name: "Pro (Paystack)",
      price: 250_000,
      currency: "NGN",
      interval: "monthly",
      provider: "paystack",
      features: [{ slug: "tokens" }]
    }
  ],
  coupons: [{ slug: "quarter", name: "25% once", percentOff: 25, duration: "once" }],
  taxRates: [{ slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" }]
}

for (const database of databases()) {
  describe(`the first payment is an invoice (${database.name})`, () => {
    let server: TestServer
    let paystack: FakePaystack
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
      paystack = startFakePaystack({ secretKey: `sk_test_first_invoice_${database.name}` })
    })
    afterAll(async () => {
      await paystack.stop()
      await server.close()
    })

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const call = (path: string, body: unknown, headers?: Record<string, string>) =>
        post(server, org.apiKey, path, body, headers)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const pay = async (checkoutUrl: string) => {
        const paid = await server.fetch(new URL(checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        expect(paid.status).toBeLessThan(400)
      }
      const customer = async (id: string) =>
        expect(
          (await call("/v1/customers", { id, email: `${id}@example.com`, address: { country: "NG" } })).status
        ).toBe(200)
      const invoices = async (id: string) =>
        ((await get(`/v1/billing/invoices?customer=${id}`)).invoices as Array<any>).sort(
          (a, b) => a.createdAt - b.createdAt
        )
      const rows = <A extends object>(query: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
        server.run(Effect.orDie(Effect.flatMap(SqlClient.SqlClient, query)))
      /** The subscription's settled payments: what each charged and the invoice it became. */
      const paymentsOf = (subscriptionId: string) =>
        rows(
          (sql) => sql<{ amount: string; invoiceId: string | null; status: string }>`SELECT amount, invoice_id, status
            FROM payments WHERE organization_id = ${org.id} AND target_id = ${subscriptionId} ORDER BY created_at`
        )
      const eventsOf = (invoiceId: string) =>
        rows(
          (sql) => sql<{ type: string; data: string }>`SELECT type, data FROM outbound_events
            WHERE organization_id = ${org.id} AND subject_id = ${invoiceId} ORDER BY id`
        )
      /** Puts `amount` on the customer's credit balance, as a plan change's surplus would. */
      const credit = async (id: string, amount: number) => {
        const customerId = (await get(`/v1/customers/${id}`)).customer?.id ?? (await get(`/v1/customers/${id}`)).id
        expect(customerId).toStartWith("cus_")
        await server.run(
          Effect.flatMap(CreditBalance, (c) => c.add(org.id, customerId, "NGN", BigInt(amount), "plan_change", "test"))
        )
        return customerId as string
      }
      const balance = async (id: string) => {
        const body = await get(`/v1/customers/${id}`)
        return (body.customer ?? body).billing.creditBalance
      }
      return { org, call, get, pay, customer, invoices, paymentsOf, eventsOf, credit, balance }
    }

    test("checkout, then paid an hour later: one paid invoice with the preview's numbers, its events, PDF and page", async () => {
      const { call, customer, eventsOf, get, invoices, org, pay, paymentsOf } = await setup()
      await customer("ada")
      const body = { customer: "ada", product: "pro", coupon: "quarter" }
      const preview = await call("/v1/attach/preview", body)
      expect(preview.status).toBe(200)
      const attached = await call("/v1/attach", body)
      expect(attached.body.subscription.status).toBe("pending")
      // Nothing is invoiced until the money arrives.
      expect(await invoices("ada")).toEqual([])
      clock.advance(HOUR)
      await pay(attached.body.checkoutUrl)

      const [subscription] = (await get("/v1/subscriptions?customer=ada")).subscriptions
      expect(subscription.status).toBe("active")
      const all = await invoices("ada")
      expect(all).toHaveLength(1)
      const invoice = all[0]
      // §15/§16 by hand: 25% off 10,000; VAT 7.5% of 7,500 = 562.5 → 563 (half-up); total 7,500 + 563.
      expect(invoice).toMatchObject({
        number: "INV-000001",
        status: "paid",
        currency: "NGN",
        subtotal: 10_000,
        discount: 2_500,
        tax: 563,
        total: 8_063,
        amountPaid: 8_063,
        creditApplied: 0,
        amountDue: 0,
        amountRefunded: 0
      })
      expect(invoice.paidAt).not.toBeNull()
      // Exactly the preview's numbers…
      expect({ subtotal: preview.body.subtotal, discount: preview.body.discount, tax: preview.body.tax }).toEqual({
        subtotal: invoice.subtotal,
        discount: invoice.discount,
        tax: invoice.tax
      })
      expect(preview.body.total).toBe(invoice.total)
      const numbers = (l: any) => ({ amount: l.amount, unitPrice: l.unitPrice, discounts: l.discounts, taxes: l.taxes })
      expect(invoice.lines.map(numbers)).toEqual(preview.body.lines.map(numbers))
      expect(invoice.lines[0].discounts).toEqual([{ coupon: "quarter", amount: 2_500 }])
      // …and the period the payment started, an hour after the preview's.
      expect(invoice.lines[0].periodStart).toBe(subscription.currentPeriodStart)
      expect(invoice.lines[0].periodEnd).toBe(subscription.currentPeriodEnd)
      expect(Date.parse(invoice.lines[0].periodStart) - Date.parse(preview.body.lines[0].periodStart)).toBeGreaterThan(
        HOUR - 1_000
      )
      expect(invoice.lines[0].description).toBe(
        `Pro (${subscription.currentPeriodStart.slice(0, 10)} to ${subscription.currentPeriodEnd.slice(0, 10)})`
      )
      // The money that moved is the invoice's, and the payment names it.
      expect(await paymentsOf(subscription.id)).toEqual([
        { amount: "8063", invoiceId: invoice.id, status: "succeeded" }
      ])

      const events = await eventsOf(invoice.id)
      expect(events.map((e) => e.type)).toEqual(["invoice.created", "invoice.paid"])
      expect(JSON.parse(events[1]!.data)).toMatchObject({ id: invoice.id, number: "INV-000001", total: 8_063 })

      const pdf = await server.fetch(`/v1/billing/invoices/${invoice.id}/pdf`, { apiKey: org.apiKey })
      expect(pdf.headers.get("content-type")).toContain("application/pdf")
      const text = await pdfText(new Uint8Array(await pdf.arrayBuffer()))
      for (const figure of [
        invoice.number,
        formatMinor(10_000, "NGN"),
        formatMinor(-2_500, "NGN"),
        formatMinor(563, "NGN"),
        formatMinor(8_063, "NGN")
      ])
        expect(text).toContain(figure)
      // The hosted page needs no key; a paid invoice shows no Pay button.
      const page = await server.fetch(new URL(invoice.hostedUrl).pathname)
      expect(page.status).toBe(200)
      const html = await page.text()
      expect(html).toContain("INV-000001")
      expect(html).not.toMatch(/<button[^>]*>\s*Pay/i)
    })

    test("refunds of a first payment's invoice issue credit notes on it, at most what was paid", async () => {
      const { call, customer, get, invoices, org, pay } = await setup()
      await customer("bo")
      const attached = await call("/v1/attach", { customer: "bo", product: "pro", coupon: "quarter" })
      await pay(attached.body.checkoutUrl)
      const [invoice] = await invoices("bo")
      const refund = await call(`/v1/billing/invoices/${invoice.id}/refund`, { amount: 1_000, reason: "Goodwill" })
      expect(refund.status).toBe(200)
      expect(refund.body).toMatchObject({ amount: 1_000, status: "succeeded" })
      const rest = await call(`/v1/billing/invoices/${invoice.id}/refund`, {})
      expect(rest.body).toMatchObject({ amount: 7_063, status: "succeeded" })
      const tooMuch = await call(`/v1/billing/invoices/${invoice.id}/refund`, { amount: 1 })
      expect(tooMuch.status).toBe(422)
      const notes = (await get(`/v1/billing/credit-notes?invoice=${invoice.id}`)).creditNotes as Array<any>
      expect(notes.map((n) => [n.number, n.invoiceId, n.invoiceNumber, n.amount, n.cause])).toEqual([
        ["INV-CN-000001", invoice.id, "INV-000001", 1_000, "refund"],
        ["INV-CN-000002", invoice.id, "INV-000001", 7_063, "refund"]
      ])
      const [after] = await invoices("bo")
      expect(after).toMatchObject({ status: "paid", amountPaid: 8_063, amountRefunded: 8_063 })
      // The subscription keeps its access (decisions.md §7).
      expect((await get("/v1/subscriptions?customer=bo")).subscriptions[0].status).toBe("active")
      expect(org.id).toBeDefined()
    })

    test("a saved card is charged at once: the invoice is there when the attach answers, numbered next", async () => {
      const { call, customer, invoices, pay, paymentsOf } = await setup()
      await customer("cy")
      const first = await call("/v1/attach", { customer: "cy", product: "pro" })
      await pay(first.body.checkoutUrl) // saves the card
      const charged = await call("/v1/attach", { customer: "cy", product: "extra" })
      expect(charged.status).toBe(200)
      expect(charged.body).toMatchObject({ checkoutUrl: null, subscription: { status: "active" } })
      const all = await invoices("cy")
      expect(all.map((i) => [i.number, i.status, i.subtotal, i.tax, i.total, i.amountPaid])).toEqual([
        ["INV-000001", "paid", 10_000, 750, 10_750, 10_750],
        ["INV-000002", "paid", 3_000, 225, 3_225, 3_225]
      ])
      expect(await paymentsOf(charged.body.subscription.id)).toEqual([
        { amount: "3225", invoiceId: all[1].id, status: "succeeded" }
      ])
    })

    test("the customer's own discount takes from the first payment too (§15), and that uses it once", async () => {
      const { call, customer, invoices, pay } = await setup()
      await customer("cd")
      expect((await call("/v1/customers/cd/discount", { coupon: "quarter" })).status).toBe(200)
      // 10,000 − 25% = 7,500, then 7.5% VAT = 562.5 → 563 (half-up): 8,063 charged.
      const preview = await call("/v1/attach/preview", { customer: "cd", product: "pro" })
      expect(preview.body).toMatchObject({
        subtotal: 10_000,
        discount: 2_500,
        tax: 563,
        total: 8_063,
        amountDue: 8_063
      })
      const attached = await call("/v1/attach", { customer: "cd", product: "pro" })
      await pay(attached.body.checkoutUrl)
      // The `once` discount is spent by the first payment: the next invoice (the add-on's) is full price.
      const extra = await call("/v1/attach", { customer: "cd", product: "extra" })
      expect(extra.body).toMatchObject({ checkoutUrl: null, subscription: { status: "active" } })
      const all = await invoices("cd")
      expect(all.map((i) => [i.status, i.subtotal, i.discount, i.tax, i.total, i.amountPaid])).toEqual([
        ["paid", 10_000, 2_500, 563, 8_063, 8_063],
        ["paid", 3_000, 0, 225, 3_225, 3_225]
      ])
      expect(all[0].lines[0].discounts).toEqual([{ coupon: "quarter", amount: 2_500 }])
    })

    test("settlements of one attempt racing (events, the hosted page): one invoice, one activation", async () => {
      const { call, customer, invoices, org, pay, paymentsOf } = await setup()
      await customer("dee")
      const attached = await call("/v1/attach", { customer: "dee", product: "pro" })
      // The pending subscription's checkout answers the page the attach opened, with its reference.
      const opened = await call(`/v1/subscriptions/${attached.body.subscription.id}/checkout`, {})
      expect(opened.body.checkoutUrl).toBe(attached.body.checkoutUrl)
      const reference = opened.body.reference as string
      expect(reference).toStartWith("pay-")
      const event = (i: number) =>
        server.run(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.withTransaction(
              Effect.flatMap(Payments, (p) =>
                p.applyEvent(org.id, "simulated", {
                  _tag: "PaymentSucceeded",
                  eventKey: `race-${reference}-${i}`,
                  reference,
                  amount: 10_750,
                  currency: "NGN",
                  metadata: {},
                  method: null
                })
              )
            )
          ).pipe(Effect.orDie)
        )
      const applied = await Promise.all([event(1), event(2), event(3), pay(attached.body.checkoutUrl), event(4)])
      expect(applied.filter((a) => a === true).length).toBeLessThanOrEqual(1)
      const all = await invoices("dee")
      expect(all.map((i) => [i.number, i.status, i.amountPaid])).toEqual([["INV-000001", "paid", 10_750]])
      expect(await paymentsOf(attached.body.subscription.id)).toEqual([
        { amount: "10750", invoiceId: all[0].id, status: "succeeded" }
      ])
    })

    test("the credit balance pays first: the checkout charges the rest, the invoice shows both", async () => {
      const { balance, call, credit, customer, invoices, pay, paymentsOf } = await setup()
      await customer("fay")
      await credit("fay", 3_000)
      const preview = await call("/v1/attach/preview", { customer: "fay", product: "pro" })
      expect(preview.body).toMatchObject({
        total: 10_750,
        creditApplied: 3_000,
        amountDue: 7_750,
        creditBalanceAfter: 0
      })
      const attached = await call("/v1/attach", { customer: "fay", product: "pro" })
      expect(attached.body.subscription.status).toBe("pending")
      await pay(attached.body.checkoutUrl)
      const [invoice] = await invoices("fay")
      expect(invoice).toMatchObject({
        status: "paid",
        total: 10_750,
        creditApplied: 3_000,
        amountPaid: 7_750,
        amountDue: 0
      })
      expect(await paymentsOf(attached.body.subscription.id)).toEqual([
        { amount: "7750", invoiceId: invoice.id, status: "succeeded" }
      ])
      expect(await balance("fay")).toEqual({})
    })

    test("a balance covering the first payment activates at once, with a paid invoice and nothing charged", async () => {
      const { balance, call, credit, customer, invoices, paymentsOf } = await setup()
      await customer("gus")
      await credit("gus", 20_000)
      const attached = await call("/v1/attach", { customer: "gus", product: "pro" })
      expect(attached.body).toMatchObject({ checkoutUrl: null, subscription: { status: "active" } })
      // The same attach again finds it attached and spends nothing more.
      const again = await call("/v1/attach", { customer: "gus", product: "pro" })
      expect(again.body.subscription).toMatchObject({ id: attached.body.subscription.id, status: "active" })
      const all = await invoices("gus")
      expect(all.map((i) => [i.number, i.status, i.total, i.creditApplied, i.amountPaid, i.amountDue])).toEqual([
        ["INV-000001", "paid", 10_750, 10_750, 0, 0]
      ])
      expect(await paymentsOf(attached.body.subscription.id)).toEqual([])
      expect(await balance("gus")).toEqual({ NGN: 9_250 })

      // Concurrent identical attaches of a covered plan: one subscription, one invoice, the balance spent once.
      await customer("ivy")
      await credit("ivy", 20_000)
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => call("/v1/attach", { customer: "ivy", product: "pro" }))
      )
      expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200))
      expect(new Set(answers.map((a) => a.body.subscription.id)).size).toBe(1)
      expect((await invoices("ivy")).map((i) => [i.status, i.creditApplied])).toEqual([["paid", 10_750]])
      expect(await balance("ivy")).toEqual({ NGN: 9_250 })
    })

    test("a pending subscription's checkout, once the balance covers it: activated directly, its open page closed", async () => {
      const { balance, call, credit, customer, get, invoices, paymentsOf } = await setup()
      await customer("jon")
      const attached = await call("/v1/attach", { customer: "jon", product: "pro" })
      expect(attached.body.subscription.status).toBe("pending")
      await credit("jon", 10_750)
      const checkout = await call(`/v1/subscriptions/${attached.body.subscription.id}/checkout`, {})
      expect(checkout.body).toMatchObject({ activatedDirectly: true, checkoutUrl: null })
      expect((await invoices("jon")).map((i) => [i.status, i.creditApplied, i.amountPaid])).toEqual([
        ["paid", 10_750, 0]
      ])
      // The page the attach opened no longer takes a payment.
      const page = await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect(page.status).toBeLessThan(500)
      expect(await paymentsOf(attached.body.subscription.id)).toEqual([])
      expect((await invoices("jon")).length).toBe(1)
      expect(await balance("jon")).toEqual({})
      expect((await get("/v1/subscriptions?customer=jon")).subscriptions[0].status).toBe("active")
    })

    test("a balance spent elsewhere before the payment arrives: the shortfall stays due on an open invoice", async () => {
      const { balance, call, credit, customer, get, invoices, org, pay } = await setup()
      await customer("hal")
      const customerId = await credit("hal", 3_000)
      const attached = await call("/v1/attach", { customer: "hal", product: "pro" })
      await server.run(
        Effect.flatMap(CreditBalance, (c) => c.spend(org.id, customerId, "NGN", 3_000n, "inv_elsewhere"))
      )
      await pay(attached.body.checkoutUrl)
      const [invoice] = await invoices("hal")
      // The subscription is paid for what was charged; the 3,000 the balance no longer had is still owed.
      expect(invoice).toMatchObject({
        status: "open",
        total: 10_750,
        creditApplied: 0,
        amountPaid: 7_750,
        amountDue: 3_000
      })
      expect((await get("/v1/subscriptions?customer=hal")).subscriptions[0].status).toBe("active")
      expect(await balance("hal")).toEqual({})
    })

    test("Paystack: checkout, then its webhook racing the reconciler's verify: one invoice", async () => {
      const { call, customer, invoices, org, paymentsOf } = await setup()
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      await customer("eve")
      const attached = await call("/v1/attach", { customer: "eve", product: "paid-by-paystack" })
      expect(attached.body.checkoutUrl).toStartWith(paystack.baseUrl)
      const opened = await call(`/v1/subscriptions/${attached.body.subscription.id}/checkout`, {})
      expect(opened.body.checkoutUrl).toBe(attached.body.checkoutUrl)
      const hook = paystack.complete(opened.body.reference)
      // Old enough for the reconciler to verify the open checkout.
      clock.advance(11 * 60_000)
      const deliver = () =>
        server.fetch(`/webhooks/${org.slug}/paystack`, { method: "POST", body: hook.body, headers: hook.headers })
      const [a, b] = await Promise.all([deliver(), deliver(), server.run(Effect.flatMap(Payments, (p) => p.reconcile))])
      expect([a.status, b.status]).toEqual([200, 200])
      const all = await invoices("eve")
      // 250,000 and VAT 7.5%: 18,750.
      expect(all.map((i) => [i.number, i.status, i.total, i.amountPaid])).toEqual([
        ["INV-000001", "paid", 268_750, 268_750]
      ])
      expect(await paymentsOf(attached.body.subscription.id)).toEqual([
        { amount: "268750", invoiceId: all[0].id, status: "succeeded" }
      ])
    })
  })
}
