import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { startServer, type TestServer } from "../support/harness.ts"

/**
 * decisions.md §16 through a real provider's adapter (Paystack, against its fake): the refund is asked of Paystack
 * and recorded, with its credit note, when Paystack's `refund.processed` arrives; a lost dispute issues one too.
 */
describe("invoice refunds through Paystack", () => {
  let server: TestServer
  let paystack: FakePaystack
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    paystack = startFakePaystack({ secretKey: "sk_test_paystack_refunds" })
  })
  afterAll(async () => {
    await paystack.stop()
    await server.close()
  })

  test("refund: pending until Paystack confirms, then a credit note; a lost dispute: another", async () => {
    const org = await server.createOrg()
    await server.run(
      Effect.flatMap(ProviderAccounts, (a) =>
        a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
      )
    )
    await syncCatalog(server, org.apiKey, {
      features: [{ slug: "calls", name: "Calls", type: "metered" }],
      plans: [
        {
          slug: "payg",
          name: "Pay as you go",
          currency: "NGN",
          autoEnable: true,
          provider: "paystack",
          features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 100 }]
        }
      ]
    })
    await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
    await post(server, org.apiKey, "/v1/track", { customer: "ada", feature: "calls", value: 50 })
    const invoice = (await post(server, org.apiKey, "/v1/billing/invoice", { customer: "ada" })).body.invoice
    const pay = await post(server, org.apiKey, `/v1/billing/invoice/${invoice.id}/pay`, {})
    expect(pay.body.checkoutUrl).toStartWith(paystack.baseUrl)
    const [tx] = [...paystack.transactions.values()]
    expect(tx).toMatchObject({ amount: 5000, currency: "NGN" })
    const paid = await paystack.deliver(paystack.complete(tx!.reference), `${server.baseUrl}/webhooks/${org.slug}`)
    expect(paid.status).toBe(200)

    const refund = await post(
      server,
      org.apiKey,
      `/v1/billing/invoices/${invoice.id}/refund`,
      { amount: 1200, reason: "Goodwill" },
      { "idempotency-key": "goodwill-1" }
    )
    expect(refund.body).toMatchObject({ success: true, amount: 1200, status: "pending", creditNotes: [] })
    expect(paystack.refunds.map((r) => [r.transactionReference, r.amount])).toEqual([[tx!.reference, 1200]])
    // Past what is left at Paystack's side of ours: refused before asking.
    const tooMuch = await post(server, org.apiKey, `/v1/billing/invoices/${invoice.id}/refund`, { amount: 5001 })
    expect(tooMuch.status).toBe(422)

    const processed = await paystack.deliver(
      paystack.refundProcessed(paystack.refunds[0]!.id),
      `${server.baseUrl}/webhooks/${org.slug}`
    )
    expect(processed.status).toBe(200)
    const list = async () =>
      (
        (await (
          await server.fetch(`/v1/billing/credit-notes?invoice=${invoice.id}`, { apiKey: org.apiKey })
        ).json()) as any
      ).creditNotes
    expect((await list()).map((n: any) => [n.number, n.amount, n.cause])).toEqual([["INV-CN-000001", 1200, "refund"]])

    const dispute = paystack.dispute(tx!.reference)
    await paystack.deliver(dispute, `${server.baseUrl}/webhooks/${org.slug}`)
    await paystack.deliver(
      paystack.resolveDispute(dispute.disputeId, "merchant-accepted"),
      `${server.baseUrl}/webhooks/${org.slug}`
    )
    const notes = await list()
    expect(notes.map((n: any) => [n.number, n.cause])).toEqual([
      ["INV-CN-000001", "refund"],
      ["INV-CN-000002", "dispute"]
    ])
    const listed = (await (
      await server.fetch("/v1/billing/invoices?customer=ada", { apiKey: org.apiKey })
    ).json()) as any
    expect(listed.invoices[0].amountRefunded).toBe(1200 + notes[1].amount)
  })
})
