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
