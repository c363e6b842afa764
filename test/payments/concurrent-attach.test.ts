import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * Concurrent identical attaches of a paid plan (issue 37 item 7): one charge, and every answer describes that one
 * outcome. The request whose charge it was says so; every other waits for it and answers "already attached" with
 * the subscription as the charge left it. Real HTTP against the fake Paystack, on every database.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 250000,
      currency: "NGN",
      interval: "monthly",
      provider: "paystack",
      features: [{ slug: "tokens", limit: 10 }]
    }
  ]
}

const CHARGE = "/transaction/charge_authorization"

for (const db of databases()) {
  describe(`concurrent identical attaches (${db.name})`, () => {
    let server: TestServer
    let paystack: FakePaystack

    beforeAll(async () => {
      server = await startServer({ ...db.config, providerTimeoutMs: 2000 })
      paystack = startFakePaystack({ secretKey: `sk_test_attach_${db.name}` })
    })
    afterAll(async () => {
      await paystack.stop()
      await server.close()
    })

    /** An organization on the fake Paystack with a customer whose card is saved. */
    const customerWithCard = async () => {
      const org = await server.createOrg()
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
      const setup = await post(server, org.apiKey, "/v1/wallet/setup", { customer: "ada", provider: "paystack" })
      expect(setup.status).toBe(200)
      const hook = paystack.complete(setup.body.reference)
      const delivered = await server.fetch(`/webhooks/${org.slug}/paystack`, {
        method: "POST",
        body: hook.body,
        headers: hook.headers
      })
      expect(delivered.status).toBe(200)
      return org
    }

    const charges = () => paystack.requests.filter((r) => r.path === CHARGE).length

    for (const delay of [0, 150]) {
      test(`ten at once${delay > 0 ? `, the provider answering after ${delay} ms` : ""}: one charge, one outcome in every answer`, async () => {
        const org = await customerWithCard()
        const before = charges()
        if (delay > 0) paystack.failNext({ kind: "delay", ms: delay }, { times: 1 })
        const answers = await Promise.all(
          Array.from({ length: 10 }, () => post(server, org.apiKey, "/v1/attach", { customer: "ada", product: "pro" }))
        )
        const summary = JSON.stringify(answers.map((a) => [a.status, a.body.subscription?.status, a.body.message]))
        expect(charges() - before).toBe(1)
        expect(
          answers.map((a) => a.status),
          summary
        ).toEqual(Array(10).fill(200))
        const ids = new Set(answers.map((a) => a.body.subscription.id))
        expect(ids.size, summary).toBe(1)
        expect(
          answers.map((a) => a.body.subscription.status),
          summary
        ).toEqual(Array(10).fill("active"))
        expect(
          answers.every((a) => a.body.checkoutUrl === null),
          summary
        ).toBe(true)
        const messages = answers.map((a) => a.body.message as string)
        expect(
          messages.filter((m) => m === "Attached pro: paid with the saved method"),
          summary
        ).toHaveLength(1)
        expect(
          messages.filter((m) => m === "pro was already attached"),
          summary
        ).toHaveLength(9)
        const subs = (await (
          await server.fetch("/v1/subscriptions?customer=ada", { apiKey: org.apiKey })
        ).json()) as any
        expect(subs.subscriptions.map((s: { status: string }) => s.status)).toEqual(["active"])
      })
    }

    test("ten at once, the card declined: one charge, every answer the same checkout page of the one subscription", async () => {
      const org = await customerWithCard()
      const before = charges()
      paystack.failNext({ kind: "decline", message: "Insufficient funds" }, { times: 1 })
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => post(server, org.apiKey, "/v1/attach", { customer: "ada", product: "pro" }))
      )
      const summary = JSON.stringify(answers.map((a) => [a.status, a.body.subscription?.status, a.body.checkoutUrl]))
      expect(charges() - before, summary).toBe(1)
      expect(
        answers.map((a) => a.status),
        summary
      ).toEqual(Array(10).fill(200))
      expect(new Set(answers.map((a) => a.body.subscription.id)).size, summary).toBe(1)
      expect(
        answers.map((a) => a.body.subscription.status),
        summary
      ).toEqual(Array(10).fill("pending"))
      const pages = new Set(answers.map((a) => a.body.checkoutUrl))
      expect(pages.size, summary).toBe(1)
      expect([...pages][0], summary).toStartWith(paystack.baseUrl)
    })
  })
}
