import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import type {
  CheckoutRequest,
  PaymentMetadata,
  ProviderAccount,
  ProviderEvent
} from "../../src/payments/PaymentProvider.ts"
import { ProviderError } from "../../src/payments/PaymentProvider.ts"
import { makeStripeAdapter, referenceQuery } from "../../src/payments/stripe/StripeAdapter.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"

/** The Stripe adapter against a fake of Stripe's HTTP API, driven through the official SDK. */
describe("StripeAdapter", () => {
  let fake: FakeStripe
  let account: ProviderAccount
  const adapter = makeStripeAdapter({ timeoutMs: 2_000, defaultReturnUrl: "https://billing.test/return" })

  beforeAll(() => {
    fake = startFakeStripe()
    account = { provider: "stripe", secretKey: fake.secretKey, webhookSecret: fake.webhookSecret, baseUrl: fake.url }
  })
  afterAll(() => fake.stop())

  let seq = 0
  const ref = (label: string) => `${label}_${Date.now().toString(36)}_${++seq}`
  const metadata = (target = "inv_1"): PaymentMetadata => ({
    organization_id: "org_1",
    customer_id: "cust_1",
    purpose: "invoice",
    target_id: target
  })
  const checkoutRequest = (overrides: Partial<CheckoutRequest> = {}): CheckoutRequest => ({
    reference: ref("chk"),
    mode: "payment",
    amount: 5_000,
    currency: "USD",
    email: "ada@example.com",
    description: "Pro plan",
    callbackUrl: "https://app.example.com/billing/done",
    providerCustomerId: null,
    metadata: metadata(),
    ...overrides
  })
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
  const runError = async <A>(effect: Effect.Effect<A, ProviderError>): Promise<ProviderError> => {
    const error = await Effect.runPromise(Effect.flip(effect))
    expect(error).toBeInstanceOf(ProviderError)
    return error
  }
  const lastRequest = (method: string, path: string) => {
    const all = fake.requestsTo(method, path)
    expect(all.length).toBeGreaterThan(0)
    return all[all.length - 1]!
  }
  const chargeRequest = (
    method: { token: string; providerCustomerId: string | null },
    overrides: { reference?: string; amount?: number } = {}
  ) => ({
    reference: overrides.reference ?? ref("chg"),
    amount: overrides.amount ?? 2_500,
    currency: "USD",
    email: "ada@example.com",
    method: { token: method.token, providerCustomerId: method.providerCustomerId, email: "ada@example.com" },
    metadata: metadata()
  })
  const savedCard = (behavior?: Parameters<FakeStripe["createCustomerWithCard"]>[0]) => {
    const { customer, paymentMethod } = fake.createCustomerWithCard(behavior)
    return { token: paymentMethod["id"] as string, providerCustomerId: customer["id"] as string }
  }

  describe("createCheckout", () => {
    test("payment mode: line item, saved-card intent data, customer creation, reference, metadata, idempotency key", async () => {
      const request = checkoutRequest()
      const result = await run(adapter.createCheckout(account, request))

      const sent = lastRequest("POST", "/v1/checkout/sessions")
      expect(sent.headers["idempotency-key"]).toBe(`${request.reference}:checkout`)
      expect(sent.headers["authorization"]).toBe(`Bearer ${fake.secretKey}`)
      expect(sent.headers["content-type"]).toContain("application/x-www-form-urlencoded")
      expect(sent.rawBody).toContain("line_items[0][price_data][currency]=usd")
      const expectedMetadata = { ...metadata(), reference: request.reference }
      expect(sent.params).toMatchObject({
        mode: "payment",
        line_items: [
          { quantity: "1", price_data: { currency: "usd", unit_amount: "5000", product_data: { name: "Pro plan" } } }
        ],
        payment_intent_data: { setup_future_usage: "off_session", metadata: expectedMetadata },
        customer_creation: "always",
        customer_email: "ada@example.com",
        client_reference_id: request.reference,
        success_url: "https://app.example.com/billing/done",
        cancel_url: "https://app.example.com/billing/done",
        metadata: expectedMetadata
      })
      expect(sent.params["customer"]).toBeUndefined()

      const session = fake.sessions.get(result.accessCode!)!
      expect(session).toBeDefined()
      expect(result).toEqual({
        checkoutUrl: session["url"] as string,
        reference: request.reference,
        accessCode: session["id"] as string
      })
      expect(result.checkoutUrl).toStartWith(`${fake.url}/pay/cs_test_`)
      expect(session["amount_total"]).toBe(5_000)
    })

    test("payment mode with a known customer passes it instead of creating one; no callback uses the default URL", async () => {
      const customer = fake.createCustomerWithCard().customer["id"] as string
      const request = checkoutRequest({ providerCustomerId: customer, callbackUrl: null })
      const result = await run(adapter.createCheckout(account, request))
      const sent = lastRequest("POST", "/v1/checkout/sessions")
      expect(sent.params["customer"]).toBe(customer)
      expect(sent.params["customer_creation"]).toBeUndefined()
      expect(sent.params["customer_email"]).toBeUndefined()
      expect(sent.params["success_url"]).toBe("https://billing.test/return")
      expect(fake.sessions.get(result.accessCode!)!["customer"]).toBe(customer)
    })

    test("the same reference twice replays the first session instead of opening a second", async () => {
      const request = checkoutRequest()
      const before = fake.sessions.size
      const first = await run(adapter.createCheckout(account, request))
      const second = await run(adapter.createCheckout(account, request))
      expect(second).toEqual(first)
      expect(fake.sessions.size).toBe(before + 1)
    })

    test("setup mode without a customer creates one (email, metadata) first, then a setup session", async () => {
      const request = checkoutRequest({
        mode: "setup",
        amount: 0,
        currency: "NGN",
        metadata: { ...metadata(), purpose: "setup" }
      })
      const customersBefore = fake.customers.size
      const result = await run(adapter.createCheckout(account, request))
      expect(fake.customers.size).toBe(customersBefore + 1)

      const createdCustomer = lastRequest("POST", "/v1/customers")
      const expectedMetadata = { ...request.metadata, reference: request.reference }
      expect(createdCustomer.headers["idempotency-key"]).toBe(`${request.reference}:customer`)
      expect(createdCustomer.params).toEqual({ email: "ada@example.com", metadata: expectedMetadata })

      const sent = lastRequest("POST", "/v1/checkout/sessions")
      expect(sent.headers["idempotency-key"]).toBe(`${request.reference}:checkout`)
      const customerId = fake.sessions.get(result.accessCode!)!["customer"]
      expect(customerId).toStartWith("cus_")
      expect(fake.customers.get(customerId as string)!["email"]).toBe("ada@example.com")
      expect(sent.params).toMatchObject({
        mode: "setup",
        currency: "ngn",
        customer: customerId,
        setup_intent_data: { metadata: expectedMetadata },
        client_reference_id: request.reference,
        metadata: expectedMetadata
      })
      expect(sent.params["line_items"]).toBeUndefined()
      expect(sent.params["payment_intent_data"]).toBeUndefined()
    })

    test("setup mode with a known customer creates no customer", async () => {
      const customer = fake.createCustomerWithCard().customer["id"] as string
      const before = fake.requestsTo("POST", "/v1/customers").length
      const result = await run(
        adapter.createCheckout(account, checkoutRequest({ mode: "setup", providerCustomerId: customer }))
      )
      expect(fake.requestsTo("POST", "/v1/customers").length).toBe(before)
      expect(fake.sessions.get(result.accessCode!)!["customer"]).toBe(customer)
    })

    test("a request Stripe refuses is rejected", async () => {
      const error = await runError(
        adapter.createCheckout(account, checkoutRequest({ providerCustomerId: "cus_missing" }))
      )
      expect(error.reason).toBe("rejected")
      expect(error.message).toContain("No such customer")
    })
  })

  describe("charge", () => {
    test("an off-session charge on a saved card succeeds with the PaymentIntent id", async () => {
      const method = savedCard()
      const request = chargeRequest(method)
      const result = await run(adapter.charge(account, request))
      expect(result._tag).toBe("Succeeded")
      const providerReference = (result as { providerReference: string }).providerReference
      expect(providerReference).toStartWith("pi_")
      expect(fake.paymentIntents.get(providerReference)!["status"]).toBe("succeeded")

      const sent = lastRequest("POST", "/v1/payment_intents")
      expect(sent.headers["idempotency-key"]).toBe(`${request.reference}:charge`)
      expect(sent.params).toEqual({
        amount: "2500",
        currency: "usd",
        payment_method: method.token,
        customer: method.providerCustomerId,
        off_session: "true",
        confirm: "true",
        metadata: { ...metadata(), reference: request.reference }
      })
    })

    test("a declined card is Declined with Stripe's message", async () => {
      const result = await run(adapter.charge(account, chargeRequest(savedCard({ behavior: "decline" }))))
      expect(result).toEqual({ _tag: "Declined", message: "Your card was declined." })
    })

    test("authentication_required (402) and a requires_action intent both ask for the customer", async () => {
      const viaError = await run(
        adapter.charge(account, chargeRequest(savedCard({ behavior: "authentication_required" })))
      )
      expect(viaError._tag).toBe("ActionRequired")
      expect((viaError as { message: string }).message).toContain("requires authentication")
      const viaStatus = await run(adapter.charge(account, chargeRequest(savedCard({ behavior: "requires_action" }))))
      expect(viaStatus._tag).toBe("ActionRequired")
    })

    test("a processing intent is Pending", async () => {
      const result = await run(adapter.charge(account, chargeRequest(savedCard({ behavior: "processing" }))))
      expect(result._tag).toBe("Pending")
      expect((result as { providerReference: string }).providerReference).toStartWith("pi_")
    })

    test("a retried charge replays the first; the same reference with other params is a duplicate", async () => {
      const method = savedCard()
      const request = chargeRequest(method)
      const first = await run(adapter.charge(account, request))
      const count = fake.paymentIntents.size
      const again = await run(adapter.charge(account, request))
      expect(again).toEqual(first)
      expect(fake.paymentIntents.size).toBe(count)
      expect(lastRequest("POST", "/v1/payment_intents").status).toBe(200)

      const error = await runError(adapter.charge(account, { ...request, amount: request.amount + 1 }))
      expect(error.reason).toBe("duplicate")
      expect(fake.paymentIntents.size).toBe(count)
    })

    test("a wrong secret is unauthorized and the secret never appears in the error", async () => {
      const wrong = "sk_test_WRONGwrongWRONG123456"
      const error = await runError(adapter.charge({ ...account, secretKey: wrong }, chargeRequest(savedCard())))
      expect(error.reason).toBe("unauthorized")
      expect(lastRequest("POST", "/v1/payment_intents").status).toBe(401)
      expect(error.message).not.toContain(wrong)
      expect(JSON.stringify(error)).not.toContain(wrong)
      expect(String(error)).not.toContain(wrong)
    })

    test("an injected 401 is unauthorized", async () => {
      fake.inject(
        { status: 401, message: `Invalid API Key provided: ${fake.secretKey}` },
        { path: "/v1/payment_intents" }
      )
      const error = await runError(adapter.charge(account, chargeRequest(savedCard())))
      expect(error.reason).toBe("unauthorized")
      expect(error.message).not.toContain(fake.secretKey)
    })

    test("a 5xx is unavailable, without retrying", async () => {
      const before = fake.requestsTo("POST", "/v1/payment_intents").length
      fake.inject({ status: 500 }, { path: "/v1/payment_intents" })
      const error = await runError(adapter.charge(account, chargeRequest(savedCard())))
      expect(error.reason).toBe("unavailable")
      expect(fake.requestsTo("POST", "/v1/payment_intents").length).toBe(before + 1)
    })

    test("the account's rules: amounts under the currency's minimum or over eight digits, and currencies it cannot charge, are rejected", async () => {
      for (const amount of [49, 100_000_000]) {
        const error = await runError(adapter.charge(account, chargeRequest(savedCard(), { amount })))
        expect(error.reason).toBe("rejected")
        expect(error.message).toContain("Amount must be")
      }
      expect((await run(adapter.charge(account, chargeRequest(savedCard(), { amount: 50 }))))._tag).toBe("Succeeded")
      expect((await runError(adapter.createCheckout(account, checkoutRequest({ amount: 30 })))).message).toContain(
        "Amount must be"
      )
      const usdOnly = startFakeStripe({ currencies: ["usd"] })
      try {
        const other = { ...account, secretKey: usdOnly.secretKey, baseUrl: usdOnly.url }
        const error = await runError(adapter.createCheckout(other, checkoutRequest({ currency: "EUR" })))
        expect(error.reason).toBe("rejected")
        expect(error.message).toContain("Invalid currency: eur")
      } finally {
        await usdOnly.stop()
      }
    })

    test("Stripe keeps a 500 under its idempotency key: the retry gets the same 500 and creates nothing", async () => {
      const request = chargeRequest(savedCard())
      fake.inject({ status: 500 }, { method: "POST", path: "/v1/payment_intents" })
      const count = fake.paymentIntents.size
      expect((await runError(adapter.charge(account, request))).reason).toBe("unavailable")
      expect((await runError(adapter.charge(account, request))).reason).toBe("unavailable")
      expect(lastRequest("POST", "/v1/payment_intents").status).toBe(500)
      expect(fake.paymentIntents.size).toBe(count)
    })

    test("idempotency keys are forgotten after 24 hours: the same reference then charges again (references are never reused)", async () => {
      let offset = 0
      const clocked = startFakeStripe({ now: () => Date.now() + offset })
      try {
        const other = {
          ...account,
          secretKey: clocked.secretKey,
          baseUrl: clocked.url,
          webhookSecret: clocked.webhookSecret
        }
        const { customer, paymentMethod } = clocked.createCustomerWithCard()
        const request = chargeRequest({
          token: paymentMethod["id"] as string,
          providerCustomerId: customer["id"] as string
        })
        const first = await run(adapter.charge(other, request))
        offset = 23 * 3_600_000
        expect(await run(adapter.charge(other, request))).toEqual(first)
        expect(clocked.paymentIntents.size).toBe(1)
        offset = 24 * 3_600_000
        const later = await run(adapter.charge(other, request))
        expect(later).not.toEqual(first)
        expect(clocked.paymentIntents.size).toBe(2)
      } finally {
        await clocked.stop()
      }
    })

    test("an answer slower than the timeout is a timeout", async () => {
      const quick = makeStripeAdapter({ timeoutMs: 250 })
      fake.inject({ delayMs: 1_500 }, { path: "/v1/payment_intents" })
      const started = Date.now()
      const error = await runError(quick.charge(account, chargeRequest(savedCard())))
      expect(error.reason).toBe("timeout")
      expect(Date.now() - started).toBeLessThan(1_400)
    })

    test("an unreachable API is unavailable", async () => {
      const dead = Bun.serve({ port: 0, fetch: () => new Response("") })
      const url = `http://127.0.0.1:${dead.port}`
      dead.stop(true)
      const error = await runError(adapter.charge({ ...account, baseUrl: url }, chargeRequest(savedCard())))
      expect(error.reason).toBe("unavailable")
    })

    test("a method Stripe no longer has, or one detached from its customer, is MethodGone; other refusals are rejected", async () => {
      const missing = await run(
        adapter.charge(account, chargeRequest({ token: "pm_missing", providerCustomerId: null }))
      )
      expect(missing).toEqual({ _tag: "MethodGone", message: expect.stringContaining("No such PaymentMethod") })
      const method = savedCard()
      await run(adapter.removeMethod(account, { ...method, email: null }))
      const detached = await run(adapter.charge(account, chargeRequest(method)))
      expect(detached).toEqual({ _tag: "MethodGone", message: expect.stringContaining("may not be used again") })
      const error = await runError(
        adapter.charge(account, chargeRequest({ token: savedCard().token, providerCustomerId: "cus_missing" }))
      )
      expect(error.reason).toBe("rejected")
    })
  })

  describe("verify", () => {
    test("a paid checkout, by our reference and by session id, reports the saved card", async () => {
      const request = checkoutRequest()
      const { accessCode } = await run(adapter.createCheckout(account, request))
      const done = fake.completeCheckout(accessCode!, {
        card: { brand: "mastercard", last4: "4444", expMonth: 7, expYear: 2031, fingerprint: "fpMC4444" }
      })
      const expected = {
        token: done.paymentMethod["id"] as string,
        providerCustomerId: done.customer["id"] as string,
        email: "ada@example.com",
        type: "card",
        brand: "mastercard",
        last4: "4444",
        expMonth: 7,
        expYear: 2031,
        reusable: true,
        fingerprint: "fpMC4444"
      }

      const paid = { amount: request.amount, currency: request.currency.toUpperCase() }
      const byReference = await run(adapter.verify(account, request.reference))
      expect(byReference).toEqual({ status: "succeeded", method: expected, ...paid })
      const search = lastRequest("GET", "/v1/payment_intents/search")
      expect(search.params["query"]).toBe(referenceQuery(request.reference))

      expect(await run(adapter.verify(account, accessCode!))).toEqual({
        status: "succeeded",
        method: expected,
        ...paid
      })
      expect(await run(adapter.verify(account, done.paymentIntent!["id"] as string))).toEqual({
        status: "succeeded",
        method: expected,
        ...paid
      })
    })

    test("a completed setup checkout is found by our reference (no PaymentIntent) and reports the card", async () => {
      const request = checkoutRequest({ mode: "setup" })
      const { accessCode } = await run(adapter.createCheckout(account, request))
      const done = fake.completeCheckout(accessCode!, { card: { last4: "1881" } })
      const result = await run(adapter.verify(account, request.reference))
      expect(result.status).toBe("succeeded")
      expect(result.method).toMatchObject({
        token: done.paymentMethod["id"],
        providerCustomerId: done.customer["id"],
        last4: "1881",
        brand: "visa",
        reusable: true
      })
      expect(await run(adapter.verify(account, done.setupIntent!["id"] as string))).toEqual(result)
    })

    test("an open checkout is pending, a declined one failed, an unknown reference not found", async () => {
      const open = checkoutRequest()
      await run(adapter.createCheckout(account, open))
      expect(await run(adapter.verify(account, open.reference))).toEqual({ status: "pending", method: null })

      const declined = checkoutRequest()
      const { accessCode } = await run(adapter.createCheckout(account, declined))
      fake.completeCheckout(accessCode!, { outcome: "decline" })
      expect(await run(adapter.verify(account, declined.reference))).toMatchObject({ status: "failed", method: null })

      expect(await run(adapter.verify(account, "never_issued"))).toEqual({ status: "not_found", method: null })
    })

    test("search lags behind writes: a new charge is not found by its reference until the lag has passed", async () => {
      let offset = 0
      const laggy = startFakeStripe({ now: () => Date.now() + offset, searchLagMs: 60_000 })
      try {
        const other = { ...account, secretKey: laggy.secretKey, baseUrl: laggy.url, webhookSecret: laggy.webhookSecret }
        const { customer, paymentMethod } = laggy.createCustomerWithCard()
        const request = chargeRequest({
          token: paymentMethod["id"] as string,
          providerCustomerId: customer["id"] as string
        })
        const charged = (await run(adapter.charge(other, request))) as { providerReference: string }
        expect(await run(adapter.verify(other, request.reference))).toEqual({ status: "not_found", method: null })
        // By its own id it is there at once.
        expect((await run(adapter.verify(other, charged.providerReference))).status).toBe("succeeded")
        offset = 60_000
        expect((await run(adapter.verify(other, request.reference))).status).toBe("succeeded")
      } finally {
        await laggy.stop()
      }
    })

    test("an off-session charge is found by its reference", async () => {
      const method = savedCard()
      const request = chargeRequest(method)
      await run(adapter.charge(account, request))
      const result = await run(adapter.verify(account, request.reference))
      expect(result.status).toBe("succeeded")
      expect(result.method?.token).toBe(method.token)
    })

    test("Stripe being down is unavailable", async () => {
      fake.inject({ status: 503 }, { path: "/v1/payment_intents/search" })
      expect((await runError(adapter.verify(account, "whatever"))).reason).toBe("unavailable")
    })
  })

  describe("refund and removeMethod", () => {
    test("refunds a paid checkout by our reference, in part then the rest", async () => {
      const request = checkoutRequest()
      const { accessCode } = await run(adapter.createCheckout(account, request))
      const pi = fake.completeCheckout(accessCode!).paymentIntent!["id"] as string

      await run(adapter.refund(account, request.reference, 1_000))
      let sent = lastRequest("POST", "/v1/refunds")
      expect(sent.params).toEqual({ payment_intent: pi, amount: "1000" })
      expect(sent.headers["idempotency-key"]).toBe(`${request.reference}:refund:1000`)

      await run(adapter.refund(account, pi, null))
      sent = lastRequest("POST", "/v1/refunds")
      expect(sent.params).toEqual({ payment_intent: pi })
      const amounts = [...fake.refunds.values()].filter((r) => r["payment_intent"] === pi).map((r) => r["amount"])
      expect(amounts).toEqual([1_000, 4_000])

      const error = await runError(adapter.refund(account, pi, 1))
      expect(error.reason).toBe("rejected")
    })

    test("a reference with no payment cannot be refunded", async () => {
      const error = await runError(adapter.refund(account, "nothing_here", null))
      expect(error.reason).toBe("rejected")
    })

    test("removeMethod detaches the PaymentMethod", async () => {
      const method = savedCard()
      await run(adapter.removeMethod(account, { ...method, email: null }))
      expect(lastRequest("POST", `/v1/payment_methods/${method.token}/detach`).status).toBe(200)
      expect(fake.paymentMethods.get(method.token)!["customer"]).toBeNull()
      expect((await runError(adapter.removeMethod(account, { ...method, email: null }))).reason).toBe("rejected")
    })
  })

  describe("verifySignature", () => {
    const object = { id: "pi_sig", object: "payment_intent", metadata: { reference: "r1" } }
    const check = (
      rawBody: Uint8Array,
      headers: Record<string, string | undefined>,
      nowMs = Date.now(),
      acct = account
    ) => run(adapter.verifySignature(acct, rawBody, headers, nowMs))

    test("a genuine event passes, whatever the header's case", async () => {
      const signed = await fake.event("payment_intent.succeeded", object)
      expect(await check(signed.rawBody, signed.headers)).toBe(true)
      expect(await check(signed.rawBody, { "Stripe-Signature": signed.headers["stripe-signature"] })).toBe(true)
    })

    test("a tampered body fails", async () => {
      const signed = await fake.event("payment_intent.succeeded", object)
      const tampered = new TextEncoder().encode(signed.payload.replace('"r1"', '"r2"'))
      expect(tampered).not.toEqual(signed.rawBody)
      expect(await check(tampered, signed.headers)).toBe(false)
    })

    test("a signature by another secret fails", async () => {
      const signed = await fake.event("payment_intent.succeeded", object, { secret: "whsec_someone_else" })
      expect(await check(signed.rawBody, signed.headers)).toBe(false)
    })

    test("no secret or no header fails", async () => {
      const signed = await fake.event("payment_intent.succeeded", object)
      expect(await check(signed.rawBody, signed.headers, Date.now(), { ...account, webhookSecret: null })).toBe(false)
      expect(await check(signed.rawBody, {})).toBe(false)
      expect(await check(signed.rawBody, { "stripe-signature": "garbage" })).toBe(false)
    })

    test("the 300 s tolerance is measured against nowMs", async () => {
      const now = Date.now()
      const old = await fake.event("payment_intent.succeeded", object, { timestamp: Math.floor(now / 1000) - 301 })
      expect(await check(old.rawBody, old.headers, now)).toBe(false)
      const edge = await fake.event("payment_intent.succeeded", object, { timestamp: Math.floor(now / 1000) - 299 })
      expect(await check(edge.rawBody, edge.headers, now)).toBe(true)
      // The same old event, checked as if received when it was signed.
      expect(await check(old.rawBody, old.headers, now - 301_000)).toBe(true)
      const future = await fake.event("payment_intent.succeeded", object, { timestamp: Math.floor(now / 1000) + 600 })
      expect(await check(future.rawBody, future.headers, now)).toBe(false)
    })

    test("any one valid v1 among several passes; none valid fails", async () => {
      const bogus = "a".repeat(64)
      const signed = await fake.event("payment_intent.succeeded", object, { extraSignatures: [bogus, "b".repeat(64)] })
      expect(signed.headers["stripe-signature"]!.match(/v1=/g)!.length).toBe(3)
      expect(await check(signed.rawBody, signed.headers)).toBe(true)
      const t = /t=(\d+)/.exec(signed.headers["stripe-signature"]!)![1]
      expect(await check(signed.rawBody, { "stripe-signature": `t=${t},v1=${bogus},v1=${"c".repeat(64)}` })).toBe(false)
    })
  })

  describe("parseEvent", () => {
    const parse = (rawBody: Uint8Array) => run(adapter.parseEvent(rawBody))
    const parseError = (rawBody: Uint8Array) => runError(adapter.parseEvent(rawBody))
    const encode = (value: unknown) =>
      new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value))

    test("checkout.session.completed (payment) is PaymentSucceeded, without a method: the event names its intent by id", async () => {
      const request = checkoutRequest({ amount: 12_345, currency: "eur" })
      const { accessCode } = await run(adapter.createCheckout(account, request))
      fake.completeCheckout(accessCode!)
      const signed = await fake.eventFor("checkout.session.completed", accessCode!)
      expect(typeof (signed.event["data"] as any).object.payment_intent).toBe("string")
      const event = await parse(signed.rawBody)
      expect(event).toEqual({
        _tag: "PaymentSucceeded",
        eventKey: signed.event["id"] as string,
        reference: request.reference,
        amount: 12_345,
        currency: "EUR",
        metadata: { ...request.metadata, reference: request.reference },
        method: null
      })
    })

    test("checkout.session.completed (setup) is Ignored; setup_intent.succeeded names the method by id, completeEvent fetches its card", async () => {
      const request = checkoutRequest({ mode: "setup" })
      const { accessCode } = await run(adapter.createCheckout(account, request))
      const done = fake.completeCheckout(accessCode!, {
        card: { brand: "mastercard", last4: "5454", expMonth: 3, expYear: 2032, fingerprint: "fpMC5454" }
      })
      const plain = await fake.eventFor("checkout.session.completed", accessCode!)
      expect(await parse(plain.rawBody)).toEqual({
        _tag: "Ignored",
        eventKey: plain.event["id"] as string,
        type: "checkout.session.completed"
      })

      const si = await fake.eventFor("setup_intent.succeeded", done.setupIntent!["id"] as string)
      expect((si.event["data"] as any).object.payment_method).toBe(done.paymentMethod["id"])
      const parsed = await parse(si.rawBody)
      const bare = {
        token: done.paymentMethod["id"] as string,
        providerCustomerId: done.customer["id"] as string,
        email: null,
        type: "card",
        brand: null,
        last4: null,
        expMonth: null,
        expYear: null,
        reusable: true,
        fingerprint: null
      }
      expect(parsed).toEqual({
        _tag: "SetupSucceeded",
        eventKey: si.event["id"] as string,
        reference: request.reference,
        metadata: { ...request.metadata, reference: request.reference },
        method: bare
      })
      const completed = await run(adapter.completeEvent(account, parsed))
      expect(completed).toEqual({
        ...(parsed as Extract<ProviderEvent, { _tag: "SetupSucceeded" }>),
        method: {
          ...bare,
          email: "ada@example.com",
          brand: "mastercard",
          last4: "5454",
          expMonth: 3,
          expYear: 2032,
          fingerprint: "fpMC5454"
        }
      })
      expect(lastRequest("GET", `/v1/payment_methods/${done.paymentMethod["id"]}`).status).toBe(200)
      // An event that lacks nothing is not completed.
      const before = fake.requests.length
      expect(await run(adapter.completeEvent(account, completed))).toEqual(completed)
      expect(fake.requests.length).toBe(before)
    })

    test("payment_intent.succeeded is PaymentSucceeded by metadata.reference", async () => {
      const request = chargeRequest(savedCard(), { amount: 777 })
      const result = await run(adapter.charge(account, request))
      const pi = (result as { providerReference: string }).providerReference
      const signed = await fake.eventFor("payment_intent.succeeded", pi)
      expect(await parse(signed.rawBody)).toEqual({
        _tag: "PaymentSucceeded",
        eventKey: signed.event["id"] as string,
        reference: request.reference,
        amount: 777,
        currency: "USD",
        metadata: { ...request.metadata, reference: request.reference },
        method: null
      })
    })

    test("payment_intent.payment_failed is PaymentFailed with the decline message", async () => {
      const request = checkoutRequest()
      const { accessCode } = await run(adapter.createCheckout(account, request))
      const done = fake.completeCheckout(accessCode!, { outcome: "decline" })
      const signed = await fake.eventFor("payment_intent.payment_failed", done.paymentIntent!["id"] as string)
      expect(await parse(signed.rawBody)).toEqual({
        _tag: "PaymentFailed",
        eventKey: signed.event["id"] as string,
        reference: request.reference,
        message: "Your card was declined.",
        metadata: { ...request.metadata, reference: request.reference }
      })
    })

    test("charge.refunded is a running total per charge; without our reference in its metadata, completeEvent asks the PaymentIntent", async () => {
      const method = savedCard()
      const request = chargeRequest(method, { amount: 3_000 })
      const pi = ((await run(adapter.charge(account, request))) as { providerReference: string }).providerReference
      const chargeId = fake.paymentIntents.get(pi)!["latest_charge"] as string
      fake.refund(pi, 1_000)
      const signed = await fake.eventFor("charge.refunded", chargeId)
      const expected: ProviderEvent = {
        _tag: "Refunded",
        eventKey: signed.event["id"] as string,
        reference: request.reference,
        providerPaymentId: pi,
        cause: "refund",
        reversalKey: `charge:${chargeId}`,
        amount: 1_000,
        cumulative: true,
        currency: "USD",
        metadata: { ...request.metadata, reference: request.reference }
      }
      expect(await parse(signed.rawBody)).toEqual(expected)
      // A charge whose metadata does not carry ours (made before it was set): the payment is named by id only.
      const bare = await fake.event("charge.refunded", { ...fake.charges.get(chargeId)!, metadata: {} })
      const parsed = await parse(bare.rawBody)
      expect(parsed).toMatchObject({ _tag: "Refunded", reference: null, providerPaymentId: pi })
      expect(await run(adapter.completeEvent(account, parsed))).toEqual({
        ...expected,
        eventKey: bare.event["id"] as string
      })
    })

    test("disputes name the payment by id: created is Disputed, closed lost is a Refunded of the disputed amount, won is Ignored", async () => {
      const request = chargeRequest(savedCard(), { amount: 4_200 })
      const pi = ((await run(adapter.charge(account, request))) as { providerReference: string }).providerReference
      const dispute = fake.openDispute(pi)
      const created = await parse((await fake.eventFor("charge.dispute.created", dispute["id"] as string)).rawBody)
      expect(created).toMatchObject({ _tag: "Disputed", reference: null, providerPaymentId: pi, metadata: {} })
      expect(await run(adapter.completeEvent(account, created))).toMatchObject({
        _tag: "Disputed",
        reference: request.reference
      })
      fake.closeDispute(dispute["id"] as string, "lost")
      const lost = await parse((await fake.eventFor("charge.dispute.closed", dispute["id"] as string)).rawBody)
      expect(lost).toMatchObject({
        _tag: "Refunded",
        providerPaymentId: pi,
        cause: "dispute",
        reversalKey: `dispute:${dispute["id"]}`,
        amount: 4_200,
        cumulative: false,
        currency: "USD"
      })
      fake.closeDispute(dispute["id"] as string, "won")
      const won = await fake.eventFor("charge.dispute.closed", dispute["id"] as string)
      expect(await parse(won.rawBody)).toEqual({
        _tag: "Ignored",
        eventKey: won.event["id"] as string,
        type: "charge.dispute.closed"
      })
    })

    test("other types, and objects that are not ours, are Ignored", async () => {
      const other = await fake.event("customer.created", { id: "cus_x", object: "customer" })
      expect(await parse(other.rawBody)).toEqual({
        _tag: "Ignored",
        eventKey: other.event["id"] as string,
        type: "customer.created"
      })
      const foreign = await fake.event("payment_intent.succeeded", {
        id: "pi_x",
        object: "payment_intent",
        amount: 1,
        currency: "usd",
        metadata: {}
      })
      expect((await parse(foreign.rawBody))._tag).toBe("Ignored")
    })

    test("malformed events are rejected", async () => {
      expect((await parseError(encode("{not json"))).reason).toBe("rejected")
      expect((await parseError(encode([1, 2]))).reason).toBe("rejected")
      expect((await parseError(encode({ id: "evt_1", type: "payment_intent.succeeded" }))).reason).toBe("rejected")
      expect((await parseError(encode({ type: "payment_intent.succeeded", data: { object: {} } }))).reason).toBe(
        "rejected"
      )
      const noCurrency = {
        id: "evt_2",
        type: "payment_intent.succeeded",
        data: { object: { id: "pi_1", amount: 5, metadata: { reference: "r" } } }
      }
      expect((await parseError(encode(noCurrency))).reason).toBe("rejected")
    })

    test("a type we do not handle is Ignored whatever the rest lacks (no id: keyed by the body's hash)", async () => {
      const bare = await parse(encode({ type: "customer.created" }))
      expect(bare).toMatchObject({ _tag: "Ignored", type: "customer.created" })
      expect(bare._tag === "Ignored" && bare.eventKey).toMatch(/^[0-9a-f]{64}$/)
    })

    test("routing reads the type and our organization id without validating the rest", async () => {
      const route = (body: unknown) => run(adapter.routeEvent(encode(body)))
      const noCurrency = {
        type: "payment_intent.succeeded",
        data: { object: { metadata: { organization_id: "org_1" } } }
      }
      expect(await route(noCurrency)).toEqual({
        type: "payment_intent.succeeded",
        handled: true,
        organizationId: "org_1"
      })
      expect(await route({ type: "customer.created", data: 5 })).toEqual({
        type: "customer.created",
        handled: false,
        organizationId: null
      })
      for (const bad of ["{not json", [1], { data: {} }]) {
        expect((await runError(adapter.routeEvent(encode(bad)))).reason).toBe("rejected")
      }
    })
  })
})
