import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
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
  creditPacks: [{ slug: "pack", name: "Pack", credits: 100, price: 10000, currency, creditSystem: "credits", provider }],
  plans: [
    { slug: "pro", name: "Pro", price: 250000, currency, interval: "monthly", provider, features: [{ slug: "tokens", limit: 10 }] }
  ]
})

for (const db of databases()) {
  describe(`against the real providers (${db.name})`, () => {
    let server: TestServer
    let stripe: FakeStripe
    let paystack: FakePaystack
    const time = makeShiftedClock()

    beforeAll(async () => {
      server = await startServer({ ...db.config, publicUrl: PUBLIC_URL }, { clock: time.clock })
      stripe = startFakeStripe()
      paystack = startFakePaystack()
    })
    afterAll(async () => {
      await stripe.stop()
      await paystack.stop()
      await server.close()
    })

    const orgWith = async (provider: "stripe" | "paystack", currency: string) => {
      const org = await server.createOrg()
      await server.run(Effect.flatMap(ProviderAccounts, (a) =>
        provider === "stripe"
          ? a.set(org.id, "stripe", { secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret, baseUrl: stripe.url })
          : a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })))
      await syncCatalog(server, org.apiKey, catalog(provider, currency))
      await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      return { org, get, call: (path: string, body: unknown) => post(server, org.apiKey, path, body) }
    }

    const deliver = async (orgSlug: string, provider: string, hook: { payload?: string; body?: string; headers: Readonly<Record<string, string>> }) => {
      const response = await server.fetch(`/webhooks/${orgSlug}/${provider}`, {
        method: "POST",
        body: hook.payload ?? hook.body!,
        headers: hook.headers
      })
      const body = await response.json() as any
      expect({ status: response.status, body }).toMatchObject({ status: 200 })
      return body as { skipped: boolean }
    }

    const sessionOf = (reference: string) => [...stripe.sessions.values()].find((s) => s["client_reference_id"] === reference)!

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
        expect.objectContaining({ provider: "stripe", type: "card", brand: "mastercard", last4: "5454", expMonth: 3, expYear: 2032 })
      ])
    })
  })
}
