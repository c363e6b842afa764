import { describe, expect, test } from "bun:test"
import { Effect, Either, Layer } from "effect"
import { makeTestLayer } from "../../test/support/layers.ts"
import { Customers } from "../customers/Customers.ts"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import { type CollectRequest, type CollectResult, Payments } from "../payments/Payments.ts"
import { InvoicePayments, InvoicePaymentsLive } from "./InvoicePayments.ts"
import { type InvoiceRecord, Invoices } from "./Invoices.ts"

/**
 * Paying an invoice decides its answer from the invoice and the collection's outcome: tested with partial in-memory
 * services (no HTTP, no database). How money moves is tested against the providers' fakes (test/payments).
 */
const invoice = (over: Partial<InvoiceRecord> = {}): InvoiceRecord => ({
  organizationId: "org_1",
  id: "inv_1",
  number: "INV-000001",
  customerId: "cus_1",
  subscriptionId: null,
  currency: "NGN",
  status: "open",
  lines: [],
  subtotal: "120000.5",
  discount: "0",
  tax: "0",
  taxNote: null,
  total: "120000.5",
  amountPaid: "0",
  creditApplied: "0",
  periodStart: null,
  periodEnd: null,
  attempts: 0,
  nextAttemptAt: null,
  createdAt: 0,
  updatedAt: 0,
  paidAt: null,
  ...over
})

const customer = { organizationId: "org_1", id: "cus_1", email: "ada@example.com" } as CustomerRecord

/** The service over an invoice that reads `before`, then `after` once collection ran, and a collection outcome. */
const run = (before: InvoiceRecord, outcome: CollectResult, after: InvoiceRecord = before) => {
  const collected: Array<CollectRequest> = []
  let reads = 0
  const layer = InvoicePaymentsLive.pipe(
    Layer.provide(
      Layer.mergeAll(
        makeTestLayer(Invoices)({
          get: () => Effect.succeed(reads++ === 0 ? before : after),
          lockPayable: () => Effect.succeed(true)
        }),
        makeTestLayer(Customers)({ resolve: () => Effect.succeed(customer) }),
        makeTestLayer(Payments)({
          collect: (_org, _customer, request) => {
            collected.push(request)
            return Effect.succeed(outcome)
          }
        })
      )
    )
  )
  const result = Effect.runPromise(
    Effect.flatMap(InvoicePayments, (p) => p.pay("org_1", "inv_1", null)).pipe(Effect.either, Effect.provide(layer))
  )
  return { result, collected }
}

describe("InvoicePayments.pay", () => {
  test("collects the amount due, rounded half-up to a whole minor unit, locking the invoice", async () => {
    const { result, collected } = run(invoice(), { _tag: "Paid", reference: "pay-1" }, invoice({ status: "paid" }))
    expect(Either.getOrThrow(await result)).toMatchObject({ paid: true, code: "invoice_paid" })
    expect(collected).toHaveLength(1)
    expect(collected[0]).toMatchObject({ purpose: "invoice", targetId: "inv_1", amount: 120001, currency: "NGN" })
    expect(collected[0]!.payable).toBeDefined()
  })

  test("an attempt in flight answers payment_processing, not paid and without a checkout", async () => {
    const { result } = run(invoice(), { _tag: "Processing", reference: "pay-1" })
    expect(Either.getOrThrow(await result)).toMatchObject({
      paid: false,
      checkoutUrl: null,
      code: "payment_processing"
    })
  })

  test("paid between the first read and the claim's lock: already_paid", async () => {
    const { result } = run(invoice(), { _tag: "NotPayable" }, invoice({ status: "paid" }))
    expect(Either.getOrThrow(await result)).toMatchObject({ paid: true, code: "already_paid" })
  })

  test("voided between the first read and the lock: 409 invoice_not_open", async () => {
    const { result } = run(invoice(), { _tag: "NotPayable" }, invoice({ status: "void" }))
    const failure = await result
    expect(Either.isLeft(failure) && failure.left).toMatchObject({ _tag: "Conflict", code: "invoice_not_open" })
  })

  test("a checkout after a declined card says why", async () => {
    const { result } = run(invoice(), {
      _tag: "Checkout",
      checkoutUrl: "https://pay.example/x",
      reference: "pay-2",
      accessCode: null,
      chargeFailure: "Insufficient funds"
    })
    const answer = Either.getOrThrow(await result)
    expect(answer).toMatchObject({ paid: false, checkoutUrl: "https://pay.example/x", code: "checkout_required" })
    expect(answer.message).toContain("Insufficient funds")
  })

  test("already paid: answered without collecting anything", async () => {
    const { result, collected } = run(invoice({ status: "paid" }), { _tag: "Failed", message: "not called" })
    expect(Either.getOrThrow(await result)).toMatchObject({ paid: true, code: "already_paid" })
    expect(collected).toHaveLength(0)
  })

  test("an invoice stored past what a JSON number carries is refused (422), never sent rounded to a provider", async () => {
    // 2^53 + 1: as a number it would leave as 2^53.
    const { result, collected } = run(invoice({ total: "9007199254740993" }), { _tag: "Paid", reference: "never" })
    const failure = await result
    expect(Either.isLeft(failure) && failure.left).toMatchObject({ _tag: "AmountTooLarge" })
    expect(Either.isLeft(failure) && failure.left.message).toContain("9007199254740993")
    expect(collected).toHaveLength(0)
    // At the bound it is collected exactly.
    const edge = run(
      invoice({ total: "9007199254740991" }),
      { _tag: "Paid", reference: "p" },
      invoice({ status: "paid" })
    )
    expect(Either.isRight(await edge.result)).toBe(true)
    expect(edge.collected[0]!.amount).toBe(9007199254740991)
  })

  test("a failed off-session collection is 402 payment_failed", async () => {
    const { result } = run(invoice(), { _tag: "Failed", message: "No saved payment method" })
    const failure = await result
    expect(Either.isLeft(failure) && failure.left).toMatchObject({ _tag: "PaymentFailed" })
  })
})
