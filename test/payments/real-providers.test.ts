import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { Invoices } from "../../src/billing/Invoices.ts"
import { Payments } from "../../src/payments/Payments.ts"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * The service against fakes that behave as the providers document (issue 13, items 11–13): events carry only what
 * the providers' events carry, accounts refuse what the providers refuse. On every database.
 */
const PUBLIC_URL = "https://billing.example.test"

const catalog = (provider: string, currency: string) => ({
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "tokens", creditCost: 1 }] }],
  creditPacks: [
    { slug: "pack", name: "Pack", credits: 100, price: 10000, currency, creditSystem: "credits", provider }
  ],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 250000,
      currency,
      interval: "monthly",
      provider,
      features: [{ slug: "tokens", limit: 10 }]
    }
  ]
})

for (const db of databases()) {
  describe(`against the real providers (${db.name})`, () => {
    let server: TestServer
    let stripe: FakeStripe
    let paystack: FakePaystack
    const time = makeShiftedClock()

    beforeAll(async () => {
      // Provider calls give up after 1 s here, so an answer can be lost in a test's time.
      server = await startServer(
        { ...db.config, publicUrl: PUBLIC_URL, providerTimeoutMs: 1000 },
        { clock: time.clock }
      )
      stripe = startFakeStripe({ now: time.now }) // signs events at the application's (movable) time
      paystack = startFakePaystack({ currencies: ["NGN", "GHS", "USD", "KES"] })
    })
    afterAll(async () => {
      await stripe.stop()
      await paystack.stop()
      await server.close()
    })

    const orgWith = async (provider: "stripe" | "paystack", currency: string, stripeFake: FakeStripe = stripe) => {
      const org = await server.createOrg()
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          provider === "stripe"
            ? a.set(org.id, "stripe", {
                secretKey: stripeFake.secretKey,
                webhookSecret: stripeFake.webhookSecret,
                baseUrl: stripeFake.url
              })
            : a.set(org.id, "paystack", {
                secretKey: paystack.secretKey,
                webhookSecret: null,
                baseUrl: paystack.baseUrl
              })
        )
      )
      await syncCatalog(server, org.apiKey, catalog(provider, currency))
      await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      return { org, get, call: (path: string, body: unknown) => post(server, org.apiKey, path, body) }
    }

    const deliver = async (
      orgSlug: string,
      provider: string,
      hook: { payload?: string; body?: string; headers: Readonly<Record<string, string>> }
    ) => {
      const response = await server.fetch(`/webhooks/${orgSlug}/${provider}`, {
        method: "POST",
        body: hook.payload ?? hook.body!,
        headers: hook.headers
      })
      const body = (await response.json()) as any
      expect({ status: response.status, body }).toMatchObject({ status: 200 })
      return body as { skipped: boolean }
    }

    const sessionOf = (reference: string) =>
      [...stripe.sessions.values()].find((s) => s["client_reference_id"] === reference)!

    test("Stripe setup mode: the card's details are fetched (events name the method by id), and the same card is saved once", async () => {
      const { org, call, get } = await orgWith("stripe", "USD")
      const card = { brand: "mastercard", last4: "5454", expMonth: 3, expYear: 2032, fingerprint: "fp_ada_mc" }
      for (let round = 0; round < 2; round++) {
        const setup = await call("/v1/wallet/setup", { customer: "ada", provider: "stripe" })
        expect(setup.status).toBe(200)
        const done = stripe.completeCheckout(sessionOf(setup.body.reference)["id"] as string, { card })
        const event = await stripe.eventFor("setup_intent.succeeded", done.setupIntent!["id"] as string)
        expect(await deliver(org.slug, "stripe", event)).toMatchObject({ skipped: false })
      }
      const wallet = await get("/v1/wallet?customer=ada")
      expect(wallet.paymentMethods).toEqual([
        expect.objectContaining({
          provider: "stripe",
          type: "card",
          brand: "mastercard",
          last4: "5454",
          expMonth: 3,
          expYear: 2032
        })
      ])
    })

    test("a Paystack card setup charges the currency's minimum in that currency, and refunds it", async () => {
      const { org, call, get } = await orgWith("paystack", "NGN")
      for (const [currency, amount] of [
        ["GHS", 10],
        ["USD", 200],
        ["KES", 300]
      ] as const) {
        const setup = await call("/v1/wallet/setup", { customer: "ada", provider: "paystack", currency })
        expect(setup.status).toBe(200)
        expect(paystack.transactions.get(setup.body.reference)).toMatchObject({ amount, currency, channels: ["card"] })
        expect(await deliver(org.slug, "paystack", paystack.complete(setup.body.reference))).toMatchObject({
          skipped: false
        })
        expect(paystack.refunds.filter((r) => r.transactionReference === setup.body.reference)).toEqual([
          expect.objectContaining({ amount, currency })
        ])
      }
      // The same card each time: one saved method.
      expect((await get("/v1/wallet?customer=ada")).paymentMethods).toHaveLength(1)
    })

    const openInvoice = (orgId: string, customerId: string, currency: string, amount: number) =>
      server.run(
        Effect.flatMap(Invoices, (invoices) =>
          invoices.createInvoice(orgId, customerId, currency, [
            {
              feature: "tokens",
              description: "Overage",
              quantity: 1,
              unitPrice: String(amount),
              amount: BigDecimal.unsafeFromString(String(amount)),
              periodStart: 0,
              periodEnd: 0
            }
          ])
        )
      )

    for (const provider of ["paystack", "stripe"] as const) {
      test(`${provider}: a saved method the provider refuses as gone is dropped, and the same payment falls back to a checkout`, async () => {
        const { org, call, get } = await orgWith(provider, provider === "stripe" ? "USD" : "NGN")
        const customer = await get("/v1/customers/ada")
        const setup = await call("/v1/wallet/setup", { customer: "ada", provider })
        if (provider === "paystack") {
          const saved = paystack.complete(setup.body.reference)
          await deliver(org.slug, "paystack", saved)
          // Deactivated at Paystack (by the customer's bank, or another integration of the vendor's).
          paystack.authorizations.get(saved.authorizationCode)!.active = false
        } else {
          const done = stripe.completeCheckout(sessionOf(setup.body.reference)["id"] as string)
          await deliver(
            org.slug,
            "stripe",
            await stripe.eventFor("setup_intent.succeeded", done.setupIntent!["id"] as string)
          )
          stripe.paymentMethods.get(done.paymentMethod["id"] as string)!["customer"] = null // detached elsewhere
        }
        expect((await get("/v1/wallet?customer=ada")).paymentMethods).toHaveLength(1)
        const invoice = await openInvoice(org.id, customer.id, provider === "stripe" ? "USD" : "NGN", 70000)
        const paid = await call(`/v1/billing/invoice/${invoice.id}/pay`, {})
        expect(paid).toMatchObject({ status: 200, body: { paid: false, code: "checkout_required" } })
        expect(paid.body.checkoutUrl).toStartWith(provider === "stripe" ? stripe.url : paystack.baseUrl)
        expect((await get("/v1/wallet?customer=ada")).paymentMethods).toEqual([])
      })
    }

    test("the reconciler waits for Stripe's search, which lags behind writes, before it settles a lost answer", async () => {
      // This Stripe account's search sees a PaymentIntent five minutes (of the application's clock) after it is made.
      const laggy = startFakeStripe({ now: time.now, searchLagMs: 5 * 60_000 })
      try {
        const { org, call, get } = await orgWith("stripe", "USD", laggy)
        const customer = await get("/v1/customers/ada")
        const setup = await call("/v1/wallet/setup", { customer: "ada", provider: "stripe" })
        const session = [...laggy.sessions.values()].find((x) => x["client_reference_id"] === setup.body.reference)!
        const done = laggy.completeCheckout(session["id"] as string)
        await deliver(
          org.slug,
          "stripe",
          await laggy.eventFor("setup_intent.succeeded", done.setupIntent!["id"] as string)
        )
        const invoice = await openInvoice(org.id, customer.id, "USD", 70000)

        laggy.inject({ delayMs: 1500 }, { method: "POST", path: "/v1/payment_intents" })
        expect((await call(`/v1/billing/invoice/${invoice.id}/pay`, {})).body).toMatchObject({
          code: "payment_processing"
        })
        await Bun.sleep(800) // the fake finishes the charge the service gave up waiting for
        expect(laggy.paymentIntents.size).toBe(1)
        const invoiceStatus = async () => (await get("/v1/billing/invoices?customer=ada")).invoices[0].status as string

        time.advance(2 * 60_000)
        expect(await server.run(Effect.flatMap(Payments, (p) => p.reconcile))).toMatchObject({ stillProcessing: 1 })
        expect(await invoiceStatus()).toBe("open")
        time.advance(4 * 60_000)
        await server.run(Effect.flatMap(Payments, (p) => p.reconcile))
        expect(await invoiceStatus()).toBe("paid")
        expect(laggy.requestsTo("POST", "/v1/payment_intents")).toHaveLength(1)
      } finally {
        await laggy.stop()
      }
    })

    test("Stripe's hosted page returns to PUBLIC_URL when the request names no callback", async () => {
      const { call } = await orgWith("stripe", "USD")
      const attached = await call("/v1/attach", { customer: "ada", product: "pro" })
      const session = [...stripe.sessions.values()].find((s) => s["url"] === attached.body.checkoutUrl)!
      expect(session).toMatchObject({ success_url: `${PUBLIC_URL}/`, cancel_url: `${PUBLIC_URL}/` })
      const sent = stripe.requestsTo("POST", "/v1/checkout/sessions").at(-1)!
      expect(sent.params).toMatchObject({ success_url: `${PUBLIC_URL}/`, cancel_url: `${PUBLIC_URL}/` })
    })

    /** The purchased-credits balance, as check reports it (the customer has no plan granting tokens). */
    const addonBalance = async (call: (path: string, body: unknown) => Promise<{ body: any }>) =>
      ((await call("/v1/check", { customer: "ada", feature: "tokens", value: 0 })).body.credits?.addonBalance ??
        0) as number

    const paymentOf = (orgId: string, reference: string) =>
      server
        .run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ amountRefunded: string; disputed: number }>`SELECT amount_refunded, disputed FROM payments
          WHERE organization_id = ${orgId} AND reference = ${reference}`
          )
        )
        .then((rows) => ({
          amountRefunded: String(rows[0]!.amountRefunded),
          disputed: Number(rows[0]!.disputed) === 1
        }))

    /** A pack bought through Stripe's hosted page: its session, PaymentIntent and Charge. */
    const buyPackOnStripe = async (
      orgSlug: string,
      call: (path: string, body: unknown) => Promise<{ body: any }>,
      quantity: number
    ) => {
      const bought = await call("/v1/addon", { customer: "ada", pack: "pack", quantity })
      expect(bought.body).toMatchObject({ requiresCheckout: true })
      const session = [...stripe.sessions.values()].find((s) => s["url"] === bought.body.checkoutUrl)!
      const done = stripe.completeCheckout(session["id"] as string)
      expect(
        await deliver(orgSlug, "stripe", await stripe.eventFor("checkout.session.completed", session["id"] as string))
      ).toMatchObject({ skipped: false })
      const pi = done.paymentIntent!["id"] as string
      return {
        reference: session["client_reference_id"] as string,
        pi,
        charge: stripe.paymentIntents.get(pi)!["latest_charge"] as string
      }
    }

    test("Stripe refunds take a pack's credits back in proportion, never below zero; a repeated or stale total changes nothing", async () => {
      const { org, call } = await orgWith("stripe", "USD")
      const { reference, pi, charge } = await buyPackOnStripe(org.slug, call, 2)
      expect(await addonBalance(call)).toBe(200)

      stripe.refund(pi, 5000) // a quarter of 20000
      const quarter = await stripe.eventFor("charge.refunded", charge)
      expect(await deliver(org.slug, "stripe", quarter)).toMatchObject({ skipped: false })
      expect(await addonBalance(call)).toBe(150)
      expect(await deliver(org.slug, "stripe", quarter)).toMatchObject({ skipped: true })

      expect((await call("/v1/track", { customer: "ada", feature: "tokens", value: 120 })).body).toMatchObject({
        allowed: true
      })
      expect(await addonBalance(call)).toBe(30)
      stripe.refund(pi) // the rest: 150 credits are owed back, 30 are left, what was spent stays spent
      expect(await deliver(org.slug, "stripe", await stripe.eventFor("charge.refunded", charge))).toMatchObject({
        skipped: false
      })
      expect(await addonBalance(call)).toBe(0)
      // Stripe's events report a running total: an older one arriving late is no new refund.
      const stale = await stripe.event("charge.refunded", { ...stripe.charges.get(charge)!, amount_refunded: 5000 })
      expect(await deliver(org.slug, "stripe", stale)).toMatchObject({ skipped: true })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "20000", disputed: false })
    })

    test("Stripe disputes name the payment by id: opened marks it disputed, lost takes the credits back", async () => {
      const { org, call } = await orgWith("stripe", "USD")
      const { reference, pi } = await buyPackOnStripe(org.slug, call, 1)
      const dispute = stripe.openDispute(pi)
      const opened = await stripe.eventFor("charge.dispute.created", dispute["id"] as string)
      expect(JSON.parse(opened.payload).data.object.metadata).toEqual({})
      expect(await deliver(org.slug, "stripe", opened)).toMatchObject({ skipped: false })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "0", disputed: true })
      expect(await addonBalance(call)).toBe(100)
      stripe.closeDispute(dispute["id"] as string, "lost")
      const lost = await stripe.eventFor("charge.dispute.closed", dispute["id"] as string)
      expect(await deliver(org.slug, "stripe", lost)).toMatchObject({ skipped: false })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "10000", disputed: true })
      expect(await addonBalance(call)).toBe(0)
    })

    test("a dispute whose payment Stripe cannot be asked about is not recorded as received: delivered again, it applies", async () => {
      const { org, call } = await orgWith("stripe", "USD")
      const { reference, pi } = await buyPackOnStripe(org.slug, call, 1)
      const dispute = stripe.openDispute(pi)
      const opened = await stripe.eventFor("charge.dispute.created", dispute["id"] as string)
      stripe.inject({ status: 503 }, { method: "GET", path: "/v1/payment_intents/pi_" })
      const first = await deliver(org.slug, "stripe", opened)
      expect(first).toMatchObject({ received: true, skipped: true, error: expect.stringContaining("deliver it again") })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "0", disputed: false })
      expect(await deliver(org.slug, "stripe", opened)).toMatchObject({ skipped: false })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "0", disputed: true })
    })

    test("a refunded subscription payment keeps its access (decisions.md §7)", async () => {
      const { org, call, get } = await orgWith("stripe", "USD")
      const attached = await call("/v1/attach", { customer: "ada", product: "pro" })
      const session = [...stripe.sessions.values()].find((s) => s["url"] === attached.body.checkoutUrl)!
      const done = stripe.completeCheckout(session["id"] as string)
      await deliver(org.slug, "stripe", await stripe.eventFor("checkout.session.completed", session["id"] as string))
      stripe.refund(done.paymentIntent!["id"] as string)
      const charge = stripe.paymentIntents.get(done.paymentIntent!["id"] as string)!["latest_charge"] as string
      expect(await deliver(org.slug, "stripe", await stripe.eventFor("charge.refunded", charge))).toMatchObject({
        skipped: false
      })
      expect(await paymentOf(org.id, session["client_reference_id"] as string)).toMatchObject({
        amountRefunded: "250000"
      })
      expect((await get("/v1/subscriptions?customer=ada")).subscriptions[0]).toMatchObject({
        plan: "pro",
        status: "active"
      })
      expect((await call("/v1/check", { customer: "ada", feature: "tokens" })).body).toMatchObject({ allowed: true })
    })

    test("Paystack: a refunded invoice stays paid and carries amountRefunded; a lost dispute adds to it, capped at what was paid", async () => {
      const { org, call, get } = await orgWith("paystack", "NGN")
      const customer = await get("/v1/customers/ada")
      const setup = await call("/v1/wallet/setup", { customer: "ada", provider: "paystack" })
      await deliver(org.slug, "paystack", paystack.complete(setup.body.reference))
      const invoice = await openInvoice(org.id, customer.id, "NGN", 120000)
      expect((await call(`/v1/billing/invoice/${invoice.id}/pay`, {})).body).toMatchObject({ paid: true })
      const reference = (
        paystack.requests.filter((r) => r.path === "/transaction/charge_authorization").at(-1)!.body as any
      ).reference as string

      const refunded = (await (
        await fetch(`${paystack.baseUrl}/refund`, {
          method: "POST",
          headers: { authorization: `Bearer ${paystack.secretKey}`, "content-type": "application/json" },
          body: JSON.stringify({ transaction: reference, amount: 20000 })
        })
      ).json()) as any
      const processed = paystack.refundProcessed(refunded.data.id)
      expect(await deliver(org.slug, "paystack", processed)).toMatchObject({ skipped: false })
      expect(await deliver(org.slug, "paystack", processed)).toMatchObject({ skipped: true })
      const listed = async () =>
        (await get("/v1/billing/invoices?customer=ada")).invoices.find((i: any) => i.id === invoice.id)
      expect(await listed()).toMatchObject({ status: "paid", amountPaid: 120000, amountRefunded: 20000 })

      const disputed = paystack.dispute(reference)
      expect(await deliver(org.slug, "paystack", disputed)).toMatchObject({ skipped: false })
      expect(await paymentOf(org.id, reference)).toEqual({ amountRefunded: "20000", disputed: true })
      expect(
        await deliver(org.slug, "paystack", paystack.resolveDispute(disputed.disputeId, "merchant-accepted"))
      ).toMatchObject({ skipped: false })
      expect(await listed()).toMatchObject({ status: "paid", amountRefunded: 120000 })
    })
  })
}
