import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { formatMinor } from "../src/domain/majorUnits.ts"
import { Payments } from "../src/payments/Payments.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { pdfText } from "./support/pdf.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [{ slug: "calls", name: "API calls", type: "metered" }],
  plans: [
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 10 }]
    }
  ],
  taxRates: [{ slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" }]
}

/** decisions.md §16: refunds through the API, and credit notes for refunds and lost disputes. */
for (const database of databases()) {
  describe(`refunds and credit notes on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      return { status: response.status, body: (await response.json()) as any }
    }

    /** An invoice of 200 calls × 10 + 7.5% = 2150, paid through the sandbox's simulated checkout. */
    const paidInvoice = async (pay = true) => {
      const { apiKey, id: orgId } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      await post(server, apiKey, "/v1/billing/profile", { invoicePrefix: "ACME" })
      await post(server, apiKey, "/v1/customers", { id: "c", email: "c@x.test", address: { country: "NG" } })
      await post(server, apiKey, "/v1/track", { customer: "c", feature: "calls", value: 200 })
      const invoice = (await post(server, apiKey, "/v1/billing/invoice", { customer: "c" })).body.invoice
      expect(invoice.total).toBe(2150)
      if (pay) {
        const started = await post(server, apiKey, `/v1/billing/invoice/${invoice.id}/pay`, {})
        const done = await server.fetch(new URL(started.body.checkoutUrl).pathname, { method: "POST" })
        expect(done.status).toBe(200)
      }
      return { apiKey, orgId, invoice }
    }

    const refund = (apiKey: string, id: string, body: unknown, key?: string) =>
      post(
        server,
        apiKey,
        `/v1/billing/invoices/${id}/refund`,
        body,
        key === undefined ? {} : { "idempotency-key": key }
      )

    test("a partial refund, once per key; the rest by default; past what was paid is 422 and changes nothing", async () => {
      const { apiKey, invoice } = await paidInvoice()
      const first = await refund(apiKey, invoice.id, { amount: 500, reason: "Service outage on 3 May" }, "r-1")
      expect(first.status).toBe(200)
      expect(first.body).toMatchObject({ success: true, amount: 500, status: "succeeded" })
      expect(first.body.creditNotes).toEqual([
        {
          id: expect.stringMatching(/^cn_/),
          number: "ACME-CN-000001",
          invoiceId: invoice.id,
          invoiceNumber: invoice.number,
          customerId: invoice.customerId,
          currency: "NGN",
          amount: 500,
          cause: "refund",
          reason: "Service outage on 3 May",
          createdAt: expect.any(Number)
        }
      ])
      // The same key: the same answer, nothing refunded again.
      const again = await refund(apiKey, invoice.id, { amount: 500, reason: "Service outage on 3 May" }, "r-1")
      expect(again.body).toEqual(first.body)

      const tooMuch = await refund(apiKey, invoice.id, { amount: 1651 })
      expect(tooMuch.status).toBe(422)
      expect(tooMuch.body.code).toBe("refund_exceeds_paid")
      let listed = (await get(apiKey, `/v1/billing/invoices?customer=c`)).body.invoices[0]
      expect(listed).toMatchObject({ status: "paid", amountPaid: 2150, amountRefunded: 500 })

      const rest = await refund(apiKey, invoice.id, {})
      expect(rest.body).toMatchObject({ amount: 1650, status: "succeeded" })
      expect(rest.body.creditNotes.map((n: any) => [n.number, n.amount])).toEqual([
        ["ACME-CN-000001", 500],
        ["ACME-CN-000002", 1650]
      ])
      expect((await refund(apiKey, invoice.id, { amount: 1 })).status).toBe(422)
      listed = (await get(apiKey, `/v1/billing/invoices?customer=c`)).body.invoices[0]
      expect(listed).toMatchObject({ status: "paid", amountRefunded: 2150 })

      const events = (await get(apiKey, "/v1/events?type=payment.refunded")).body.data
      expect(events.map((e: any) => e.data.refunded).sort()).toEqual([1650, 500])

      // Listed by invoice (id or number) and in all; each with its own PDF.
      const byId = (await get(apiKey, `/v1/billing/credit-notes?invoice=${invoice.id}`)).body.creditNotes
      expect(byId).toEqual(rest.body.creditNotes)
      expect((await get(apiKey, `/v1/billing/credit-notes?invoice=${invoice.number}`)).body.creditNotes).toEqual(byId)
      expect((await get(apiKey, `/v1/billing/credit-notes`)).body.creditNotes).toEqual(byId)
      const pdf = await server.fetch(`/v1/billing/credit-notes/${byId[0].id}/pdf`, { apiKey })
      expect(pdf.headers.get("content-type")).toBe("application/pdf")
      const text = await pdfText(new Uint8Array(await pdf.arrayBuffer()))
      for (const expected of [
        "Credit note",
        "ACME-CN-000001",
        invoice.number,
        formatMinor(500, "NGN"),
        formatMinor(2150, "NGN"),
        "Reason: Service outage on 3 May"
      ])
        expect(text).toContain(expected)
    })

    test("concurrent refunds under different keys: what was paid is refunded once, every other caller 422", async () => {
      const { apiKey, invoice } = await paidInvoice()
      // Six whole refunds at once, then seven partial ones of 500 against the 2150 paid.
      const whole = await Promise.all(Array.from({ length: 6 }, (_, i) => refund(apiKey, invoice.id, {}, `w-${i}`)))
      expect(whole.map((r) => r.status).sort()).toEqual([200, 422, 422, 422, 422, 422])
      expect(whole.filter((r) => r.status === 422).every((r) => r.body.code === "refund_exceeds_paid")).toBe(true)
      const notes = (await get(apiKey, `/v1/billing/credit-notes?invoice=${invoice.id}`)).body.creditNotes
      expect(notes.map((n: any) => [n.number, n.amount])).toEqual([["ACME-CN-000001", 2150]])

      const second = await paidInvoice()
      const partial = await Promise.all(
        Array.from({ length: 7 }, (_, i) => refund(second.apiKey, second.invoice.id, { amount: 500 }, `p-${i}`))
      )
      // 4 × 500 fit in 2150; the others are refused whole, never recorded in part.
      expect(partial.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 422, 422, 422])
      const listed = (await get(second.apiKey, `/v1/billing/invoices?customer=c`)).body.invoices[0]
      expect(listed.amountRefunded).toBe(2000)
      const partialNotes = (await get(second.apiKey, `/v1/billing/credit-notes?invoice=${second.invoice.id}`)).body
      expect(partialNotes.creditNotes.map((n: any) => n.amount)).toEqual([500, 500, 500, 500])
    })

    test("nothing paid: 422 invoice_not_refundable; another organization's invoice: 404", async () => {
      const { apiKey, invoice } = await paidInvoice(false)
      const unpaid = await refund(apiKey, invoice.id, {})
      expect(unpaid.status).toBe(422)
      expect(unpaid.body.code).toBe("invoice_not_refundable")
      const other = await server.createOrg()
      expect((await refund(other.apiKey, invoice.id, {})).status).toBe(404)
      expect((await get(other.apiKey, `/v1/billing/credit-notes/cn_x/pdf`)).status).toBe(404)
      expect((await refund(apiKey, invoice.id, { amount: 0 })).status).toBe(400)
    })

    test("a lost dispute issues a credit note too, once however often it is reported", async () => {
      const { apiKey, orgId, invoice } = await paidInvoice()
      const reference = (
        await server.run(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            Effect.orDie(
              sql<{ reference: string }>`SELECT reference FROM payments WHERE target_id = ${invoice.id}
                AND status = 'succeeded'`
            )
          )
        )
      )[0]!.reference
      const lost = {
        _tag: "Refunded" as const,
        eventKey: "evt_dispute_1",
        reference,
        providerPaymentId: null,
        cause: "dispute" as const,
        reversalKey: "dp_1",
        amount: 2150,
        cumulative: true,
        currency: "NGN",
        metadata: {}
      }
      for (let i = 0; i < 2; i++) {
        await server.run(
          Effect.flatMap(Payments, (p) =>
            Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(p.applyEvent(orgId, "simulated", lost)))
          ).pipe(Effect.orDie)
        )
      }
      const notes = (await get(apiKey, `/v1/billing/credit-notes?invoice=${invoice.id}`)).body.creditNotes
      expect(notes.map((n: any) => [n.number, n.amount, n.cause])).toEqual([["ACME-CN-000001", 2150, "dispute"]])
    })
  })
}
