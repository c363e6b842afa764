import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option, Redacted } from "effect"
import { createHmac } from "node:crypto"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { SIGNATURE_HEADER, sign } from "../../src/payments/simulated/SimulatedAdapter.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * decisions.md §8 on sandbox: a flow naming a provider the organization has no account for is served by the
 * managed test account of that provider, else by the simulated provider; webhooks are verified, then routed, then
 * validated; a provider with no secret to verify against answers 401; no signed body is a 500.
 */
const catalog = (provider: string) => ({
  features: [{ slug: "images", name: "Images", type: "metered" }],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "images", creditCost: 1 }] }],
  creditPacks: [
    { slug: "small", name: "Small", credits: 100, price: 50000, currency: "NGN", creditSystem: "credits", provider }
  ],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 250000,
      currency: "NGN",
      interval: "monthly",
      provider,
      features: [{ slug: "images", limit: 10 }]
    }
  ]
})

const MANAGED_PAYSTACK = "sk_test_managed_paystack"
const MANAGED_STRIPE_WHSEC = "whsec_managed"

const paystackSigned = (secret: string, event: unknown) => {
  const body = JSON.stringify(event)
  return {
    body,
    headers: {
      "content-type": "application/json",
      "x-paystack-signature": createHmac("sha512", secret).update(body).digest("hex")
    }
  }
}

const stripeSigned = (secret: string, event: unknown) => {
  const body = JSON.stringify(event)
  const t = Math.floor(Date.now() / 1000)
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex")
  return { body, headers: { "content-type": "application/json", "stripe-signature": `t=${t},v1=${v1}` } }
}

for (const database of databases()) {
  describe(`sandbox flows without the organization's own account on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const customer = async (provider: string) => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog(provider))
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      return org
    }

    for (const provider of ["paystack", "stripe"]) {
      test(`a pack naming ${provider}, with no account of it anywhere, is sold through the simulated provider`, async () => {
        const org = await customer(provider)
        const bought = await post(server, org.apiKey, "/v1/addon", { customer: "buyer", pack: "small" })
        expect(bought.status).toBe(200)
        expect(bought.body).toMatchObject({ success: true, requiresCheckout: true })
        expect(new URL(bought.body.checkoutUrl).pathname).toStartWith(`/simulated/checkout/${org.id}/`)
        // The whole flow completes: the credits arrive.
        const done = await fetch(server.baseUrl + new URL(bought.body.checkoutUrl).pathname, { method: "POST" })
        expect(done.status).toBe(200)
        const check = await post(server, org.apiKey, "/v1/check", { customer: "buyer", feature: "images", value: 1 })
        expect(check.body).toMatchObject({ allowed: true, credits: { addonBalance: 100 } })
      })
    }

    test("a plan naming paystack, with no account of it anywhere, is sold through the simulated provider", async () => {
      const org = await customer("paystack")
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "buyer", product: "pro" })
      expect(attached.status).toBe(200)
      expect(attached.body.subscription.status).toBe("pending")
      expect(attached.body.checkoutUrl).toContain(`/simulated/checkout/${org.id}/`)
    })

    test("webhooks of a supported provider with no secret to verify against are 401 invalid_signature", async () => {
      const org = await server.createOrg()
      const event = { event: "charge.success", data: { reference: "r-1", amount: 100, currency: "NGN" } }
      for (const path of [
        `/webhooks/${org.slug}/paystack`,
        `/webhooks/${org.slug}`,
        `/webhooks/${org.id}/stripe`,
        "/webhooks/sandbox/paystack",
        "/webhooks/sandbox/stripe"
      ]) {
        const response = await server.fetch(path, {
          method: "POST",
          body: JSON.stringify(event),
          headers: { "x-paystack-signature": "ab".repeat(64), "stripe-signature": "t=1,v1=00" }
        })
        expect({ path, status: response.status }).toEqual({ path, status: 401 })
        expect(await response.json()).toMatchObject({ success: false, code: "invalid_signature" })
      }
      // Unknown names stay what they are.
      expect(
        await (await server.fetch(`/webhooks/${org.slug}/paypal`, { method: "POST", body: "{}" })).json()
      ).toMatchObject({ code: "provider_not_supported" })
      expect(
        await (await server.fetch("/webhooks/sandbox/paypal", { method: "POST", body: "{}" })).json()
      ).toMatchObject({ code: "provider_not_supported" })
      expect(
        await (await server.fetch("/webhooks/no-such-org-here/paystack", { method: "POST", body: "{}" })).json()
      ).toMatchObject({ code: "organization_not_found" })
    })

    describe("the simulated provider's signed webhooks", () => {
      const secret = () =>
        server.run(Effect.map(ProviderAccounts, (a) => Option.getOrThrow(a.managed("simulated")).webhookSecret!))
      const deliver = async (path: string, body: string) => {
        const response = await server.fetch(path, {
          method: "POST",
          body,
          headers: { "content-type": "application/json", [SIGNATURE_HEADER]: sign(await secret(), body) }
        })
        return { status: response.status, body: (await response.json()) as any }
      }

      test("an event of a type it does not handle is 200 skipped, on either route, whatever its data", async () => {
        const org = await server.createOrg()
        const metadata = { organization_id: org.id }
        const unknown = [
          { id: "sim_evt_u1", type: "refund.created" },
          { id: "sim_evt_u2", type: "refund.created", data: null },
          { id: "sim_evt_u3", type: "refund.created", data: { metadata } },
          { id: "sim_evt_u4", type: "refund.created", data: { reference: 7, metadata } },
          { type: "dispute.opened", data: { metadata } }
        ]
        for (const event of unknown) {
          for (const path of ["/webhooks/sandbox/simulated", `/webhooks/${org.slug}/simulated`]) {
            const answer = await deliver(path, JSON.stringify(event))
            expect({ path, event, ...answer }).toEqual({
              path,
              event,
              status: 200,
              body: { success: true, received: true, skipped: true }
            })
          }
        }
      })

      test("on the sandbox route, an event it cannot route is 200 skipped before its body is validated", async () => {
        const unroutable = [
          { id: "sim_evt_r1", type: "payment.succeeded", data: { reference: "r-1", amount: 100 } },
          { id: "sim_evt_r2", type: "payment.succeeded", data: { metadata: { organization_id: "org_nobody" } } },
          { id: "sim_evt_r3", type: "setup.succeeded", data: { metadata: {} } },
          { id: "sim_evt_r4", type: "payment.failed" }
        ]
        for (const event of unroutable) {
          expect(await deliver("/webhooks/sandbox/simulated", JSON.stringify(event))).toEqual({
            status: 200,
            body: { success: true, received: true, skipped: true }
          })
        }
        for (const raw of ["not json", "[]", "null", '"x"', "{}"]) {
          expect(await deliver("/webhooks/sandbox/simulated", raw)).toMatchObject({
            status: 200,
            body: { skipped: true }
          })
        }
      })

      test("a routable event of a handled type with a malformed body is 400; no signed body is a 500", async () => {
        const org = await server.createOrg()
        const metadata = { organization_id: org.id }
        const malformed = [
          { id: "sim_evt_m1", type: "payment.succeeded", data: { metadata } },
          {
            id: "sim_evt_m2",
            type: "payment.succeeded",
            data: { reference: "r", amount: "100", currency: "NGN", metadata }
          },
          {
            id: "sim_evt_m3",
            type: "payment.succeeded",
            data: { reference: { x: 1 }, amount: 100, currency: "NGN", metadata }
          },
          { id: "sim_evt_m4", type: "setup.succeeded", data: { reference: "r", metadata } },
          { id: "sim_evt_m5", type: "setup.succeeded", data: { reference: "r", metadata, method: { token: 5 } } },
          { type: "payment.failed", data: { reference: "r", metadata } }
        ]
        for (const event of malformed) {
          for (const path of ["/webhooks/sandbox/simulated", `/webhooks/${org.slug}/simulated`]) {
            const answer = await deliver(path, JSON.stringify(event))
            expect({ path, event, status: answer.status, code: answer.body.code }).toEqual({
              path,
              event,
              status: 400,
              code: "invalid_request"
            })
          }
        }
        // Strings no database can hold or compare: U+0000, an unpaired surrogate.
        for (const bad of ["a\u0000b", "\ud800"]) {
          const events = [
            { id: bad, type: "payment.succeeded", data: { reference: "r", amount: 1, currency: "NGN", metadata } },
            {
              id: "sim_evt_n1",
              type: "payment.succeeded",
              data: { reference: bad, amount: 1, currency: "NGN", metadata }
            },
            { id: "sim_evt_n2", type: bad, data: { metadata } },
            {
              id: "sim_evt_n3",
              type: "payment.succeeded",
              data: { reference: "r", amount: 1, currency: "NGN", metadata: { organization_id: bad } }
            }
          ]
          for (const event of events) {
            for (const path of ["/webhooks/sandbox/simulated", `/webhooks/${org.slug}/simulated`]) {
              const answer = await deliver(path, JSON.stringify(event))
              expect({ path, event, ok: answer.status === 200 || answer.status === 400 }).toEqual({
                path,
                event,
                ok: true
              })
            }
          }
        }
      })
    })
  })

  describe(`the sandbox's managed provider accounts on ${database.name}`, () => {
    let server: TestServer
    let paystack: FakePaystack
    beforeAll(async () => {
      paystack = startFakePaystack({ secretKey: MANAGED_PAYSTACK })
      server = await startServer({
        ...database.config,
        sandboxAccounts: {
          paystack: Option.some(Redacted.make(MANAGED_PAYSTACK)),
          stripe: Option.some(Redacted.make("sk_test_managed_stripe")),
          stripeWebhookSecret: Option.some(Redacted.make(MANAGED_STRIPE_WHSEC))
        },
        providerBaseUrls: { paystack: Option.some(paystack.baseUrl), stripe: Option.none() }
      })
    })
    afterAll(async () => {
      await server.close()
      await paystack.stop()
    })

    test("a pack naming paystack, with no account of the organization's, is sold through the managed account", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog("paystack"))
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const bought = await post(server, org.apiKey, "/v1/addon", { customer: "buyer", pack: "small" })
      expect(bought.status).toBe(200)
      expect(bought.body.checkoutUrl).toStartWith(paystack.baseUrl)
    })

    test("a signed event without organization metadata is skipped, even when a field its handler needs is missing", async () => {
      const noCurrency = paystackSigned(MANAGED_PAYSTACK, {
        event: "charge.success",
        data: { id: 1, reference: "r-1", amount: 100 }
      })
      const paystackAnswer = await server.fetch("/webhooks/sandbox/paystack", {
        method: "POST",
        body: noCurrency.body,
        headers: noCurrency.headers
      })
      expect({ status: paystackAnswer.status, body: await paystackAnswer.json() }).toEqual({
        status: 200,
        body: { success: true, received: true, skipped: true }
      })
      const stripeEvent = stripeSigned(MANAGED_STRIPE_WHSEC, {
        id: "evt_1",
        type: "payment_intent.succeeded",
        data: { object: { id: "pi_1", amount: 100, metadata: { reference: "r-1" } } }
      })
      const stripeAnswer = await server.fetch("/webhooks/sandbox/stripe", {
        method: "POST",
        body: stripeEvent.body,
        headers: stripeEvent.headers
      })
      expect({ status: stripeAnswer.status, body: await stripeAnswer.json() }).toEqual({
        status: 200,
        body: { success: true, received: true, skipped: true }
      })
      // An unknown organization cannot be routed either.
      const stranger = paystackSigned(MANAGED_PAYSTACK, {
        event: "charge.success",
        data: { reference: "r-2", metadata: { organization_id: "org_nobody" } }
      })
      const strangerAnswer = await server.fetch("/webhooks/sandbox/paystack", {
        method: "POST",
        body: stranger.body,
        headers: stranger.headers
      })
      expect(await strangerAnswer.json()).toEqual({ success: true, received: true, skipped: true })
    })

    test("the same event naming a known organization is routed, then refused as malformed: 400", async () => {
      const org = await server.createOrg()
      const noCurrency = paystackSigned(MANAGED_PAYSTACK, {
        event: "charge.success",
        data: { id: 2, reference: "r-3", amount: 100, metadata: { organization_id: org.id } }
      })
      const answer = await server.fetch("/webhooks/sandbox/paystack", {
        method: "POST",
        body: noCurrency.body,
        headers: noCurrency.headers
      })
      expect(answer.status).toBe(400)
      expect(await answer.json()).toMatchObject({ success: false, code: "invalid_request" })
      const stripeEvent = stripeSigned(MANAGED_STRIPE_WHSEC, {
        id: "evt_2",
        type: "payment_intent.succeeded",
        data: { object: { id: "pi_2", amount: 100, metadata: { reference: "r-4", organization_id: org.id } } }
      })
      const stripeAnswer = await server.fetch("/webhooks/sandbox/stripe", {
        method: "POST",
        body: stripeEvent.body,
        headers: stripeEvent.headers
      })
      expect(stripeAnswer.status).toBe(400)
      await stripeAnswer.text()
    })

    test("an event type the provider's adapter does not handle is skipped, whatever else it lacks", async () => {
      const org = await server.createOrg()
      const stripeEvent = stripeSigned(MANAGED_STRIPE_WHSEC, { type: "customer.created", data: {} })
      for (const path of ["/webhooks/sandbox/stripe", `/webhooks/${org.slug}/stripe`]) {
        const answer = await server.fetch(path, {
          method: "POST",
          body: stripeEvent.body,
          headers: stripeEvent.headers
        })
        expect({ path, status: answer.status, body: await answer.json() }).toEqual({
          path,
          status: 200,
          body: { success: true, received: true, skipped: true }
        })
      }
    })
  })
}

describe("live deployments", () => {
  test("a pack naming a provider the organization has no account for is 422 provider_not_configured", async () => {
    const server = await startServer({ dataDir: ":memory:", appEnv: "live" })
    try {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog("paystack"))
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const bought = await post(server, org.apiKey, "/v1/addon", { customer: "buyer", pack: "small" })
      expect(bought).toMatchObject({ status: 422, body: { code: "provider_not_configured" } })
      // Webhooks of a provider the organization has no account for: nothing can verify them.
      const hook = await server.fetch(`/webhooks/${org.slug}/paystack`, {
        method: "POST",
        body: "{}",
        headers: { "x-paystack-signature": "00" }
      })
      expect(hook.status).toBe(401)
      expect(await hook.json()).toMatchObject({ code: "invalid_signature" })
      expect((await server.fetch(`/webhooks/${org.slug}/simulated`, { method: "POST", body: "{}" })).status).toBe(404)
    } finally {
      await server.close()
    }
  })
})
