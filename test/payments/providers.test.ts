import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { startServer, type TestServer } from "../support/harness.ts"

/**
 * The whole flow through the real adapters, each against a fake of its provider's HTTP API: an organization's
 * own account, a hosted checkout, the provider's signed webhook on the organization's route, then an
 * off-session charge on the saved method.
 */
const catalog = (provider: string, currency: string) => ({
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "tokens", creditCost: 1 }] }],
  creditPacks: [{ slug: "pack", name: "Pack", credits: 50, price: 10000, currency, creditSystem: "credits", provider }],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 250000,
      currency,
      interval: "monthly",
      provider,
      features: [{ slug: "tokens", limit: 10 }]
    },
    {
      slug: "max",
      name: "Max",
      price: 450000,
      currency,
      interval: "monthly",
      provider,
      features: [{ slug: "tokens", limit: 99 }]
    }
  ]
})

describe("Paystack end to end", () => {
  let server: TestServer
  let paystack: FakePaystack
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    paystack = startFakePaystack({ secretKey: "sk_test_paystack_fake" })
  })
  afterAll(async () => {
    await paystack.stop()
    await server.close()
  })

  test("checkout, signed webhook, saved authorization, off-session charge, packs", async () => {
    const org = await server.createOrg()
    await server.run(
      Effect.flatMap(ProviderAccounts, (a) =>
        a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
      )
    )
    await syncCatalog(server, org.apiKey, catalog("paystack", "NGN"))
    await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })

    const attached = await post(server, org.apiKey, "/v1/attach", {
      customer: "ada",
      product: "pro",
      callbackUrl: "https://vendor.example/done"
    })
    expect(attached.body.subscription.status).toBe("pending")
    expect(attached.body.checkoutUrl).toStartWith(paystack.baseUrl)
    const [initialized] = [...paystack.transactions.values()]
    expect(initialized).toMatchObject({
      amount: 250000,
      currency: "NGN",
      email: "ada@example.com",
      callbackUrl: "https://vendor.example/done"
    })

    const webhook = paystack.complete(initialized!.reference)
    const forged = await server.fetch(`/webhooks/${org.slug}`, {
      method: "POST",
      body: webhook.body,
      headers: { "x-paystack-signature": "f".repeat(128) }
    })
    expect(forged.status).toBe(401)
    // The first provider's route (`/webhooks/{org}`) is Paystack's.
    const delivered = await server.fetch(`/webhooks/${org.slug}`, {
      method: "POST",
      body: webhook.body,
      headers: webhook.headers
    })
    expect(await delivered.json()).toEqual({ success: true, received: true, skipped: false })
    const replay = await server.fetch(`/webhooks/${org.id}/paystack`, {
      method: "POST",
      body: webhook.body,
      headers: webhook.headers
    })
    expect(await replay.json()).toMatchObject({ skipped: true })

    const subs = (await (await server.fetch("/v1/subscriptions?customer=ada", { apiKey: org.apiKey })).json()) as any
    expect(subs.subscriptions[0]).toMatchObject({ plan: "pro", status: "active" })
    const wallet = (await (await server.fetch("/v1/wallet?customer=ada", { apiKey: org.apiKey })).json()) as any
    expect(wallet.paymentMethods).toHaveLength(1)
    expect(wallet.paymentMethods[0]).toMatchObject({ provider: "paystack", type: "card" })

    // The saved authorization pays the upgrade off-session, with the email it was created with.
    const upgraded = await post(server, org.apiKey, "/v1/attach", { customer: "ada", product: "max" })
    expect(upgraded.body).toMatchObject({ checkoutUrl: null, subscription: { plan: "max", status: "active" } })
    const charge = paystack.requests.find((r) => r.path === "/transaction/charge_authorization")
    expect(charge).toBeDefined()

    // A declined saved card falls back to a checkout; the credits come only with the confirmed payment.
    paystack.failNext({ kind: "decline" } as never)
    const pack = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 3 })
    expect(pack.body).toMatchObject({ requiresCheckout: true, credits: 150, balance: null })
    const packTx = [...paystack.transactions.values()].find((t) => t.amount === 30000 && t.source === "initialize")!
    const packHook = paystack.complete(packTx.reference, { metadataAs: "string" })
    await server.fetch(`/webhooks/${org.slug}/paystack`, {
      method: "POST",
      body: packHook.body,
      headers: packHook.headers
    })
    const check = await post(server, org.apiKey, "/v1/check", { customer: "ada", feature: "tokens", value: 0 })
    expect(check.body.credits).toBeNull() // tokens are granted directly by the plan
    const balance = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack" })
    expect(balance.body).toMatchObject({ requiresCheckout: false, balance: 200 })
  })
})

describe("Paystack card setup", () => {
  test("a setup is a small card charge: the authorization is saved and the charge refunded", async () => {
    const server = await startServer({ dataDir: ":memory:" })
    const paystack = startFakePaystack({ secretKey: "sk_test_paystack_setup" })
    try {
      const org = await server.createOrg()
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      await post(server, org.apiKey, "/v1/customers", { id: "cara", email: "cara@example.com" })
      const setup = await post(server, org.apiKey, "/v1/wallet/setup", { customer: "cara", provider: "paystack" })
      expect(setup.body.url).toStartWith(paystack.baseUrl)
      const transaction = paystack.transactions.get(setup.body.reference)!
      expect(transaction).toMatchObject({ amount: 5000, currency: "NGN", channels: ["card"] })
      const hook = paystack.complete(setup.body.reference)
      const ack = await server.fetch(`/webhooks/${org.slug}/paystack`, {
        method: "POST",
        body: hook.body,
        headers: hook.headers
      })
      expect(await ack.json()).toMatchObject({ received: true, skipped: false })
      expect(paystack.refunds.map((r) => r.transactionReference)).toEqual([setup.body.reference])
      const wallet = (await (await server.fetch("/v1/wallet?customer=cara", { apiKey: org.apiKey })).json()) as any
      expect(wallet.paymentMethods).toMatchObject([{ provider: "paystack", isDefault: true }])
      // Removing it deactivates the authorization at Paystack.
      await post(server, org.apiKey, "/v1/wallet/remove", { customer: "cara", id: wallet.paymentMethods[0].id })
      expect(paystack.requests.some((r) => r.path === "/customer/authorization/deactivate")).toBe(true)
    } finally {
      await paystack.stop()
      await server.close()
    }
  })
})

describe("Stripe end to end", () => {
  let server: TestServer
  let stripe: FakeStripe
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    stripe = startFakeStripe({ secretKey: "sk_test_stripe_fake", webhookSecret: "whsec_fake" })
  })
  afterAll(async () => {
    await stripe.stop()
    await server.close()
  })

  test("checkout session, signed webhook (t/v1), saved card, off-session PaymentIntent", async () => {
    const org = await server.createOrg()
    await server.run(
      Effect.flatMap(ProviderAccounts, (a) =>
        a.set(org.id, "stripe", {
          secretKey: stripe.secretKey,
          webhookSecret: stripe.webhookSecret,
          baseUrl: stripe.url
        })
      )
    )
    await syncCatalog(server, org.apiKey, catalog("stripe", "USD"))
    await post(server, org.apiKey, "/v1/customers", { id: "bo", email: "bo@example.com" })

    const attached = await post(server, org.apiKey, "/v1/attach", { customer: "bo", product: "pro" })
    expect(attached.body.subscription.status).toBe("pending")
    const sessionId = [...stripe.sessions.keys()][0]!
    const completion = stripe.completeCheckout(sessionId)
    const signed = await stripe.event("checkout.session.completed", completion.session)
    const tampered = await server.fetch(`/webhooks/${org.slug}/stripe`, {
      method: "POST",
      body: signed.payload.replace("complete", "completf"),
      headers: signed.headers
    })
    expect(tampered.status).toBe(401)
    const delivered = await server.fetch(`/webhooks/${org.slug}/stripe`, {
      method: "POST",
      body: signed.payload,
      headers: signed.headers
    })
    expect(await delivered.json()).toEqual({ success: true, received: true, skipped: false })
    // Stripe also sends payment_intent.succeeded for the same payment: it takes effect once.
    const intent = await stripe.event("payment_intent.succeeded", completion.paymentIntent!)
    const second = await server.fetch(`/webhooks/${org.slug}/stripe`, {
      method: "POST",
      body: intent.payload,
      headers: intent.headers
    })
    expect(await second.json()).toMatchObject({ received: true, skipped: true })

    const subs = (await (await server.fetch("/v1/subscriptions?customer=bo", { apiKey: org.apiKey })).json()) as any
    expect(subs.subscriptions[0]).toMatchObject({ plan: "pro", status: "active" })
    const wallet = (await (await server.fetch("/v1/wallet?customer=bo", { apiKey: org.apiKey })).json()) as any
    expect(wallet.paymentMethods).toMatchObject([{ provider: "stripe", type: "card" }])

    const upgraded = await post(server, org.apiKey, "/v1/attach", { customer: "bo", product: "max" })
    expect(upgraded.body).toMatchObject({ checkoutUrl: null, subscription: { plan: "max", status: "active" } })
    const intents = stripe.requests.filter((r) => r.method === "POST" && r.path === "/v1/payment_intents")
    expect(intents).toHaveLength(1)
    expect(intents[0]!.headers["idempotency-key"]).toBeString()
    expect(intents[0]!.params).toMatchObject({
      off_session: "true",
      confirm: "true",
      // The upgrade is a change of the subscription (decisions.md §14): at the period's start, Max less Pro's credit.
      amount: "200000",
      currency: "usd"
    })
  })
})
