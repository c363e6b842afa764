import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Schema } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SyncRequest } from "../src/api/catalog.ts"
import { Catalog, PlansAutoEnabledHook, syncCatalog } from "../src/catalog/Catalog.ts"
import type { CatalogSnapshot } from "../src/catalog/model.ts"
import { runCli } from "./support/cli.ts"
import { databases, ok, startServer, type TestServer, uniqueSlug } from "./support/harness.ts"

/** A catalog as a vendor's file gives it, with the schema's defaults applied (what the typed client sends). */
const request = (raw: unknown): SyncRequest => Schema.decodeUnknownSync(SyncRequest)(raw)

/** Every field of every kind set. */
const fullCatalog = {
  defaultProvider: "paystack",
  features: [
    { slug: "api-calls", name: "API calls", type: "metered", meterType: "consumable", unit: "call" },
    { slug: "image-gen", name: "Image generation", type: "metered", unit: "image" },
    { slug: "premium-support", name: "Premium support", type: "boolean" },
    { slug: "seats", name: "Seats", type: "metered", meterType: "non_consumable", unit: "seat" }
  ],
  creditSystems: [
    {
      slug: "ai-credits",
      name: "AI credits",
      description: "Credits for AI features",
      features: [
        { feature: "api-calls", creditCost: 1 },
        { feature: "image-gen", creditCost: 2.5 }
      ]
    }
  ],
  creditPacks: [
    {
      slug: "credits-1000",
      name: "1,000 credits",
      description: "A top-up",
      credits: 1000,
      price: 499950,
      currency: "ngn",
      creditSystem: "ai-credits",
      provider: "stripe",
      metadata: { tier: "gold", bonus: 0 },
      isActive: true
    },
    // No currency (the catalog's single currency), no provider (defaultProvider), no description.
    { slug: "credits-100", name: "100 credits", credits: 100, price: 600, creditSystem: "ai-credits" }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      features: [
        { slug: "api-calls", limit: 100, reset: "daily" },
        { slug: "seats", limit: 1 }
      ]
    },
    {
      slug: "pro",
      name: "Pro",
      description: "For teams",
      price: 1500000,
      currency: "NGN",
      interval: "monthly",
      billingType: "recurring",
      autoEnable: false,
      isAddon: false,
      portal: true,
      planGroup: "main",
      trialDays: 14,
      provider: "paystack",
      metadata: { highlight: true, order: 2 },
      features: [
        {
          slug: "api-calls",
          enabled: true,
          limit: 10000,
          trialLimit: 500,
          reset: "monthly",
          usageModel: "usage_based",
          ratingModel: "graduated",
          pricePerUnit: 0.5,
          billingUnits: 100,
          tiers: [
            { upTo: 1000, unitPrice: 0, flatFee: 0 },
            { upTo: 10000, unitPrice: 0.25, flatFee: 100 },
            { upTo: null, unitPrice: 0.1, flatFee: 0 }
          ],
          overage: "charge",
          overagePrice: 0.75,
          maxOverageUnits: 5000,
          creditCost: 1
        },
        { slug: "seats", limit: 10, reset: "monthly" },
        { slug: "premium-support", enabled: true },
        { slug: "ai-credits", limit: 2000, trialLimit: null, reset: "monthly", maxOverageUnits: null, creditCost: 1 }
      ]
    },
    {
      slug: "images-addon",
      name: "Images add-on",
      price: 50000,
      currency: "NGN",
      billingType: "one_time",
      isAddon: true,
      features: [{ slug: "image-gen", usageModel: "prepaid", pricePerUnit: 10, reset: "never" }]
    }
  ]
}

const unchanged = (...slugs: Array<string>) => ({ created: [], updated: [], unchanged: slugs })
const created = (...slugs: Array<string>) => ({ created: slugs, updated: [], unchanged: [] })

for (const database of databases()) {
  describe(`catalog sync on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const snapshot = (orgId: string) =>
      server.app.runtime.runPromise(Effect.flatMap(Catalog, (c) => c.snapshot(orgId))) as Promise<CatalogSnapshot>
    const getJson = async (path: string, apiKey: string): Promise<any> => {
      const response = await server.fetch(path, { apiKey })
      expect(response.status).toBe(200)
      return response.json()
    }
    const postSync = (body: unknown, apiKey: string) =>
      server.fetch("/v1/sync", { method: "POST", apiKey, body: JSON.stringify(body) })

    test("round trip of every field; a second sync changes nothing; one changed field updates one plan", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)

      const first = await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      expect(first).toEqual({
        success: true,
        features: created("api-calls", "image-gen", "premium-support", "seats"),
        creditSystems: created("ai-credits"),
        creditPacks: created("credits-1000", "credits-100"),
        plans: created("free", "pro", "images-addon"),
        taxRates: created(),
        coupons: created(),
        promotionCodes: created(),
        warnings: []
      })

      const systems = await getJson("/v1/credit-systems", org.apiKey)
      expect(systems).toEqual({
        success: true,
        creditSystems: [
          {
            slug: "ai-credits",
            name: "AI credits",
            description: "Credits for AI features",
            features: [
              { feature: "api-calls", creditCost: 1 },
              { feature: "image-gen", creditCost: 2.5 }
            ]
          }
        ]
      })
      expect(await ok(client.catalog.listCreditSystems())).toEqual(systems)

      const snap = await snapshot(org.id)
      const creditSystemId = snap.creditSystems.get("ai-credits")!.id
      expect(creditSystemId).toStartWith("crs_")
      const packs = await getJson("/v1/credit-packs", org.apiKey)
      expect(packs).toEqual({
        success: true,
        data: [
          {
            id: expect.stringMatching(/^pack_/),
            slug: "credits-100",
            name: "100 credits",
            description: "",
            credits: 100,
            price: 600,
            currency: "NGN",
            creditSystemId,
            creditSystem: "ai-credits",
            provider: "paystack",
            metadata: {},
            isActive: true,
            createdAt: expect.any(Number),
            updatedAt: expect.any(Number)
          },
          {
            id: expect.stringMatching(/^pack_/),
            slug: "credits-1000",
            name: "1,000 credits",
            description: "A top-up",
            credits: 1000,
            price: 499950,
            currency: "NGN",
            creditSystemId,
            creditSystem: "ai-credits",
            provider: "stripe",
            metadata: { tier: "gold", bonus: 0 },
            isActive: true,
            createdAt: expect.any(Number),
            updatedAt: expect.any(Number)
          }
        ]
      })
      expect(packs.data[0]!.createdAt).toBe(snap.creditPacks.get("credits-100")!.createdAt)
      expect(await ok(client.catalog.listCreditPacks())).toEqual(packs)

      // The stored read model: defaults applied, money as canonical decimal strings, non_consumable never resets.
      expect(snap.features.get("seats")).toMatchObject({ type: "metered", meterType: "non_consumable", unit: "seat" })
      expect(snap.features.get("premium-support")).toMatchObject({
        type: "boolean",
        meterType: "consumable",
        unit: null
      })
      expect(snap.creditSystemsByFeature.get("image-gen")!.map((s) => s.slug)).toEqual(["ai-credits"])
      const pro = snap.plans.get("pro")!
      expect(pro.id).toStartWith("plan_")
      expect(pro).toMatchObject({
        description: "For teams",
        price: "1500000",
        currency: "NGN",
        interval: "monthly",
        billingType: "recurring",
        autoEnable: false,
        isAddon: false,
        portal: true,
        planGroup: "main",
        trialDays: 14,
        provider: "paystack",
        metadata: { highlight: true, order: 2 }
      })
      expect(pro.features).toEqual([
        {
          slug: "api-calls",
          enabled: true,
          limit: 10000,
          trialLimit: 500,
          reset: "monthly",
          usageModel: "usage_based",
          ratingModel: "graduated",
          pricePerUnit: "0.5",
          billingUnits: 100,
          tiers: [
            { upTo: 1000, unitPrice: "0", flatFee: "0" },
            { upTo: 10000, unitPrice: "0.25", flatFee: "100" },
            { upTo: null, unitPrice: "0.1", flatFee: "0" }
          ],
          overage: "charge",
          overagePrice: "0.75",
          maxOverageUnits: 5000,
          creditCost: 1
        },
        {
          slug: "seats",
          enabled: true,
          limit: 10,
          trialLimit: null,
          reset: "none",
          usageModel: "included",
          ratingModel: "package",
          pricePerUnit: null,
          billingUnits: 1,
          tiers: null,
          overage: "block",
          overagePrice: null,
          maxOverageUnits: null,
          creditCost: null
        },
        expect.objectContaining({ slug: "premium-support", enabled: true, limit: null }),
        expect.objectContaining({ slug: "ai-credits", limit: 2000, reset: "monthly", creditCost: 1 })
      ])
      expect(snap.plans.get("free")).toMatchObject({
        price: "0",
        currency: null,
        interval: null,
        provider: "paystack",
        portal: false
      })
      expect(snap.plans.get("images-addon")).toMatchObject({ billingType: "one_time", isAddon: true, interval: null })
      expect(snap.plans.get("images-addon")!.features[0]).toMatchObject({ reset: "none", pricePerUnit: "10" })

      await Bun.sleep(5)
      const second = await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      expect(second).toEqual({
        success: true,
        features: unchanged("api-calls", "image-gen", "premium-support", "seats"),
        creditSystems: unchanged("ai-credits"),
        creditPacks: unchanged("credits-1000", "credits-100"),
        plans: unchanged("free", "pro", "images-addon"),
        taxRates: unchanged(),
        coupons: unchanged(),
        promotionCodes: unchanged(),
        warnings: []
      })
      expect(await getJson("/v1/credit-packs", org.apiKey)).toEqual(packs)
      expect((await snapshot(org.id)).plans.get("pro")).toEqual(pro)

      const changed = structuredClone(fullCatalog) as any
      changed.plans[1].features[0].tiers[1].unitPrice = 0.3
      const third = await ok(client.catalog.sync({ payload: request(changed) }))
      expect(third.plans).toEqual({ created: [], updated: ["pro"], unchanged: ["free", "images-addon"] })
      expect(third.features).toEqual(unchanged("api-calls", "image-gen", "premium-support", "seats"))
      expect(third.creditSystems).toEqual(unchanged("ai-credits"))
      expect(third.creditPacks).toEqual(unchanged("credits-1000", "credits-100"))
      const updated = (await snapshot(org.id)).plans.get("pro")!
      expect(updated.id).toBe(pro.id)
      expect(updated.createdAt).toBe(pro.createdAt)
      expect(updated.updatedAt).toBeGreaterThan(pro.updatedAt)
      expect(updated.features[0]!.tiers![1]!.unitPrice).toBe("0.3")
    })

    test("portal (decisions.md §17): default false, stored, and switching it updates that plan alone", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)
      await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      const before = await snapshot(org.id)
      expect([...before.plans.values()].map((p) => [p.slug, p.portal])).toEqual([
        ["free", false],
        ["images-addon", false],
        ["pro", true]
      ])
      const flipped = structuredClone(fullCatalog) as any
      flipped.plans[0].portal = true
      flipped.plans[1].portal = false
      const answer = await ok(client.catalog.sync({ payload: request(flipped) }))
      expect(answer.plans).toEqual({ created: [], updated: ["free", "pro"], unchanged: ["images-addon"] })
      const after = await snapshot(org.id)
      expect(after.plans.get("free")!.portal).toBe(true)
      expect(after.plans.get("pro")!.portal).toBe(false)
      // Not a boolean: a 400 naming the field, nothing changed.
      const bad = structuredClone(fullCatalog) as any
      bad.plans[0].portal = "yes"
      const refused = await server.fetch("/v1/sync", { method: "POST", apiKey: org.apiKey, body: JSON.stringify(bad) })
      expect(refused.status).toBe(400)
      expect(JSON.stringify(await refused.json())).toContain("portal")
      expect((await snapshot(org.id)).plans.get("free")!.portal).toBe(true)
    })

    test("equal values written differently are unchanged", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)
      await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      const rewritten = structuredClone(fullCatalog) as any
      rewritten.creditPacks[0].currency = "NGN" // was "ngn"
      rewritten.creditPacks[0].metadata = { bonus: 0, tier: "gold" } // other key order
      rewritten.plans[1].features[1].reset = "daily" // seats are non_consumable: stored as none either way
      rewritten.plans[2].features[0].reset = "none" // was the alias "never"
      rewritten.plans[0].price = 0 // was the default
      const again = await ok(client.catalog.sync({ payload: request(rewritten) }))
      expect(again.creditPacks).toEqual(unchanged("credits-1000", "credits-100"))
      expect(again.plans).toEqual(unchanged("free", "pro", "images-addon"))
    })

    test("invalid input is a 400 listing every problem, and nothing changes", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)
      await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      const systemsBefore = await getJson("/v1/credit-systems", org.apiKey)
      const packsBefore = await getJson("/v1/credit-packs", org.apiKey)
      const planBefore = (await snapshot(org.id)).plans.get("pro")

      const response = await postSync(
        {
          features: [
            { slug: "api-calls", name: "API calls", type: "metered" },
            { slug: "new-feature", name: "New", type: "metered" },
            { slug: "api-calls", name: "Again", type: "boolean" }
          ],
          creditSystems: [
            {
              slug: "ai-credits",
              name: "Renamed", // a valid change that must not be written
              features: [
                { feature: "api-calls", creditCost: 1 },
                { feature: "no-such-feature", creditCost: 1 }
              ]
            }
          ],
          creditPacks: [
            {
              slug: "credits-1000",
              name: "Pack",
              credits: 10,
              price: 100,
              currency: "NGN",
              creditSystem: "no-such-system"
            },
            { slug: "credits-new", name: "Pack", credits: 10, price: 100, creditSystem: "ai-credits" }
          ],
          plans: [
            { slug: "pro", name: "Pro", price: 1000, features: [] },
            {
              slug: "usage",
              name: "Usage",
              price: 10,
              currency: "USD",
              interval: "monthly",
              features: [
                {
                  slug: "api-calls",
                  ratingModel: "graduated",
                  usageModel: "usage_based",
                  tiers: [
                    { upTo: 100, unitPrice: 1 },
                    { upTo: 50, unitPrice: 1 },
                    { upTo: 200, unitPrice: 1 }
                  ]
                },
                { slug: "new-feature", usageModel: "usage_based" }
              ]
            }
          ]
        },
        org.apiKey
      )
      expect(response.status).toBe(400)
      const body = (await response.json()) as {
        success: boolean
        code: string
        message: string
        details: Array<{ path: string; message: string }>
      }
      expect(body).toMatchObject({ success: false, error: "Bad Request", code: "invalid_request" })
      const paths = body.details.map((d) => d.path)
      expect([...paths].sort()).toEqual([
        "creditPacks[0].creditSystem",
        "creditPacks[1].currency",
        "creditSystems[0].features[1].feature",
        "features[2].slug",
        "plans[0].currency",
        "plans[0].interval",
        "plans[1].features[0].tiers[1].upTo",
        "plans[1].features[0].tiers[2].upTo",
        "plans[1].features[1].pricePerUnit"
      ])
      expect(body.message).toBe("The catalog is invalid: 9 problems")
      const messageOf = (path: string) => body.details.find((d) => d.path === path)!.message
      expect(messageOf("features[2].slug")).toContain("duplicate slug 'api-calls'")
      expect(messageOf("creditSystems[0].features[1].feature")).toBe("unknown feature 'no-such-feature'")
      expect(messageOf("creditPacks[0].creditSystem")).toBe("unknown credit system 'no-such-system'")
      expect(messageOf("plans[1].features[0].tiers[1].upTo")).toContain("ascending")
      expect(messageOf("plans[1].features[0].tiers[2].upTo")).toContain("the last tier must be unbounded")

      expect(await getJson("/v1/credit-systems", org.apiKey)).toEqual(systemsBefore)
      expect(await getJson("/v1/credit-packs", org.apiKey)).toEqual(packsBefore)
      const after = await snapshot(org.id)
      expect(after.plans.get("pro")).toEqual(planBefore)
      expect(after.features.has("new-feature")).toBe(false)
      expect(after.plans.has("usage")).toBe(false)
    })

    test("schema problems are a 400 listing every field", async () => {
      const org = await server.createOrg()
      const response = await postSync(
        {
          features: [{ slug: "x", name: "X", type: "gauge" }],
          creditPacks: [{ slug: "p", name: "P", credits: 0, price: 1, creditSystem: "c" }],
          plans: [{ slug: "p", name: "P", price: -1, interval: "fortnightly" }]
        },
        org.apiKey
      )
      expect(response.status).toBe(400)
      const body = (await response.json()) as { code: string; details: Array<{ path: string }> }
      expect(body.code).toBe("invalid_request")
      expect(body.details.map((d) => d.path).sort()).toEqual([
        "creditPacks[0].credits",
        "features[0].type",
        "plans[0].interval",
        "plans[0].price"
      ])
    })

    test("warnings: an unknown plan feature slug, stored items absent from the input", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)
      const first = await ok(client.catalog.sync({ payload: request(fullCatalog) }))
      expect(first.warnings).toEqual([])

      const partial = await ok(
        client.catalog.sync({
          payload: request({
            features: [
              { slug: "api-calls", name: "API calls", type: "metered", meterType: "consumable", unit: "call" }
            ],
            // A pack may name a stored credit system this sync does not mention.
            creditPacks: [
              {
                slug: "credits-1000",
                name: "1,000 credits",
                credits: 1000,
                price: 499950,
                currency: "NGN",
                creditSystem: "ai-credits"
              }
            ],
            plans: [
              {
                slug: "starter",
                name: "Starter",
                features: [
                  { slug: "api-calls", limit: 5 },
                  { slug: "ghost", limit: 1 }
                ]
              }
            ]
          })
        })
      )
      expect(partial.warnings).toEqual([
        "plan 'starter' names 'ghost' (plans[0].features[1].slug), which is neither a feature nor a credit system; it was kept as given",
        "feature 'image-gen' exists in the store but not in this sync; it was kept",
        "feature 'premium-support' exists in the store but not in this sync; it was kept",
        "feature 'seats' exists in the store but not in this sync; it was kept",
        "credit system 'ai-credits' exists in the store but not in this sync; it was kept",
        "credit pack 'credits-100' exists in the store but not in this sync; it was kept",
        "plan 'free' exists in the store but not in this sync; it was kept",
        "plan 'images-addon' exists in the store but not in this sync; it was kept",
        "plan 'pro' exists in the store but not in this sync; it was kept"
      ])
      expect(partial.features).toEqual(unchanged("api-calls"))
      // description and provider were dropped from the pack: an update, not a deletion of the pack.
      expect(partial.creditPacks).toEqual({ created: [], updated: ["credits-1000"], unchanged: [] })
      expect(partial.plans).toEqual(created("starter"))

      // Nothing was deleted.
      const systems = await ok(client.catalog.listCreditSystems())
      expect(systems.creditSystems.map((s) => s.slug)).toEqual(["ai-credits"])
      const packs = await ok(client.catalog.listCreditPacks())
      expect(packs.data.map((p) => [p.slug, p.provider, p.description])).toEqual([
        ["credits-100", "paystack", ""],
        ["credits-1000", "", ""]
      ])
      const snap = await snapshot(org.id)
      expect([...snap.plans.keys()]).toEqual(["free", "images-addon", "pro", "starter"])
      expect(snap.plans.get("starter")!.features.map((f) => f.slug)).toEqual(["api-calls", "ghost"])
    })

    test("inactive packs are not listed; organizations' catalogs are isolated", async () => {
      const a = await server.createOrg()
      const b = await server.createOrg()
      const clientA = await server.client(a.apiKey)
      const clientB = await server.client(b.apiKey)
      await ok(
        clientA.catalog.sync({
          payload: request({
            features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
            creditSystems: [{ slug: "credits", name: "A credits", features: [{ feature: "tokens", creditCost: 1 }] }],
            creditPacks: [
              { slug: "active", name: "Active", credits: 10, price: 100, currency: "USD", creditSystem: "credits" },
              {
                slug: "retired",
                name: "Retired",
                credits: 5,
                price: 60,
                currency: "USD",
                creditSystem: "credits",
                isActive: false
              }
            ],
            plans: []
          })
        })
      )
      // The same slugs in another organization are other items.
      const resultB = await ok(
        clientB.catalog.sync({
          payload: request({
            features: [{ slug: "tokens", name: "B tokens", type: "metered" }],
            creditSystems: [{ slug: "credits", name: "B credits", features: [{ feature: "tokens", creditCost: 3 }] }],
            creditPacks: [
              { slug: "retired", name: "B pack", credits: 1, price: 1, currency: "EUR", creditSystem: "credits" }
            ],
            plans: []
          })
        })
      )
      expect(resultB.features).toEqual(created("tokens"))
      expect(resultB.creditPacks).toEqual(created("retired"))
      expect(resultB.warnings).toEqual([])

      const packsA = await ok(clientA.catalog.listCreditPacks())
      expect(packsA.data.map((p) => [p.slug, p.price, p.currency, p.provider, p.isActive])).toEqual([
        ["active", 100, "USD", "", true]
      ])
      expect((await snapshot(a.id)).creditPacks.get("retired")!.isActive).toBe(false)
      const packsB = await ok(clientB.catalog.listCreditPacks())
      expect(packsB.data.map((p) => [p.slug, p.name, p.currency])).toEqual([["retired", "B pack", "EUR"]])
      expect(packsB.data[0]!.creditSystemId).toBe((await snapshot(b.id)).creditSystems.get("credits")!.id)
      expect(packsB.data[0]!.creditSystemId).not.toBe((await snapshot(a.id)).creditSystems.get("credits")!.id)
      expect((await ok(clientA.catalog.listCreditSystems())).creditSystems).toEqual([
        { slug: "credits", name: "A credits", description: "", features: [{ feature: "tokens", creditCost: 1 }] }
      ])
      expect((await ok(clientB.catalog.listCreditSystems())).creditSystems).toEqual([
        { slug: "credits", name: "B credits", description: "", features: [{ feature: "tokens", creditCost: 3 }] }
      ])

      // A fresh organization sees nothing of either.
      const c = await server.createOrg()
      expect(await getJson("/v1/credit-packs", c.apiKey)).toEqual({ success: true, data: [] })
      expect(await getJson("/v1/credit-systems", c.apiKey)).toEqual({ success: true, creditSystems: [] })
    })

    test("newly auto-enabled plans reach the hook once", async () => {
      const org = await server.createOrg()
      const calls: Array<ReadonlyArray<string>> = []
      const hook = (orgId: string, planIds: ReadonlyArray<string>) =>
        Effect.sync(() => {
          expect(orgId).toBe(org.id)
          calls.push(planIds)
        })
      const run = (raw: unknown) =>
        server.app.runtime.runPromise(
          syncCatalog(org.id, request(raw)).pipe(Effect.provideService(PlansAutoEnabledHook, hook))
        )

      const first = await run(fullCatalog)
      const snap = await snapshot(org.id)
      expect(first.newlyAutoEnabled).toEqual([snap.plans.get("free")!.id])
      expect(calls).toEqual([[snap.plans.get("free")!.id]])

      const again = await run(fullCatalog)
      expect(again.newlyAutoEnabled).toEqual([])
      expect(calls).toHaveLength(1)

      const switched = structuredClone(fullCatalog)
      switched.plans[1]!.autoEnable = true
      const third = await run(switched)
      expect(third.result.plans.updated).toEqual(["pro"])
      expect(third.newlyAutoEnabled).toEqual([snap.plans.get("pro")!.id])
      expect(calls).toEqual([[snap.plans.get("free")!.id], [snap.plans.get("pro")!.id]])
    })

    test("the snapshot is refreshed after a sync", async () => {
      const org = await server.createOrg()
      const client = await server.client(org.apiKey)
      await ok(
        client.catalog.sync({
          payload: request({ features: [{ slug: "f", name: "One", type: "metered" }], plans: [] })
        })
      )
      expect((await snapshot(org.id)).features.get("f")!.name).toBe("One")
      expect(await snapshot(org.id)).toBe(await snapshot(org.id)) // cached
      await ok(
        client.catalog.sync({
          payload: request({ features: [{ slug: "f", name: "Two", type: "metered" }], plans: [] })
        })
      )
      expect((await snapshot(org.id)).features.get("f")!.name).toBe("Two")
    })
  })
}

describe("cli sync", () => {
  let dir: string
  let env: Record<string, string | undefined>
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "catalog-cli-"))
    env = { ...process.env, DATA_DIR: join(dir, "data"), APP_ENV: "sandbox" }
    delete env.DATABASE_URL
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  const cli = (...args: Array<string>) => runCli(env, ...args)

  test("syncs a JSON file and a .ts module; an invalid file exits 1 with every problem", async () => {
    const slug = uniqueSlug("cli")
    const orgCreated = await cli("org", "create", slug, "--json")
    expect(orgCreated.code).toBe(0)
    expect(JSON.parse(orgCreated.stdout).organization.slug).toBe(slug)

    const jsonFile = join(dir, "catalog.json")
    writeFileSync(jsonFile, JSON.stringify(fullCatalog))
    const first = await cli("sync", jsonFile, "--org", slug, "--json")
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    expect(JSON.parse(first.stdout)).toEqual({
      success: true,
      features: created("api-calls", "image-gen", "premium-support", "seats"),
      creditSystems: created("ai-credits"),
      creditPacks: created("credits-1000", "credits-100"),
      plans: created("free", "pro", "images-addon"),
      taxRates: created(),
      coupons: created(),
      promotionCodes: created(),
      warnings: []
    })

    // A module whose default export is the catalog, one plan changed; --org omitted: there is one organization.
    const changed = structuredClone(fullCatalog)
    changed.plans[1]!.trialDays = 7
    const tsFile = join(dir, "catalog.ts")
    writeFileSync(tsFile, `const catalog = ${JSON.stringify(changed)} as const\nexport default catalog\n`)
    const second = await cli("sync", tsFile, "--json")
    expect(second.code).toBe(0)
    const result = JSON.parse(second.stdout)
    expect(result.plans).toEqual({ created: [], updated: ["pro"], unchanged: ["free", "images-addon"] })
    expect(result.features).toEqual(unchanged("api-calls", "image-gen", "premium-support", "seats"))

    // A `catalog` named export works too; the text output summarises.
    const namedFile = join(dir, "named.ts")
    writeFileSync(namedFile, `export const catalog = ${JSON.stringify(changed)}\n`)
    const text = await cli("sync", namedFile, "--org", slug)
    expect(text.code).toBe(0)
    expect(text.stdout).toContain(`Synced the catalog of ${slug}:`)
    expect(text.stdout).toContain("plans: 0 created, 0 updated, 3 unchanged")

    // Schema problems, reported like the API's 400.
    const badFile = join(dir, "bad.json")
    writeFileSync(
      badFile,
      JSON.stringify({
        features: [{ slug: "x", name: "X", type: "gauge" }],
        plans: [{ slug: "p", name: "P", price: -1 }]
      })
    )
    const bad = await cli("sync", badFile, "--org", slug, "--json")
    expect(bad.code).toBe(1)
    expect(bad.stdout).toBe("")
    const badBody = JSON.parse(bad.stderr)
    expect(badBody).toMatchObject({ error: "Bad Request", code: "invalid_request" })
    expect(badBody.details).toEqual([
      { path: "features[0].type", message: "must be one of metered, boolean" },
      { path: "plans[0].price", message: "must be at least 0" }
    ])

    // Problems only the sync service sees, through the same code path as the API.
    const unknownFile = join(dir, "unknown.json")
    writeFileSync(
      unknownFile,
      JSON.stringify({
        features: [],
        creditPacks: [{ slug: "p", name: "P", credits: 1, price: 1, currency: "NGN", creditSystem: "nope" }],
        plans: []
      })
    )
    const unknown = await cli("sync", unknownFile, "--org", slug, "--json")
    expect(unknown.code).toBe(1)
    expect(unknown.stdout).toBe("")
    expect(JSON.parse(unknown.stderr)).toEqual({
      error: "Bad Request",
      code: "invalid_request",
      message: "The catalog is invalid: 1 problem",
      details: [{ path: "creditPacks[0].creditSystem", message: "unknown credit system 'nope'" }]
    })
    const unknownText = await cli("sync", unknownFile, "--org", slug)
    expect(unknownText.code).toBe(1)
    expect(unknownText.stderr).toContain("creditPacks[0].creditSystem: unknown credit system 'nope'")

    // With a second organization, --org is needed.
    expect((await cli("org", "create", uniqueSlug("cli"), "--json")).code).toBe(0)
    expect((await cli("sync", jsonFile, "--json")).code).toBe(2)
  })
})
