import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Credits } from "../../src/credits/Credits.ts"
import type { ProviderEvent } from "../../src/payments/PaymentProvider.ts"
import { Payments } from "../../src/payments/Payments.ts"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { SLOW_HOOK_MS, startServer, type TestServer } from "../support/harness.ts"
import { deliveryDatabases } from "./support.ts"

/**
 * Every change of decisions.md §11 writes its event (read back through `GET /v1/events`): customers, subscriptions
 * through their life (attach, checkout, renewal paid or declined, dunning, cancellation), invoices, saved methods,
 * credits bought and granted, refunds and disputes. The background worker's changes are made by running it.
 */
const DAY = 86_400_000
const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "gen", name: "Gen", type: "metered" }
  ],
  creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 1 }] }],
  creditPacks: [{ slug: "pk", name: "Pack", credits: 10, price: 100, currency: "NGN", creditSystem: "cr" }],
  plans: [
    { slug: "free", name: "Free", autoEnable: true, currency: "NGN", features: [{ slug: "tokens", limit: 10 }] },
    {
      slug: "pro",
      name: "Pro",
      price: 300000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "paid",
      features: [{ slug: "tokens", limit: 100 }]
    }
  ]
}

for (const database of deliveryDatabases()) {
  describe(`events of every change on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    let drop: () => Promise<void>
    beforeAll(async () => {
      drop = await database.prepare()
      server = await startServer(database.config, { clock: clock.clock })
    }, SLOW_HOOK_MS)
    afterAll(async () => {
      await server.close()
      await drop()
    }, SLOW_HOOK_MS)

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))

    const subscribed = async (card: "ok" | "declining") => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const customer = await post(server, org.apiKey, "/v1/customers", { id: "sub", email: "sub@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "sub", product: "pro" })
      await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `outcome=pay&card=${card}`
      })
      /** The customer's events, oldest first. */
      const events = async () => {
        const response = await server.fetch("/v1/events?customer=sub&limit=100", { apiKey: org.apiKey })
        const body = (await response.json()) as any
        expect(body.hasMore).toBe(false)
        return (body.data as Array<any>).reverse()
      }
      return {
        org,
        customerId: customer.body.id as string,
        subscriptionId: attached.body.subscription.id as string,
        events
      }
    }

    test("customer, subscription, checkout and a paid renewal", async () => {
      const { events, subscriptionId, customerId } = await subscribed("ok")
      const first = await events()
      expect(first.map((e) => e.type)).toEqual([
        "customer.created",
        "subscription.created", // the free plan, attached with the customer
        "subscription.created", // pro, pending
        "payment_method.saved",
        "subscription.activated",
        // The first payment is the subscription's first invoice (h18), written in the same transaction.
        "invoice.created",
        "invoice.paid"
      ])
      expect(first[0].data).toMatchObject({ id: customerId, externalId: "sub", email: "sub@example.com" })
      expect(first[2].data).toMatchObject({ id: subscriptionId, plan: "pro", status: "pending" })
      expect(first[3].data).toMatchObject({ customerId, provider: "simulated", last4: "4242" })
      expect(first[4].data).toMatchObject({ id: subscriptionId, status: "active" })
      expect(first[6].data).toMatchObject({ status: "paid", total: 300000, amountPaid: 300000, customerId })

      clock.advance(32 * DAY)
      await runDue()
      const renewed = (await events()).slice(first.length)
      expect(renewed.map((e) => e.type)).toEqual(["invoice.created", "invoice.paid", "subscription.renewed"])
      const paid = renewed.find((e) => e.type === "invoice.paid")
      expect(paid.data).toMatchObject({ status: "paid", total: 300000, customerId })
      expect(renewed.at(-1).data).toMatchObject({ id: subscriptionId, status: "active" })
    })

    test("a declined renewal: past due once, a failed payment per attempt, then canceled at the end of the grace", async () => {
      const { events, subscriptionId } = await subscribed("declining")
      const start = (await events()).length
      clock.advance(32 * DAY)
      await runDue()
      const declined = (await events())
        .slice(start)
        .filter((e) => e.data.id === subscriptionId || e.type.startsWith("invoice."))
      expect(declined.map((e) => e.type)).toEqual([
        "invoice.created",
        "invoice.payment_failed",
        "subscription.past_due"
      ])
      expect(declined[2].data).toMatchObject({ id: subscriptionId, status: "past_due" })
      // The daily retry fails again: the invoice's failure again, the subscription's notice not.
      clock.advance(DAY + 60_000)
      await runDue()
      const retried = (await events()).slice(start).map((e) => e.type)
      expect(retried.filter((t) => t === "invoice.payment_failed").length).toBe(2)
      expect(retried.filter((t) => t === "subscription.past_due").length).toBe(1)
      clock.advance(7 * DAY)
      await runDue()
      const last = (await events()).at(-1)
      expect(last).toMatchObject({ type: "subscription.canceled", data: { id: subscriptionId, status: "canceled" } })
    })

    test("credits bought and granted, a method removed, a plan canceled, a refund and a dispute", async () => {
      const { org, events, customerId, subscriptionId } = await subscribed("ok")
      const start = (await events()).length
      const bought = await post(server, org.apiKey, "/v1/addon", { customer: "sub", pack: "pk", quantity: 2 })
      expect(bought.body.requiresCheckout).toBe(false)
      await server.run(Effect.flatMap(Credits, (c) => c.grant(org.id, "sub", "cr", 5, "bonus")))
      const wallet = (await (await server.fetch("/v1/wallet?customer=sub", { apiKey: org.apiKey })).json()) as any
      expect(
        (await post(server, org.apiKey, "/v1/wallet/remove", { customer: "sub", id: wallet.paymentMethods[0].id }))
          .status
      ).toBe(200)
      // Canceled at period end: announced when the period ends, not now.
      expect((await post(server, org.apiKey, `/v1/subscriptions/${subscriptionId}/cancel`, {})).status).toBe(200)
      const later = (await events()).slice(start)
      expect(later.map((e) => e.type)).toEqual(["credits.purchased", "credits.granted", "payment_method.removed"])
      expect(later[0].data).toMatchObject({
        customer: customerId,
        creditSystem: "cr",
        amount: 20,
        kind: "purchased",
        balance: 20
      })
      expect(later[1].data).toEqual({ customer: customerId, creditSystem: "cr", amount: 5, kind: "bonus", balance: 5 })
      expect(later[2].data).toMatchObject({ id: wallet.paymentMethods[0].id, customerId, reason: "removed" })

      // The pack's payment is refunded in part, then disputed (as a provider's webhook would report them).
      const [payment] = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              reference: string
            }>`SELECT reference FROM payments WHERE organization_id = ${org.id} AND purpose = 'addon'`
        ).pipe(Effect.orDie)
      )
      const apply = (event: ProviderEvent) =>
        server.run(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql.withTransaction(Effect.flatMap(Payments, (p) => p.applyEvent(org.id, "simulated", event)))
          ).pipe(Effect.orDie)
        )
      expect(
        await apply({
          _tag: "Refunded",
          eventKey: "r1",
          reference: payment!.reference,
          providerPaymentId: null,
          cause: "refund",
          reversalKey: "re_1",
          amount: 50,
          cumulative: false,
          currency: "NGN",
          metadata: {}
        })
      ).toBe(true)
      expect(
        await apply({
          _tag: "Disputed",
          eventKey: "d1",
          reference: payment!.reference,
          providerPaymentId: null,
          metadata: {}
        })
      ).toBe(true)
      const money = (await events()).slice(start + 3)
      expect(money.map((e) => e.type)).toEqual(["payment.refunded", "payment.disputed"])
      expect(money[0].data).toMatchObject({
        reference: payment!.reference,
        customerId,
        purpose: "addon",
        amount: 200,
        amountRefunded: 50,
        refunded: 50,
        cause: "refund"
      })
      expect(money[1].data).toMatchObject({ reference: payment!.reference, disputed: true })

      // The period ends: the canceled subscription is announced by the worker that ends it.
      clock.advance(32 * DAY)
      await runDue()
      expect((await events()).filter((e) => e.type === "subscription.canceled").map((e) => e.data.id)).toEqual([
        subscriptionId
      ])
    })
  })
}
