import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

export const couponCatalog = {
  features: [{ slug: "calls", name: "API calls", type: "metered" }],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 10_000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3 }]
    },
    { slug: "team", name: "Team", price: 50_000, currency: "NGN", interval: "monthly" }
  ],
  coupons: [
    { slug: "launch", name: "Launch 12.5%", percentOff: 12.5, duration: "once" },
    { slug: "naira-off", name: "NGN 500 off", amountOff: 50_000, currency: "ngn", duration: "forever", plans: ["pro"] },
    { slug: "three", name: "Three months", percentOff: 20, duration: "repeating", durationInCycles: 3 },
    { slug: "limited", name: "Limited", percentOff: 50, duration: "forever", maxRedemptions: 10 }
  ],
  promotionCodes: [
    { code: "LAUNCH", coupon: "launch" },
    { code: "Ten", coupon: "limited", maxRedemptions: 10, expiresAt: "2099-01-01T00:00:00Z" }
  ]
}

for (const database of databases()) {
  describe(`coupons and promotion codes (${database.name})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    test("coupons sync by slug and codes by code (case-insensitive): created, unchanged, updated", async () => {
      const { apiKey } = await server.createOrg()
      const first: any = await syncCatalog(server, apiKey, couponCatalog)
      expect(first.coupons).toEqual({
        created: ["launch", "naira-off", "three", "limited"],
        updated: [],
        unchanged: []
      })
      expect(first.promotionCodes).toEqual({ created: ["LAUNCH", "Ten"], updated: [], unchanged: [] })

      const second: any = await syncCatalog(server, apiKey, {
        ...couponCatalog,
        coupons: [
          { ...couponCatalog.coupons[0], percentOff: 12.5 },
          { ...couponCatalog.coupons[1], currency: "NGN" },
          { ...couponCatalog.coupons[2], durationInCycles: 6 }
        ],
        promotionCodes: [{ code: "launch", coupon: "launch" }]
      })
      expect(second.coupons).toEqual({ created: [], updated: ["three"], unchanged: ["launch", "naira-off"] })
      // The same code in other letters is the same code: its spelling is updated, not a second code created.
      expect(second.promotionCodes).toEqual({ created: [], updated: ["launch"], unchanged: [] })
      expect(second.warnings).toEqual(
        expect.arrayContaining([
          expect.stringContaining("coupon 'limited'"),
          expect.stringContaining("promotion code 'Ten'")
        ])
      )
    })

    test("bad coupons and codes are 400 naming every problem, and nothing is stored", async () => {
      const { apiKey } = await server.createOrg()
      const bad = await post(server, apiKey, "/v1/sync", {
        ...couponCatalog,
        coupons: [
          { slug: "a", name: "A", percentOff: 100.5, duration: "once" },
          { slug: "b", name: "B", percentOff: 10.125, duration: "once" },
          { slug: "c", name: "C", percentOff: 0, duration: "once" },
          { slug: "d", name: "D", amountOff: 100, duration: "once" },
          { slug: "e", name: "E", percentOff: 5, amountOff: 100, currency: "NGN", duration: "forever" },
          { slug: "f", name: "F", percentOff: 5, duration: "repeating" },
          { slug: "g", name: "G", percentOff: 5, duration: "once", durationInCycles: 2 },
          { slug: "h", name: "H", percentOff: 5, duration: "once", plans: ["nope"] },
          { slug: "i", name: "I", percentOff: 5, duration: "sometimes" },
          { slug: "j", name: "J", percentOff: 5, duration: "once", redeemBy: "2026-01-01" },
          { slug: "a", name: "A again", percentOff: 5, duration: "once" }
        ],
        promotionCodes: [
          { code: "X1", coupon: "zzz" },
          { code: "dup", coupon: "b" },
          { code: "DUP", coupon: "b" },
          { code: "has space", coupon: "b" }
        ]
      })
      expect(bad.status).toBe(400)
      const paths = (bad.body.details as Array<{ path: string }>).map((d) => d.path).sort()
      expect(paths).toEqual(
        expect.arrayContaining([
          "coupons[0].percentOff",
          "coupons[1].percentOff",
          "coupons[2].percentOff",
          "coupons[8].duration",
          "coupons[9].redeemBy",
          "promotionCodes[3].code"
        ])
      )
      // Schema problems are reported first; the cross-field ones once the items are well-formed.
      const crossField = await post(server, apiKey, "/v1/sync", {
        ...couponCatalog,
        coupons: [
          { slug: "d", name: "D", amountOff: 100, duration: "once" },
          { slug: "e", name: "E", percentOff: 5, amountOff: 100, currency: "NGN", duration: "forever" },
          { slug: "f", name: "F", percentOff: 5, duration: "repeating" },
          { slug: "g", name: "G", percentOff: 5, duration: "once", durationInCycles: 2 },
          { slug: "h", name: "H", percentOff: 5, duration: "once", plans: ["nope"] },
          { slug: "d", name: "D again", percentOff: 5, duration: "once" }
        ],
        promotionCodes: [
          { code: "X1", coupon: "zzz" },
          { code: "dup", coupon: "e" },
          { code: "DUP", coupon: "e" }
        ]
      })
      expect(crossField.status).toBe(400)
      expect(
        (crossField.body.details as Array<{ path: string; message: string }>)
          .map((d) => `${d.path}: ${d.message}`)
          .sort()
      ).toEqual([
        "coupons[0].currency: is required with amountOff",
        "coupons[1]: must have exactly one of percentOff and amountOff",
        "coupons[2].durationInCycles: is required when duration is 'repeating'",
        "coupons[3].durationInCycles: is only allowed when duration is 'repeating'",
        "coupons[4].plans[0]: unknown plan 'nope'",
        "coupons[5].slug: duplicate coupon 'd'",
        "promotionCodes[0].coupon: unknown coupon 'zzz' (not in this sync)",
        "promotionCodes[2].code: duplicate promotion code 'DUP'"
      ])
      const after: any = await syncCatalog(server, apiKey, { ...couponCatalog, coupons: [], promotionCodes: [] })
      expect(after.warnings.filter((w: string) => w.includes("coupon"))).toEqual([])
    })
  })
}

const billedCatalog = {
  features: [
    { slug: "calls", name: "API calls", type: "metered" },
    { slug: "renders", name: "Renders", type: "metered" }
  ],
  plans: [
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3 }]
    },
    {
      slug: "renders",
      name: "Renders",
      currency: "NGN",
      planGroup: "r",
      autoEnable: true,
      features: [{ slug: "renders", usageModel: "usage_based", pricePerUnit: 7 }]
    }
  ],
  coupons: [
    { slug: "launch", name: "Launch 12.5%", percentOff: 12.5, duration: "once" },
    {
      slug: "calls-off",
      name: "500 off calls",
      amountOff: 500,
      currency: "NGN",
      duration: "repeating",
      durationInCycles: 2,
      plans: ["payg"]
    },
    { slug: "always", name: "Always 10%", percentOff: 10, duration: "forever" },
    { slug: "gone", name: "Gone", percentOff: 10, duration: "forever", redeemBy: "2020-01-01T00:00:00Z" },
    { slug: "limited", name: "Limited", percentOff: 50, duration: "forever", maxRedemptions: 10 },
    { slug: "one-left", name: "One", percentOff: 5, duration: "forever", maxRedemptions: 1 }
  ],
  promotionCodes: [
    { code: "LAUNCH", coupon: "launch" },
    { code: "OLD", coupon: "always", expiresAt: "2020-01-01T00:00:00Z" },
    { code: "OFF", coupon: "always", active: false },
    { code: "TEN", coupon: "always", maxRedemptions: 10 }
  ]
}

for (const database of databases()) {
  describe(`a customer's discount on its invoices (${database.name})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const setup = async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, billedCatalog)
      return apiKey
    }
    const customer = async (apiKey: string, id: string) =>
      expect((await post(server, apiKey, "/v1/customers", { id, email: `${id}@x.test` })).status).toBe(200)
    const invoiceAfter = async (apiKey: string, id: string, calls: number, renders = 0) => {
      await post(server, apiKey, "/v1/track", { customer: id, feature: "calls", value: calls })
      if (renders > 0) await post(server, apiKey, "/v1/track", { customer: id, feature: "renders", value: renders })
      const generated = await post(server, apiKey, "/v1/billing/invoice", { customer: id })
      expect(generated.status).toBe(200)
      expect(generated.body.invoices.length).toBe(1)
      return generated.body.invoices[0]
    }
    const discountsOf = (invoice: any) =>
      invoice.lines.map((l: any) => ({ feature: l.feature, amount: l.amount, discounts: l.discounts }))

    test("a promotion code (any case) applies its coupon once: one invoice discounted, the next not", async () => {
      const apiKey = await setup()
      await customer(apiKey, "ada")
      const applied = await post(server, apiKey, "/v1/customers/ada/discount", { promotionCode: "launch" })
      expect(applied).toMatchObject({
        status: 200,
        body: { success: true, coupon: "launch", promotionCode: "LAUNCH", invoicesLeft: 1 }
      })
      // 3 × 1234 = 3702; 12.5% = 462.75 → 463 (half-up)
      const first = await invoiceAfter(apiKey, "ada", 1234)
      expect(discountsOf(first)).toEqual([
        { feature: "calls", amount: 3702, discounts: [{ coupon: "launch", amount: 463 }] }
      ])
      expect({ subtotal: first.subtotal, discount: first.discount, total: first.total }).toEqual({
        subtotal: 3702,
        discount: 463,
        total: 3239
      })
      const second = await invoiceAfter(apiKey, "ada", 10)
      expect(second.discount).toBe(0)
      expect(second.lines[0].discounts).toEqual([])
    })

    test("repeating: N invoices, only the lines of its plans, spread in proportion; DELETE removes it", async () => {
      const apiKey = await setup()
      await customer(apiKey, "bo")
      const applied = await post(server, apiKey, "/v1/customers/bo/discount", { coupon: "calls-off" })
      expect(applied.body).toMatchObject({ coupon: "calls-off", invoicesLeft: 2 })
      // calls 3 × 100 = 300 (covered: 300 of the 500 off, capped), renders 7 × 10 = 70 (plan not covered)
      const first = await invoiceAfter(apiKey, "bo", 100, 10)
      expect(discountsOf(first)).toEqual([
        { feature: "calls", amount: 300, discounts: [{ coupon: "calls-off", amount: 300 }] },
        { feature: "renders", amount: 70, discounts: [] }
      ])
      expect({ discount: first.discount, total: first.total }).toEqual({ discount: 300, total: 70 })
      const second = await invoiceAfter(apiKey, "bo", 1000)
      expect(second.lines[0].discounts).toEqual([{ coupon: "calls-off", amount: 500 }])
      const third = await invoiceAfter(apiKey, "bo", 1000)
      expect(third.discount).toBe(0)

      expect((await post(server, apiKey, "/v1/customers/bo/discount", { coupon: "always" })).status).toBe(200)
      expect((await invoiceAfter(apiKey, "bo", 10)).discount).toBe(3)
      const removed = await server.fetch("/v1/customers/bo/discount", { method: "DELETE", apiKey })
      expect({ status: removed.status, body: await removed.json() }).toMatchObject({
        status: 200,
        body: { removed: true }
      })
      expect((await invoiceAfter(apiKey, "bo", 10)).discount).toBe(0)
    })

    test("unknown, expired, inactive, exhausted: 422 coupon_invalid with the reason, nothing applied", async () => {
      const apiKey = await setup()
      await customer(apiKey, "cy")
      const cases: Array<[Record<string, string>, string]> = [
        [{ coupon: "nope" }, "unknown coupon 'nope'"],
        [{ promotionCode: "NOPE" }, "unknown promotion code 'NOPE'"],
        [{ promotionCode: "old" }, "promotion code 'OLD' expired"],
        [{ promotionCode: "OFF" }, "promotion code 'OFF' is not active"],
        [{ coupon: "gone" }, "coupon 'gone' can no longer be redeemed (redeemBy passed)"],
        [{ coupon: "always", promotionCode: "TEN" }, "give exactly one of coupon and promotionCode"]
      ]
      for (const [body, reason] of cases) {
        const refused = await post(server, apiKey, "/v1/customers/cy/discount", body)
        expect({ status: refused.status, code: refused.body.code, message: refused.body.message }).toEqual({
          status: 422,
          code: "coupon_invalid",
          message: reason
        })
      }
      expect((await post(server, apiKey, "/v1/customers/cy/discount", { coupon: "one-left" })).status).toBe(200)
      const exhausted = await post(server, apiKey, "/v1/customers/cy/discount", { coupon: "one-left" })
      expect(exhausted.body).toMatchObject({
        code: "coupon_invalid",
        message: "coupon 'one-left' has no redemptions left"
      })
      // The refused applications left the first one in place.
      expect((await invoiceAfter(apiKey, "cy", 100)).discount).toBe(15)
      const unknownCustomer = await post(server, apiKey, "/v1/customers/nobody/discount", { coupon: "always" })
      expect(unknownCustomer.status).toBe(404)
    })

    test("100 concurrent applications of a code limited to 10 redeem 10; of a coupon limited to 10, 10", async () => {
      const apiKey = await setup()
      const ids = Array.from({ length: 100 }, (_, i) => `c${i}`)
      for (let i = 0; i < ids.length; i += 20) await Promise.all(ids.slice(i, i + 20).map((id) => customer(apiKey, id)))
      for (const body of [{ promotionCode: "ten" }, { coupon: "limited" }]) {
        const results = await Promise.all(ids.map((id) => post(server, apiKey, `/v1/customers/${id}/discount`, body)))
        const statuses = results.map((r) => r.status)
        expect(statuses.filter((s) => s === 200).length).toBe(10)
        expect(statuses.filter((s) => s === 422).length).toBe(90)
        expect(results.filter((r) => r.status === 422).every((r) => r.body.code === "coupon_invalid")).toBe(true)
      }
    })
  })
}
