import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Either } from "effect"
import type {
  ChargeRequest,
  CheckoutRequest,
  PaymentAdapter,
  PaymentMetadata,
  ProviderAccount
} from "../../src/payments/PaymentProvider.ts"
import { ProviderError } from "../../src/payments/PaymentProvider.ts"
import { makePaystackAdapterEffect, PaystackAdapter } from "../../src/payments/paystack/PaystackAdapter.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"

const metadata: PaymentMetadata = {
  organization_id: "org_1",
  customer_id: "cus_1",
  purpose: "subscription",
  target_id: "sub_1"
}

const newReference = (prefix = "ref") => `${prefix}-${crypto.randomUUID()}`

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
/** The adapter's error, failing the test if the effect succeeded. */
const failureOf = async <A>(effect: Effect.Effect<A, ProviderError>): Promise<ProviderError> => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (Either.isRight(result)) throw new Error(`expected a ProviderError, got ${JSON.stringify(result.right)}`)
  expect(result.left).toBeInstanceOf(ProviderError)
  return result.left
}

let fake: FakePaystack
let adapter: PaymentAdapter
let account: ProviderAccount

beforeAll(async () => {
  fake = startFakePaystack()
  account = fake.account
  adapter = await Effect.runPromise(PaystackAdapter.pipe(Effect.provide(FetchHttpClient.layer)))
})
afterAll(() => fake.stop())

const checkoutRequest = (over: Partial<CheckoutRequest> = {}): CheckoutRequest => ({
  reference: newReference("chk"),
  mode: "payment",
  amount: 250_000,
  currency: "NGN",
  email: "ada@example.com",
  description: "Pro plan",
  callbackUrl: "https://vendor.example/return",
  providerCustomerId: null,
  metadata,
  ...over
})

const chargeRequest = (token: string, over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  reference: newReference("chg"),
  amount: 150_000,
  currency: "NGN",
  email: "ada@example.com",
  method: { token, providerCustomerId: null, email: "ada@example.com" },
  metadata,
  ...over
})

const lastRequest = (path: string) => {
  const found = fake.requests.filter((r) => r.path === path).at(-1)
  if (found === undefined) throw new Error(`no request to ${path}`)
  return found
}

/** Secrets never leak into errors. */
const expectNoSecret = (e: ProviderError, secret = fake.secretKey) => {
  expect(e.message).not.toContain(secret)
  expect(JSON.stringify(e)).not.toContain(secret)
}

describe("createCheckout", () => {
  test("initializes a transaction with our fields and returns Paystack's URL and access code", async () => {
    const request = checkoutRequest()
    const session = await run(adapter.createCheckout(account, request))
    const tx = fake.transactions.get(request.reference)!
    expect(tx).toBeDefined()
    expect(session).toEqual({
      checkoutUrl: `${fake.baseUrl}/checkout/${tx.accessCode}`,
      reference: request.reference,
      accessCode: tx.accessCode
    })
    const sent = lastRequest("/transaction/initialize")
    expect(sent.method).toBe("POST")
    expect(sent.bearer).toBe(fake.secretKey)
    expect(sent.body).toEqual({
      email: "ada@example.com",
      amount: 250_000,
      currency: "NGN",
      reference: request.reference,
      callback_url: "https://vendor.example/return",
      metadata
    })
  })

  test("setup mode is a card-only charge of the given amount, without callback when none", async () => {
    const request = checkoutRequest({ mode: "setup", amount: 5_000, callbackUrl: null, currency: "ngn" })
    await run(adapter.createCheckout(account, request))
    const sent = lastRequest("/transaction/initialize")
    expect(sent.body).toEqual({
      email: "ada@example.com",
      amount: 5_000,
      currency: "NGN",
      reference: request.reference,
      metadata,
      channels: ["card"]
    })
  })

  test("a reused reference is a duplicate", async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    const e = await failureOf(adapter.createCheckout(account, request))
    expect(e.reason).toBe("duplicate")
    expect(e.message).toContain("Duplicate Transaction Reference")
  })

  test("Paystack's validation message comes back as rejected", async () => {
    const e = await failureOf(adapter.createCheckout(account, checkoutRequest({ currency: "EUR" })))
    expect(e.reason).toBe("rejected")
    expect(e.message).toContain("Currency not supported")
  })

  test("the account's rules: a currency the business has not enabled, or an amount under the currency's minimum, is refused", async () => {
    // This fake account has NGN only, as a new Nigerian business does.
    const usd = await failureOf(adapter.createCheckout(account, checkoutRequest({ currency: "USD", amount: 50_000 })))
    expect(usd.reason).toBe("rejected")
    expect(usd.message).toContain("Currency not supported by merchant")
    const small = await failureOf(adapter.createCheckout(account, checkoutRequest({ amount: 4_999 })))
    expect(small.reason).toBe("rejected")
    expect(small.message).toContain("Invalid Amount Sent")
    expect((await run(adapter.createCheckout(account, checkoutRequest({ amount: 5_000 })))).checkoutUrl).toStartWith(
      fake.baseUrl
    )
    const auth = fake.seedAuthorization("ada@example.com")
    expect(
      (await failureOf(adapter.charge(account, chargeRequest(auth.authorization_code, { amount: 100 })))).reason
    ).toBe("rejected")
    const ghana = startFakePaystack({ currencies: ["GHS"] })
    try {
      const pesewas = await run(adapter.createCheckout(ghana.account, checkoutRequest({ currency: "GHS", amount: 10 })))
      expect(pesewas.checkoutUrl).toStartWith(ghana.baseUrl)
      expect(
        (await failureOf(adapter.createCheckout(ghana.account, checkoutRequest({ currency: "GHS", amount: 9 })))).reason
      ).toBe("rejected")
    } finally {
      await ghana.stop()
    }
  })

  test("a non-integer amount is refused before calling Paystack", async () => {
    const before = fake.requests.length
    const e = await failureOf(adapter.createCheckout(account, checkoutRequest({ amount: 10.5 })))
    expect(e.reason).toBe("rejected")
    expect(fake.requests.length).toBe(before)
  })
})

describe("charge", () => {
  test("success on a reusable authorization", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const request = chargeRequest(auth.authorization_code)
    const result = await run(adapter.charge(account, request))
    expect(result).toEqual({ _tag: "Succeeded", providerReference: request.reference })
    const sent = lastRequest("/transaction/charge_authorization")
    expect(sent.bearer).toBe(fake.secretKey)
    expect(sent.body).toEqual({
      authorization_code: auth.authorization_code,
      email: "ada@example.com",
      amount: 150_000,
      currency: "NGN",
      reference: request.reference,
      metadata: JSON.stringify(metadata)
    })
    expect(fake.transactions.get(request.reference)?.status).toBe("success")
  })

  test("uses the method's email over the request's (Paystack ties the authorization to it)", async () => {
    const auth = fake.seedAuthorization("card-owner@example.com")
    const request = chargeRequest(auth.authorization_code, {
      email: "someone-else@example.com",
      method: { token: auth.authorization_code, providerCustomerId: null, email: "card-owner@example.com" }
    })
    expect((await run(adapter.charge(account, request)))._tag).toBe("Succeeded")
    expect((lastRequest("/transaction/charge_authorization").body as { email: string }).email).toBe(
      "card-owner@example.com"
    )
  })

  test("falls back to the request's email when the method has none", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const request = chargeRequest(auth.authorization_code, {
      method: { token: auth.authorization_code, providerCustomerId: null, email: null }
    })
    expect((await run(adapter.charge(account, request)))._tag).toBe("Succeeded")
  })

  test("declined", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "decline", message: "Insufficient Funds" })
    const result = await run(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(result).toEqual({ _tag: "Declined", message: "Insufficient Funds" })
  })

  test("action required (send_otp)", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "action", status: "send_otp", message: "Please enter OTP" })
    const result = await run(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(result).toEqual({ _tag: "ActionRequired", message: "Please enter OTP" })
  })

  test("action required (open_url)", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "action", status: "open_url" })
    const result = await run(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(result._tag).toBe("ActionRequired")
  })

  test("pending", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "pending" })
    const request = chargeRequest(auth.authorization_code)
    const result = await run(adapter.charge(account, request))
    expect(result).toEqual({ _tag: "Pending", providerReference: request.reference })
  })

  test("a reused reference is a duplicate", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const request = chargeRequest(auth.authorization_code)
    await run(adapter.charge(account, request))
    const e = await failureOf(adapter.charge(account, request))
    expect(e.reason).toBe("duplicate")
  })

  test("an authorization Paystack refuses (deactivated, unknown, tied to another email) is MethodGone, with Paystack's message", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const request = chargeRequest(auth.authorization_code, {
      method: { token: auth.authorization_code, providerCustomerId: null, email: "bob@example.com" }
    })
    const result = await run(adapter.charge(account, request))
    expect(result).toEqual({
      _tag: "MethodGone",
      message: expect.stringContaining("Email does not match Authorization code")
    })
    expect(await run(adapter.charge(account, chargeRequest("AUTH_unknown")))).toMatchObject({ _tag: "MethodGone" })
    // Other refusals are not about the method.
    fake.failNext({ kind: "reject", message: "Invalid Amount Sent" }, { path: "/transaction/charge_authorization" })
    expect((await failureOf(adapter.charge(account, chargeRequest(auth.authorization_code)))).reason).toBe("rejected")
  })

  test("a wrong secret key is unauthorized, and the key is not in the error", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const wrong = { ...account, secretKey: "sk_test_wrong_key_1234567890" }
    const e = await failureOf(adapter.charge(wrong, chargeRequest(auth.authorization_code)))
    expect(e.reason).toBe("unauthorized")
    expectNoSecret(e, wrong.secretKey)
    expect(lastRequest("/transaction/charge_authorization").bearer).toBe(wrong.secretKey)
  })

  test("an injected 401 is unauthorized", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "unauthorized" })
    const e = await failureOf(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(e.reason).toBe("unauthorized")
    expectNoSecret(e)
  })

  test("a 500 is unavailable", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "serverError" })
    const e = await failureOf(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(e.reason).toBe("unavailable")
    expectNoSecret(e)
  })

  test("a 502 with an HTML page is unavailable", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "serverError", status: 502 })
    const e = await failureOf(adapter.charge(account, chargeRequest(auth.authorization_code)))
    expect(e.reason).toBe("unavailable")
  })

  test("a network failure is unavailable", async () => {
    const closed = startFakePaystack()
    const gone = closed.account
    await closed.stop()
    const e = await failureOf(adapter.charge(gone, chargeRequest("AUTH_x")))
    expect(e.reason).toBe("unavailable")
    expectNoSecret(e, gone.secretKey)
  })

  test("no answer within the timeout is a timeout", async () => {
    const quick = await Effect.runPromise(
      makePaystackAdapterEffect({ timeoutMs: 200 }).pipe(Effect.provide(FetchHttpClient.layer))
    )
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "delay", ms: 2_000 }, { path: "/transaction/charge_authorization" })
    const started = Date.now()
    const e = await failureOf(quick.charge(account, chargeRequest(auth.authorization_code)))
    expect(e.reason).toBe("timeout")
    expect(Date.now() - started).toBeLessThan(1_500)
    expectNoSecret(e)
  })

  test("a delay shorter than the timeout is fine", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    fake.failNext({ kind: "delay", ms: 50 }, { path: "/transaction/charge_authorization" })
    expect((await run(adapter.charge(account, chargeRequest(auth.authorization_code))))._tag).toBe("Succeeded")
  })
})

describe("verify", () => {
  test("an unpaid checkout is pending, without a method", async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    expect(await run(adapter.verify(account, request.reference))).toMatchObject({ status: "pending", method: null })
  })

  test("a paid checkout is succeeded with its reusable authorization as MethodDetails", async () => {
    const request = checkoutRequest({ email: "grace@example.com" })
    await run(adapter.createCheckout(account, request))
    const paid = fake.complete(request.reference, {
      card: { brand: "mastercard", last4: "8877", expMonth: "08", expYear: "2031", signature: "SIG_grace" }
    })
    const result = await run(adapter.verify(account, request.reference))
    expect(result).toEqual({
      status: "succeeded",
      amount: request.amount,
      currency: "NGN",
      method: {
        token: paid.authorizationCode!,
        providerCustomerId: (paid.event.data.customer as { customer_code: string }).customer_code,
        email: "grace@example.com",
        type: "card",
        brand: "mastercard",
        last4: "8877",
        expMonth: 8,
        expYear: 2031,
        reusable: true,
        fingerprint: "SIG_grace"
      }
    })
    expect(result.method?.providerCustomerId).toStartWith("CUS_")
  })

  test("a paid checkout whose authorization is not reusable has no method", async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    fake.complete(request.reference, { card: { reusable: false } })
    expect(await run(adapter.verify(account, request.reference))).toMatchObject({ status: "succeeded", method: null })
  })

  test("a failed payment is failed", async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    fake.decline(request.reference)
    expect(await run(adapter.verify(account, request.reference))).toMatchObject({ status: "failed", method: null })
  })

  test("an unknown reference is not found (the request never reached Paystack)", async () => {
    expect(await run(adapter.verify(account, "no-such-reference"))).toEqual({ status: "not_found", method: null })
  })
})

describe("refund and removeMethod", () => {
  const paidCheckout = async () => {
    const request = checkoutRequest({ mode: "setup", amount: 5_000 })
    await run(adapter.createCheckout(account, request))
    const paid = fake.complete(request.reference)
    return { reference: request.reference, authorizationCode: paid.authorizationCode! }
  }

  test("refunds the whole payment", async () => {
    const { reference } = await paidCheckout()
    await run(adapter.refund(account, reference, null))
    expect(lastRequest("/refund").body).toEqual({ transaction: reference })
    expect(fake.refunds.filter((r) => r.transactionReference === reference)).toEqual([
      expect.objectContaining({ amount: 5_000, currency: "NGN" })
    ])
  })

  test("refunds part of a payment, then refuses more than is left", async () => {
    const { reference } = await paidCheckout()
    await run(adapter.refund(account, reference, 2_000))
    expect(lastRequest("/refund").body).toEqual({ transaction: reference, amount: 2_000 })
    const e = await failureOf(adapter.refund(account, reference, 4_000))
    expect(e.reason).toBe("rejected")
    expect(fake.refunds.filter((r) => r.transactionReference === reference).map((r) => r.amount)).toEqual([2_000])
  })

  test("refunding an unknown transaction is rejected", async () => {
    expect((await failureOf(adapter.refund(account, "nope-123", null))).reason).toBe("rejected")
  })

  test("removeMethod deactivates the authorization; it can no longer be charged", async () => {
    const { authorizationCode } = await paidCheckout()
    await run(adapter.removeMethod(account, { token: authorizationCode, providerCustomerId: null, email: null }))
    expect(lastRequest("/customer/authorization/deactivate").body).toEqual({ authorization_code: authorizationCode })
    expect(fake.authorizations.get(authorizationCode)?.active).toBe(false)
    expect(await run(adapter.charge(account, chargeRequest(authorizationCode)))).toMatchObject({ _tag: "MethodGone" })
  })

  test("removing an unknown authorization is rejected", async () => {
    const e = await failureOf(
      adapter.removeMethod(account, { token: "AUTH_nope", providerCustomerId: null, email: null })
    )
    expect(e.reason).toBe("rejected")
  })
})

describe("verifySignature", () => {
  const paidWebhook = async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    return fake.complete(request.reference)
  }
  const check = (acc: ProviderAccount, body: Uint8Array, headers: Record<string, string | undefined>) =>
    run(adapter.verifySignature(acc, body, headers, Date.now()))

  test("accepts Paystack's signature of the raw body", async () => {
    const hook = await paidWebhook()
    expect(await check(account, hook.rawBody, hook.headers)).toBe(true)
    expect(await check(account, hook.rawBody, { "X-Paystack-Signature": hook.signature })).toBe(true)
  })

  test("rejects a tampered body", async () => {
    const hook = await paidWebhook()
    const tampered = new TextEncoder().encode(hook.body.replace(`"amount":250000`, `"amount":1`))
    expect(tampered.length).not.toBe(0)
    expect(new TextDecoder().decode(tampered)).not.toBe(hook.body)
    expect(await check(account, tampered, hook.headers)).toBe(false)
  })

  test("rejects a signature made with another secret", async () => {
    const hook = await paidWebhook()
    expect(await check({ ...account, secretKey: "sk_test_other" }, hook.rawBody, hook.headers)).toBe(false)
    const other = startFakePaystack()
    try {
      const forged = other.sign(hook.body)
      expect(await check(account, hook.rawBody, { "x-paystack-signature": forged })).toBe(false)
    } finally {
      await other.stop()
    }
  })

  test("rejects a missing, empty, short or non-hex header", async () => {
    const hook = await paidWebhook()
    expect(await check(account, hook.rawBody, {})).toBe(false)
    expect(await check(account, hook.rawBody, { "x-paystack-signature": undefined })).toBe(false)
    expect(await check(account, hook.rawBody, { "x-paystack-signature": "" })).toBe(false)
    expect(await check(account, hook.rawBody, { "x-paystack-signature": hook.signature.slice(0, 64) })).toBe(false)
    expect(await check(account, hook.rawBody, { "x-paystack-signature": `${hook.signature.slice(0, 126)}zz` })).toBe(
      false
    )
  })
})

describe("parseEvent", () => {
  const parse = (raw: Uint8Array) => run(adapter.parseEvent(raw))
  const bytes = (s: string) => new TextEncoder().encode(s)

  const paid = async (metadataAs: "object" | "string" | "zero" | "empty" | "null") => {
    const request = checkoutRequest({ email: "lin@example.com", amount: 777_700 })
    await run(adapter.createCheckout(account, request))
    const hook = fake.complete(request.reference, { metadataAs })
    return { request, hook, tx: fake.transactions.get(request.reference)! }
  }

  test("charge.success with metadata as an object: payment, amount, metadata and saved method", async () => {
    const { request, hook, tx } = await paid("object")
    expect(hook.event.data.metadata).toEqual(metadata)
    const event = await parse(hook.rawBody)
    expect(event).toEqual({
      _tag: "PaymentSucceeded",
      eventKey: `charge.success:${tx.id}`,
      reference: request.reference,
      amount: 777_700,
      currency: "NGN",
      metadata,
      method: {
        token: hook.authorizationCode!,
        providerCustomerId: expect.stringMatching(/^CUS_/),
        email: "lin@example.com",
        type: "card",
        brand: "visa",
        last4: "4081",
        expMonth: 12,
        expYear: 2030,
        reusable: true,
        fingerprint: expect.stringMatching(/^SIG_/)
      }
    })
  })

  test("charge.success with metadata as a JSON string", async () => {
    const { hook } = await paid("string")
    expect(typeof hook.event.data.metadata).toBe("string")
    const event = await parse(hook.rawBody)
    expect(event._tag === "PaymentSucceeded" && event.metadata).toEqual(metadata)
  })

  for (const [as, wire] of [
    ["zero", 0],
    ["empty", ""],
    ["null", null]
  ] as const) {
    test(`charge.success with metadata ${JSON.stringify(wire)} has empty metadata`, async () => {
      const { hook } = await paid(as)
      expect(hook.event.data.metadata).toBe(wire)
      const event = await parse(hook.rawBody)
      expect(event._tag).toBe("PaymentSucceeded")
      expect(event._tag === "PaymentSucceeded" && event.metadata).toEqual({})
    })
  }

  test("metadata values are reduced to strings; nested values are dropped", async () => {
    const hook = fake.webhook("charge.success", {
      id: 42,
      reference: "r-42",
      amount: 100,
      currency: "ngn",
      metadata: JSON.stringify({ organization_id: "org_9", n: 7, ok: true, custom_fields: [{ a: 1 }], referrer: null }),
      authorization: {},
      customer: { email: "x@example.com", customer_code: "CUS_x" }
    })
    const event = await parse(hook.rawBody)
    expect(event).toEqual({
      _tag: "PaymentSucceeded",
      eventKey: "charge.success:42",
      reference: "r-42",
      amount: 100,
      currency: "NGN",
      metadata: { organization_id: "org_9", n: "7", ok: "true" },
      method: null
    })
  })

  test("the event key falls back to the reference when there is no id", async () => {
    const hook = fake.webhook("charge.success", { reference: "r-no-id", amount: 100, currency: "NGN", metadata: 0 })
    const event = await parse(hook.rawBody)
    expect(event._tag === "PaymentSucceeded" && event.eventKey).toBe("charge.success:r-no-id")
  })

  test("the webhook of a charge on a saved method carries its (stringified) metadata", async () => {
    const auth = fake.seedAuthorization("ada@example.com")
    const request = chargeRequest(auth.authorization_code)
    await run(adapter.charge(account, request))
    const event = await parse(fake.webhookFor(request.reference).rawBody)
    expect(event).toMatchObject({ _tag: "PaymentSucceeded", reference: request.reference, amount: 150_000, metadata })
  })

  test("charge.failed is not a Paystack event: a body of that type is acknowledged and skipped, not acted on", async () => {
    const request = checkoutRequest()
    await run(adapter.createCheckout(account, request))
    fake.decline(request.reference, { gatewayResponse: "Insufficient Funds" })
    // Paystack announces no failure: the fake has nothing to send, and verify is how a decline is learned.
    expect(() => fake.webhookFor(request.reference)).toThrow()
    const invented = fake.webhook("charge.failed", { id: 7, reference: request.reference, status: "failed", metadata })
    expect(await run(adapter.routeEvent(invented.rawBody))).toEqual({
      type: "charge.failed",
      handled: false,
      organizationId: "org_1"
    })
    expect(await parse(invented.rawBody)).toEqual({
      _tag: "Ignored",
      eventKey: "charge.failed:7",
      type: "charge.failed"
    })
  })

  test("refund.processed is a Refunded increment of the transaction it names (amount sent as a string)", async () => {
    const request = checkoutRequest({ amount: 40_000 })
    await run(adapter.createCheckout(account, request))
    fake.complete(request.reference)
    await run(adapter.refund(account, request.reference, 15_000))
    const refund = fake.refunds.at(-1)!
    const hook = fake.refundProcessed(refund.id)
    expect(hook.event.data.amount).toBe("15000")
    expect(await run(adapter.routeEvent(hook.rawBody))).toEqual({
      type: "refund.processed",
      handled: true,
      organizationId: null
    })
    expect(await parse(hook.rawBody)).toEqual({
      _tag: "Refunded",
      eventKey: `refund.processed:${refund.refundReference}`,
      reference: request.reference,
      providerPaymentId: null,
      cause: "refund",
      reversalKey: `refund:${refund.refundReference}`,
      amount: 15_000,
      cumulative: false,
      currency: "NGN",
      metadata: {}
    })
  })

  test("charge.dispute.create is Disputed (routed by its transaction's metadata); an accepted resolution is a lost dispute", async () => {
    const request = checkoutRequest({ amount: 40_000 })
    await run(adapter.createCheckout(account, request))
    fake.complete(request.reference)
    const opened = fake.dispute(request.reference)
    expect(await run(adapter.routeEvent(opened.rawBody))).toEqual({
      type: "charge.dispute.create",
      handled: true,
      organizationId: "org_1"
    })
    expect(await parse(opened.rawBody)).toEqual({
      _tag: "Disputed",
      eventKey: `charge.dispute.create:${opened.disputeId}`,
      reference: request.reference,
      providerPaymentId: null,
      metadata
    })
    const declined = await parse(fake.resolveDispute(opened.disputeId, "declined").rawBody)
    expect(declined).toEqual({
      _tag: "Ignored",
      eventKey: `charge.dispute.resolve:${opened.disputeId}`,
      type: "charge.dispute.resolve"
    })
    expect(await parse(fake.resolveDispute(opened.disputeId, "merchant-accepted").rawBody)).toMatchObject({
      _tag: "Refunded",
      reference: request.reference,
      cause: "dispute",
      reversalKey: `dispute:${opened.disputeId}`,
      amount: 40_000,
      cumulative: false,
      currency: "NGN"
    })
  })

  test("other event types are ignored, with their type", async () => {
    const subscription = await parse(fake.webhook("subscription.create", { id: 99, reference: "r-99" }).rawBody)
    expect(subscription).toEqual({ _tag: "Ignored", eventKey: "subscription.create:99", type: "subscription.create" })
    const transfer = await parse(fake.webhook("transfer.success", { reference: "tr-1" }).rawBody)
    expect(transfer).toEqual({ _tag: "Ignored", eventKey: "transfer.success:tr-1", type: "transfer.success" })
  })

  test("routing reads the event type and our organization id (from metadata in any of its forms) only", async () => {
    const route = (event: unknown) => run(adapter.routeEvent(bytes(JSON.stringify(event))))
    const noCurrency = {
      event: "charge.success",
      data: { reference: "r", metadata: JSON.stringify({ organization_id: "org_1" }) }
    }
    expect(await route(noCurrency)).toEqual({ type: "charge.success", handled: true, organizationId: "org_1" })
    expect(await route({ event: "charge.success", data: { metadata: 0 } })).toEqual({
      type: "charge.success",
      handled: true,
      organizationId: null
    })
    expect(await route({ event: "transfer.success" })).toEqual({
      type: "transfer.success",
      handled: false,
      organizationId: null
    })
    for (const raw of ["{not json", "[]", JSON.stringify({ data: {} })]) {
      expect((await failureOf(adapter.routeEvent(bytes(raw)))).reason).toBe("rejected")
    }
  })

  test("malformed bodies are rejected", async () => {
    for (const raw of [
      "{not json",
      "",
      "[]",
      JSON.stringify({ data: {} }),
      JSON.stringify({ event: "charge.success", data: {} })
    ]) {
      const e = await failureOf(adapter.parseEvent(bytes(raw)))
      expect(e.reason).toBe("rejected")
    }
  })
})

describe("hosted page (as a customer pays)", () => {
  test("POST to the checkout URL completes it, redirects to the callback and delivers the signed webhook", async () => {
    const received: Array<{ body: string; signature: string | null }> = []
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (req) => {
        received.push({ body: await req.text(), signature: req.headers.get("x-paystack-signature") })
        return new Response("ok")
      }
    })
    const hosted = startFakePaystack({ webhookUrl: `http://127.0.0.1:${receiver.port}/webhooks/org` })
    try {
      const request = checkoutRequest()
      const session = await run(adapter.createCheckout(hosted.account, request))
      const page = await fetch(session.checkoutUrl, { method: "POST", redirect: "manual" })
      expect(page.status).toBe(302)
      expect(page.headers.get("location")).toBe(
        `https://vendor.example/return?trxref=${request.reference}&reference=${request.reference}`
      )
      expect(received).toHaveLength(1)
      const delivered = received[0]!
      const raw = new TextEncoder().encode(delivered.body)
      expect(
        await run(
          adapter.verifySignature(hosted.account, raw, { "x-paystack-signature": delivered.signature ?? undefined }, 0)
        )
      ).toBe(true)
      expect(await run(adapter.parseEvent(raw))).toMatchObject({
        _tag: "PaymentSucceeded",
        reference: request.reference
      })

      // A declined card sends nothing; the transaction says so when verified.
      const declined = checkoutRequest()
      const declinedPage = await run(adapter.createCheckout(hosted.account, declined))
      const back = await fetch(`${declinedPage.checkoutUrl}?outcome=decline`, { method: "POST", redirect: "manual" })
      expect(back.status).toBe(302)
      expect(received).toHaveLength(1)
      expect(await run(adapter.verify(hosted.account, declined.reference))).toMatchObject({ status: "failed" })
    } finally {
      await hosted.stop()
      await receiver.stop(true)
    }
  })
})
