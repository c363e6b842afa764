import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Renewals } from "../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/** Coupons and promotion codes on `POST /v1/attach` and its preview (decisions.md §15). */
const DAY = 86_400_000

export const attachCatalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    { slug: "pro", name: "Pro", price: 10_000, currency: "NGN", interval: "monthly", features: [{ slug: "tokens" }] },
    {
      slug: "team",
      name: "Team",
      price: 40_000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "team",
      features: [{ slug: "tokens" }]
    },
    {
      slug: "dollars",
      name: "Dollars",
      price: 5_000,
      currency: "USD",
      interval: "monthly",
      planGroup: "usd",
      features: [{ slug: "tokens" }]
    },
    {
      slug: "trial",
      name: "Trial",
      price: 10_000,
      currency: "NGN",
      interval: "monthly",
      trialDays: 7,
      planGroup: "trial",
      features: [{ slug: "tokens" }]
    }
  ],
  coupons: [
    { slug: "half", name: "Half off once", percentOff: 50, duration: "once" },
    { slug: "twenty", name: "20% for 2", percentOff: 20, duration: "repeating", durationInCycles: 2 },
    { slug: "naira", name: "NGN 2,000 off", amountOff: 2_000, currency: "NGN", duration: "forever", plans: ["pro"] },
    { slug: "free-ride", name: "All of it", percentOff: 100, duration: "once" },
    { slug: "gone", name: "Gone", percentOff: 10, duration: "forever", redeemBy: "2020-01-01T00:00:00Z" },
    { slug: "one-left", name: "One", percentOff: 5, duration: "forever", maxRedemptions: 1 },
    { slug: "limited", name: "Limited", percentOff: 10, duration: "forever", maxRedemptions: 10 },
    { slug: "open", name: "Open", percentOff: 10, duration: "forever" }
  ],
  promotionCodes: [
    { code: "HALF", coupon: "half" },
    { code: "OLD", coupon: "open", expiresAt: "2020-01-01T00:00:00Z" },
    { code: "OFF", coupon: "open", active: false },
    { code: "TEN", coupon: "open", maxRedemptions: 10 }
  ]
}

for (const database of databases()) {
  describe(`coupons on attach (${database.name})`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))
    const counts = (org: string) =>
      server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const coupons = yield* sql<{ slug: string; redemptions: string | number }>`SELECT slug, redemptions
            FROM coupons WHERE organization_id = ${org}`
          const codes = yield* sql<{ code: string; redemptions: string | number }>`SELECT code, redemptions
            FROM promotion_codes WHERE organization_id = ${org}`
          return Object.fromEntries([
            ...coupons.map((c) => [c.slug, Number(c.redemptions)]),
            ...codes.map((c) => [`code:${c.code}`, Number(c.redemptions)])
          ])
        }).pipe(Effect.orDie)
      )
    /** The amount a subscription's first payment asks for (its checkout: these customers have no saved card). */
    const firstPayment = (org: string, subscriptionId: string) =>
      server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ amount: string }>`SELECT amount FROM checkouts
            WHERE organization_id = ${org} AND target_id = ${subscriptionId} AND purpose = 'subscription'`
          return rows.map((r) => Number(r.amount))
        }).pipe(Effect.orDie)
      )

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, attachCatalog)
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const customer = async (id: string) =>
        expect((await call("/v1/customers", { id, email: `${id}@example.com` })).status).toBe(200)
      const pay = (checkoutUrl: string) =>
        server.fetch(new URL(checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
      const invoices = async (id: string) =>
        ((await get(`/v1/billing/invoices?customer=${id}`)).invoices as Array<any>).sort(
          (a, b) => a.createdAt - b.createdAt
        )
      return { org, call, get, customer, pay, invoices }
    }

    test("unknown, expired, inactive, exhausted, other plan, other currency: 422 with the reason; nothing made or counted", async () => {
      const { call, customer, get, org } = await setup()
      await customer("taken")
      expect((await call("/v1/attach", { customer: "taken", product: "pro", coupon: "one-left" })).status).toBe(200)
      const before = await counts(org.id)
      const cases: Array<[Record<string, string>, string]> = [
        [{ coupon: "nope" }, "unknown coupon 'nope'"],
        [{ promotionCode: "nope" }, "unknown promotion code 'nope'"],
        [{ promotionCode: "old" }, "promotion code 'OLD' expired"],
        [{ promotionCode: "off" }, "promotion code 'OFF' is not active"],
        [{ coupon: "gone" }, "coupon 'gone' can no longer be redeemed (redeemBy passed)"],
        [{ coupon: "one-left" }, "coupon 'one-left' has no redemptions left"],
        [{ coupon: "naira", product: "team" }, "coupon 'naira' does not apply to plan 'team'"]
      ]
      for (const [extra, reason] of cases) {
        const body = { customer: "newcomer", product: "pro", customerData: { email: "n@example.com" }, ...extra }
        for (const path of ["/v1/attach", "/v1/attach/preview"]) {
          const refused = await call(path, path.endsWith("preview") ? { ...body, customer: "taken" } : body)
          expect({ path, status: refused.status, code: refused.body.code, message: refused.body.message }).toEqual({
            path,
            status: 422,
            code: "coupon_invalid",
            message: reason
          })
        }
      }
      // An amount off in another currency than the plan's (the coupon names every plan).
      await call("/v1/sync", {
        ...attachCatalog,
        coupons: [
          ...attachCatalog.coupons,
          { slug: "naira-all", name: "NGN off", amountOff: 100, currency: "NGN", duration: "once" }
        ]
      })
      const currency = await call("/v1/attach", { customer: "taken", product: "dollars", coupon: "naira-all" })
      expect(currency.body).toMatchObject({
        code: "coupon_invalid",
        message: "coupon 'naira-all' is an amount off in NGN and plan 'dollars' is billed in USD"
      })
      // Nothing was created (not even the customer customerData would have made) and nothing was counted.
      expect((await server.fetch("/v1/customers/newcomer", { apiKey: org.apiKey })).status).toBe(404)
      expect((await get("/v1/subscriptions?customer=taken")).subscriptions).toHaveLength(1)
      expect(await counts(org.id)).toMatchObject(before)

      const both = await call("/v1/attach", {
        customer: "taken",
        product: "team",
        coupon: "half",
        promotionCode: "HALF"
      })
      expect(both.status).toBe(400)
      expect(both.body.details).toEqual([
        expect.objectContaining({ path: "promotionCode", message: "give at most one of coupon and promotionCode" })
      ])
      expect(
        (
          await call("/v1/attach/preview", {
            customer: "taken",
            product: "team",
            coupon: "half",
            promotionCode: "HALF"
          })
        ).status
      ).toBe(400)
      expect(await counts(org.id)).toMatchObject(before)
    })

    test("once: the first charge is discounted, counted once; the first renewal is not; a repeat counts nothing", async () => {
      const { call, customer, invoices, org, pay } = await setup()
      await customer("ada")
      const attached = await call("/v1/attach", { customer: "ada", product: "pro", promotionCode: "half" })
      expect(attached.status).toBe(200)
      const id = attached.body.subscription.id
      expect(await firstPayment(org.id, id)).toEqual([5_000])
      // The same attach again (the subscription waits for its payment): nothing counted a second time.
      await call("/v1/attach", { customer: "ada", product: "pro", promotionCode: "half" })
      expect(await counts(org.id)).toMatchObject({ half: 1, "code:HALF": 1 })
      await pay(attached.body.checkoutUrl)
      clock.advance(32 * DAY)
      await runDue()
      // The first payment is the first invoice (h18), discounted; the renewal is not.
      const [first, renewal] = await invoices("ada")
      expect(first).toMatchObject({
        subtotal: 10_000,
        discount: 5_000,
        total: 5_000,
        amountPaid: 5_000,
        status: "paid"
      })
      expect(renewal).toMatchObject({ subtotal: 10_000, discount: 0, total: 10_000 })
    })

    test("repeating 2: the first charge and one renewal; forever amount off: every renewal", async () => {
      const { call, customer, invoices, org, pay } = await setup()
      await customer("bo")
      const twenty = await call("/v1/attach", { customer: "bo", product: "team", coupon: "twenty" })
      expect(await firstPayment(org.id, twenty.body.subscription.id)).toEqual([32_000])
      await pay(twenty.body.checkoutUrl)
      await customer("cy")
      const naira = await call("/v1/attach", { customer: "cy", product: "pro", coupon: "naira" })
      expect(await firstPayment(org.id, naira.body.subscription.id)).toEqual([8_000])
      await pay(naira.body.checkoutUrl)
      for (let i = 0; i < 3; i++) {
        clock.advance(32 * DAY)
        await runDue()
      }
      // The first payment's invoice (h18), then the three renewals.
      expect((await invoices("bo")).map((i) => [i.discount, i.total])).toEqual([
        [8_000, 32_000],
        [8_000, 32_000],
        [0, 40_000],
        [0, 40_000]
      ])
      expect((await invoices("cy")).map((i) => [i.lines[0].discounts, i.total])).toEqual([
        [[{ coupon: "naira", amount: 2_000 }], 8_000],
        [[{ coupon: "naira", amount: 2_000 }], 8_000],
        [[{ coupon: "naira", amount: 2_000 }], 8_000],
        [[{ coupon: "naira", amount: 2_000 }], 8_000]
      ])
    })

    test("a coupon taking the whole first charge starts the subscription at once; a trial's first invoice takes it", async () => {
      const { call, customer, invoices } = await setup()
      await customer("dee")
      const free = await call("/v1/attach", { customer: "dee", product: "pro", coupon: "free-ride" })
      expect(free.body).toMatchObject({ checkoutUrl: null, subscription: { status: "active" } })
      await customer("eve")
      const trial = await call("/v1/attach", { customer: "eve", product: "trial", coupon: "half" })
      expect(trial.body.subscription.status).toBe("trialing")
      clock.advance(32 * DAY)
      await runDue()
      expect((await invoices("eve")).map((i) => [i.discount, i.total])).toEqual([[5_000, 5_000]])
    })

    test("100 concurrent attaches (distinct customers) of a code limited to 10: 10 attached, 90 × 422", async () => {
      const { call, customer, get, org } = await setup()
      const ids = Array.from({ length: 100 }, (_, i) => `k${i}`)
      for (let i = 0; i < ids.length; i += 20) await Promise.all(ids.slice(i, i + 20).map(customer))
      for (const [product, body] of [
        ["pro", { promotionCode: "ten" }],
        ["team", { coupon: "limited" }]
      ] as const) {
        const results = await Promise.all(ids.map((id) => call("/v1/attach", { customer: id, product, ...body })))
        expect(results.filter((r) => r.status === 200)).toHaveLength(10)
        const refused = results.filter((r) => r.status !== 200)
        expect(refused).toHaveLength(90)
        expect(refused.every((r) => r.status === 422 && r.body.code === "coupon_invalid")).toBe(true)
        const subs = (await get("/v1/subscriptions")).subscriptions.filter((s: any) => s.plan === product)
        expect(subs).toHaveLength(10)
      }
      expect(await counts(org.id)).toMatchObject({ open: 10, "code:TEN": 10, limited: 10 })
    }, 60_000)
  })
}
