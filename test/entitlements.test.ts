import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Credits } from "../src/credits/Credits.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" },
    { slug: "sso", name: "SSO", type: "boolean" },
    { slug: "images", name: "Images", type: "metered" },
    { slug: "chat", name: "Chat messages", type: "metered" },
    { slug: "exports", name: "Exports", type: "metered" }
  ],
  creditSystems: [
    {
      slug: "ai-credits",
      name: "AI credits",
      features: [
        { feature: "images", creditCost: 5 },
        { feature: "chat", creditCost: 0.5 }
      ]
    }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      features: [
        { slug: "tokens", limit: 10, reset: "monthly" },
        { slug: "ai-credits", limit: 100, reset: "monthly" }
      ]
    },
    {
      slug: "pro",
      name: "Pro",
      features: [
        { slug: "tokens", limit: 100, reset: "monthly", overage: "charge", overagePrice: 2, maxOverageUnits: 5 },
        { slug: "sso" },
        { slug: "exports", limit: null }
      ]
    },
    {
      slug: "metered",
      name: "Metered",
      features: [
        {
          slug: "tokens",
          usageModel: "usage_based",
          ratingModel: "graduated",
          billingUnits: 1,
          tiers: [
            { upTo: 10, unitPrice: 1 },
            { upTo: null, unitPrice: 0.5, flatFee: 100 }
          ]
        }
      ]
    },
    { slug: "boost", name: "Boost", isAddon: true, features: [{ slug: "tokens", limit: 5, reset: "monthly" }] },
    {
      slug: "trial",
      name: "Trial",
      trialDays: 14,
      planGroup: "trials",
      features: [{ slug: "tokens", limit: 1000, trialLimit: 3 }]
    }
  ]
}

for (const database of databases()) {
  describe(`check and track on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    /** A fresh organization with the catalog, and one customer on the free plan (autoEnable). */
    const setup = async (plans: ReadonlyArray<string> = []) => {
      const { apiKey, id: orgId } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      await post(server, apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      for (const plan of plans) {
        const attached = await post(server, apiKey, "/v1/attach", { customer: "cust", product: plan })
        expect(attached.status).toBe(200)
      }
      const track = (body: Record<string, unknown>, headers?: Record<string, string>) =>
        post(server, apiKey, "/v1/track", { customer: "cust", ...body }, headers)
      const check = (body: Record<string, unknown>, headers?: Record<string, string>) =>
        post(server, apiKey, "/v1/check", { customer: "cust", ...body }, headers)
      return { apiKey, orgId, track, check }
    }

    const eventCount = (orgId: string, feature?: string) =>
      server.app.runtime
        .runPromise(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage_events e JOIN features f
          ON f.organization_id = e.organization_id AND f.id = e.feature_id
          WHERE e.organization_id = ${orgId} AND ${feature === undefined ? sql`1 = 1` : sql`f.slug = ${feature}`}`
          )
        )
        .then((rows) => Number(rows[0]!.n))

    test("within the plan: tracked, access_granted, and the state after the increment", async () => {
      const { check, track } = await setup()
      const tracked = await track({ feature: "tokens", value: 4 })
      expect(tracked.status).toBe(200)
      expect(tracked.body).toMatchObject({
        allowed: true,
        code: "tracked",
        usage: 4,
        limit: 10,
        balance: 6,
        resetInterval: "monthly",
        credits: null,
        details: { pricing: { usageModel: "included", ratingModel: "package" }, tierBreakdown: [] }
      })
      // The window is anchored at the subscription's start and lasts one month.
      const resetsAt = Date.parse(tracked.body.resetsAt)
      expect(resetsAt - clock.now()).toBeGreaterThan(27 * 86_400_000)
      expect(resetsAt - clock.now()).toBeLessThanOrEqual(31 * 86_400_000)
      const checked = await check({ feature: "tokens", value: 6 })
      expect(checked.body).toMatchObject({ allowed: true, code: "access_granted", usage: 4, balance: 6 })
    })

    test("exactly at the limit is allowed; one more is limit_exceeded and records nothing", async () => {
      const { check, orgId, track } = await setup()
      expect((await track({ feature: "tokens", value: 10 })).body).toMatchObject({
        allowed: true,
        usage: 10,
        balance: 0
      })
      const before = await eventCount(orgId)
      const denied = await track({ feature: "tokens", value: 1 })
      expect(denied.status).toBe(200)
      expect(denied.body).toMatchObject({ allowed: false, code: "limit_exceeded", usage: 10, balance: 0 })
      expect(await eventCount(orgId)).toBe(before)
      expect((await check({ feature: "tokens", value: 1 })).body.code).toBe("limit_exceeded")
      expect((await check({ feature: "tokens", value: 0 })).body.allowed).toBe(true)
    })

    test("overage_allowed, tracked_overage, then the per-feature overage cap", async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, { ...catalog, plans: catalog.plans.map((p) => ({ ...p, autoEnable: false })) })
      await post(server, apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      await post(server, apiKey, "/v1/attach", { customer: "cust", product: "pro" })
      const track = (value: number) => post(server, apiKey, "/v1/track", { customer: "cust", feature: "tokens", value })
      expect((await track(100)).body).toMatchObject({ allowed: true, code: "tracked", balance: 0 })
      const check = await post(server, apiKey, "/v1/check", { customer: "cust", feature: "tokens", value: 2 })
      expect(check.body).toMatchObject({ allowed: true, code: "overage_allowed" })
      const over = await track(3)
      expect(over.body).toMatchObject({ allowed: true, code: "tracked_overage", usage: 103, limit: 100, balance: -3 })
      expect(over.body.details.pricing).toMatchObject({ pricePerUnit: 2, usageModel: "included" })
      expect(over.body.details.message).toContain("overage")
      expect((await track(2)).body).toMatchObject({ allowed: true, code: "tracked_overage", usage: 105 })
      const capped = await track(1)
      expect(capped.body).toMatchObject({ allowed: false, code: "limit_exceeded", usage: 105 })
    })

    test("the customer-wide spend cap: block denies, notify allows; each sends overage.spend_cap_reached once a month", async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, { ...catalog, plans: catalog.plans.map((p) => ({ ...p, autoEnable: false })) })
      const customerIds: Record<string, string> = {}
      for (const [id, onLimitReached] of [
        ["blocky", "block"],
        ["notes", "notify"]
      ] as const) {
        customerIds[id] = (await post(server, apiKey, "/v1/customers", { id, email: `${id}@example.com` })).body.id
        await post(server, apiKey, "/v1/attach", { customer: id, product: "pro" })
        await post(server, apiKey, "/v1/customers/overage-limit", { customer: id, maxOverageAmount: 6, onLimitReached })
        await post(server, apiKey, "/v1/track", { customer: id, feature: "tokens", value: 100 })
      }
      const track = (customer: string, value: number) =>
        post(server, apiKey, "/v1/track", { customer, feature: "tokens", value })
      const capEvents = async () => {
        const response = await server.fetch("/v1/events?type=overage.spend_cap_reached", { apiKey })
        return ((await response.json()) as any).data as Array<{ data: Record<string, unknown> }>
      }
      // 2 per overage unit: 3 units cost exactly the cap of 6, a 4th passes it.
      expect((await track("blocky", 3)).body.code).toBe("tracked_overage")
      expect(await capEvents()).toEqual([])
      const blocked = await track("blocky", 1)
      expect(blocked.body).toMatchObject({ allowed: false, code: "limit_exceeded" })
      expect(blocked.body.details.message).toContain("spend cap")
      expect((await track("blocky", 1)).body.allowed).toBe(false)
      expect((await track("notes", 3)).body.code).toBe("tracked_overage")
      const notified = await track("notes", 1)
      expect(notified.body).toMatchObject({ allowed: true, code: "tracked_overage", usage: 104 })
      expect((await track("notes", 1)).body.allowed).toBe(true)
      const events = await capEvents()
      expect(
        events.map((e) => e.data).sort((a, b) => String(a.onLimitReached).localeCompare(String(b.onLimitReached)))
      ).toEqual([
        { customer: customerIds.blocky, maxOverageAmount: 6, spent: 6, onLimitReached: "block" },
        { customer: customerIds.notes, maxOverageAmount: 6, spent: 8, onLimitReached: "notify" }
      ])
    })

    test("credit systems: cost per unit, the credits object, insufficient_credits", async () => {
      const { check, track } = await setup()
      const images = await track({ feature: "images", value: 2 })
      expect(images.body).toMatchObject({
        allowed: true,
        code: "tracked",
        usage: 10,
        limit: 100,
        balance: 90,
        credits: {
          source: "credit_system",
          systemSlug: "ai-credits",
          costPerUnit: 5,
          bonusBalance: 0,
          addonBalance: 0,
          totalBalance: 90,
          plan: { used: 10, limit: 100, balance: 90 }
        }
      })
      const chat = await track({ feature: "chat", value: 3 })
      expect(chat.body).toMatchObject({ usage: 11.5, balance: 88.5, credits: { costPerUnit: 0.5, totalBalance: 88.5 } })
      expect((await check({ feature: "images", value: 17 })).body.allowed).toBe(true)
      const short = await track({ feature: "images", value: 18 })
      expect(short.body).toMatchObject({ allowed: false, code: "insufficient_credits", usage: 11.5 })
    })

    test("bonus then purchased credits after the plan allowance: addon_credits_used", async () => {
      const { orgId, track } = await setup()
      const grant = (amount: number, kind: "bonus" | "addon") =>
        server.run(Effect.flatMap(Credits, (c) => c.grant(orgId, "cust", "ai-credits", amount, kind)))
      await grant(10, "bonus")
      await grant(20, "addon")
      expect((await track({ feature: "images", value: 20 })).body).toMatchObject({ code: "tracked", balance: 0 })
      const fromCredits = await track({ feature: "images", value: 3 })
      expect(fromCredits.body).toMatchObject({
        allowed: true,
        code: "addon_credits_used",
        credits: { bonusBalance: 0, addonBalance: 15, totalBalance: 15 }
      })
      expect((await track({ feature: "images", value: 4 })).body.code).toBe("insufficient_credits")
      expect((await track({ feature: "images", value: 3 })).body).toMatchObject({
        code: "addon_credits_used",
        credits: { addonBalance: 0, totalBalance: 0 }
      })
    })

    test("boolean features, unlimited grants and grants summed over subscriptions", async () => {
      const { check, track } = await setup(["pro", "boost"])
      expect((await check({ feature: "sso" })).body).toMatchObject({
        allowed: true,
        code: "access_granted",
        limit: null
      })
      const unlimited = await track({ feature: "exports", value: 1_000_000 })
      expect(unlimited.body).toMatchObject({
        allowed: true,
        code: "tracked",
        limit: null,
        balance: null,
        usage: 1_000_000
      })
      // pro replaced free (same plan group); the boost add-on stacks: 100 + 5.
      expect((await check({ feature: "tokens", value: 1 })).body).toMatchObject({ limit: 105, balance: 105 })
    })

    test("trial limits apply while trialing", async () => {
      const { check, track } = await setup(["trial"])
      // free 10 + trial's trialLimit 3
      expect((await check({ feature: "tokens" })).body).toMatchObject({ limit: 13 })
      expect((await track({ feature: "tokens", value: 13 })).body.allowed).toBe(true)
      expect((await track({ feature: "tokens", value: 1 })).body.code).toBe("limit_exceeded")
    })

    test("usage-based graduated pricing: every unit billable, tier breakdown and current tier", async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, { ...catalog, plans: catalog.plans.map((p) => ({ ...p, autoEnable: false })) })
      await post(server, apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      await post(server, apiKey, "/v1/attach", { customer: "cust", product: "metered" })
      const tracked = await post(server, apiKey, "/v1/track", { customer: "cust", feature: "tokens", value: 14 })
      expect(tracked.body).toMatchObject({
        allowed: true,
        code: "tracked",
        limit: null,
        usage: 14,
        details: {
          pricing: {
            usageModel: "usage_based",
            ratingModel: "graduated",
            currentTier: { index: 1, startsAt: 10, endsAt: null, unitPrice: 0.5, flatFee: 100 }
          },
          // 10 × 1 + (4 × 0.5 + 100)
          tierBreakdown: [
            { tier: 0, units: 10, unitPrice: 1, flatFee: 0, amount: 10 },
            { tier: 1, units: 4, unitPrice: 0.5, flatFee: 100, amount: 102 }
          ]
        }
      })
    })

    test("the reset window rolls over lazily at its end", async () => {
      const { track } = await setup()
      expect((await track({ feature: "tokens", value: 10 })).body.balance).toBe(0)
      expect((await track({ feature: "tokens", value: 1 })).body.code).toBe("limit_exceeded")
      clock.advance(32 * 86_400_000)
      const fresh = await track({ feature: "tokens", value: 1 })
      expect(fresh.body).toMatchObject({ allowed: true, code: "tracked", usage: 1, balance: 9 })
    })

    test("every denial code arises from a real scenario", async () => {
      const { apiKey, check, track } = await setup()
      expect((await post(server, apiKey, "/v1/track", { customer: "ghost", feature: "tokens" })).body).toMatchObject({
        allowed: false,
        code: "customer_not_found"
      })
      expect((await track({ feature: "nope" })).body).toMatchObject({ allowed: false, code: "feature_not_found" })
      expect((await check({ feature: "sso" })).body).toMatchObject({ allowed: false, code: "feature_not_in_plan" })
      expect((await track({ feature: "tokens", entity: "seat-9" })).body).toMatchObject({
        allowed: false,
        code: "entity_not_found"
      })
      // A reference that is one customer's external id and another's email.
      await post(server, apiKey, "/v1/customers", { id: "amb@example.com", email: "a1@example.com" })
      await post(server, apiKey, "/v1/customers", { id: "a2", email: "amb@example.com" })
      expect(
        (await post(server, apiKey, "/v1/check", { customer: "amb@example.com", feature: "tokens" })).body
      ).toMatchObject({ allowed: false, code: "customer_ambiguous" })
      // An organization whose plans are not auto-enabled: a new customer has no subscription.
      const other = await server.createOrg()
      await syncCatalog(server, other.apiKey, {
        ...catalog,
        plans: catalog.plans.map((p) => ({ ...p, autoEnable: false }))
      })
      await post(server, other.apiKey, "/v1/customers", { id: "bare", email: "bare@example.com" })
      expect(
        (await post(server, other.apiKey, "/v1/check", { customer: "bare", feature: "tokens" })).body
      ).toMatchObject({ allowed: false, code: "no_active_subscription" })
    })

    test("customerData creates the customer, who gets the autoEnable plans at once", async () => {
      const { apiKey } = await setup()
      const first = await post(server, apiKey, "/v1/track", {
        customer: "newbie",
        feature: "tokens",
        value: 2,
        customerData: { email: "newbie@example.com", name: "Newbie" }
      })
      expect(first.body).toMatchObject({ allowed: true, code: "tracked", usage: 2, limit: 10 })
      const customer = await server.fetch("/v1/customers/newbie", { apiKey })
      expect(await customer.json()).toMatchObject({ externalId: "newbie", email: "newbie@example.com", name: "Newbie" })
    })

    test("invalid values are 400 and change nothing", async () => {
      const { track } = await setup()
      for (const value of [-1, 1.0000001, "3", null]) {
        const response = await track({ feature: "tokens", value })
        expect(response.status).toBe(400)
        expect(response.body).toMatchObject({ success: false, code: "invalid_request" })
      }
      expect((await track({ feature: "tokens", value: 0 })).body).toMatchObject({ allowed: true, usage: 0 })
    })

    test("Idempotency-Key: a retry returns the first answer and counts nothing; another body is 409", async () => {
      const { track, check } = await setup()
      const key = { "idempotency-key": "req-1" }
      const first = await track({ feature: "tokens", value: 3 }, key)
      const again = await track({ feature: "tokens", value: 3 }, key)
      expect(again.body).toEqual(first.body)
      expect((await check({ feature: "tokens" })).body.usage).toBe(3)
      const conflict = await track({ feature: "tokens", value: 4 }, key)
      expect(conflict.status).toBe(409)
      expect(conflict.body).toMatchObject({ success: false, code: "idempotency_conflict" })
      // A key is the organization's: a check with sendEvent under the same key is a different request.
      expect((await check({ feature: "tokens", value: 3, sendEvent: true }, key)).status).toBe(409)
    })

    test("pricing and pricing.currentTier are absent, not null, where none applies (decisions.md §1)", async () => {
      const { check, track } = await setup(["pro"])
      // A boolean feature has no pricing; neither has a denial.
      const sso = await check({ feature: "sso" })
      expect(sso.body).toMatchObject({ allowed: true, details: { tierBreakdown: [] } })
      expect("pricing" in sso.body.details).toBe(false)
      for (const denied of [await check({ feature: "no-such-feature" }), await track({ feature: "no-such-feature" })]) {
        expect(denied.body).toMatchObject({ allowed: false, code: "feature_not_found" })
        expect("pricing" in denied.body.details).toBe(false)
      }
      // Package pricing has no tier.
      for (const answer of [await check({ feature: "tokens" }), await track({ feature: "tokens" })]) {
        expect(answer.body.details.pricing).toMatchObject({ usageModel: "included", ratingModel: "package" })
        expect("currentTier" in answer.body.details.pricing).toBe(false)
      }
    })

    test("an answer stored under an Idempotency-Key with null pricing (before it was absent) replays without it", async () => {
      const { orgId, track } = await setup()
      const key = { "idempotency-key": "stored-before-upgrade" }
      const first = await track({ feature: "tokens", value: 1 }, key)
      expect(first.status).toBe(200)
      const old = {
        ...first.body,
        details: { ...first.body.details, pricing: { ...first.body.details.pricing, currentTier: null } }
      }
      await server.app.runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql`UPDATE idempotency_keys SET response = ${JSON.stringify(old)} WHERE organization_id = ${orgId} AND key = ${key["idempotency-key"]}`
        )
      )
      const replay = await track({ feature: "tokens", value: 1 }, key)
      expect(replay.status).toBe(200)
      expect(replay.body).toEqual(first.body)
      const denied = { ...first.body, allowed: false, details: { message: "m", pricing: null, tierBreakdown: [] } }
      await server.app.runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql`UPDATE idempotency_keys SET response = ${JSON.stringify(denied)} WHERE organization_id = ${orgId} AND key = ${key["idempotency-key"]}`
        )
      )
      const replayedDenial = await track({ feature: "tokens", value: 1 }, key)
      expect(replayedDenial.status).toBe(200)
      expect(replayedDenial.body.details).toEqual({ message: "m", tierBreakdown: [] })
    })

    test("unknown body fields are ignored: a track or check with fields of another SDK is answered as without them", async () => {
      const { check, orgId, track } = await setup()
      const before = await eventCount(orgId, "tokens")
      const extra = { occurredAt: "2026-10-01T00:00:00Z", properties: { plan: "x" }, idempotencyKey: 5 }
      const tracked = await track({ feature: "tokens", value: 2, ...extra })
      expect(tracked).toMatchObject({ status: 200, body: { allowed: true, code: "tracked", usage: 2 } })
      expect(await eventCount(orgId, "tokens")).toBe(before + 1)
      expect((await check({ feature: "tokens", ...extra })).body).toMatchObject({ allowed: true, usage: 2 })
    })

    test("20 concurrent retries of one Idempotency-Key count one event", async () => {
      const { check, orgId, track } = await setup()
      const before = await eventCount(orgId, "tokens")
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => track({ feature: "tokens", value: 1 }, { "idempotency-key": "burst" }))
      )
      expect(answers.every((a) => a.status === 200 && a.body.allowed)).toBe(true)
      expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1)
      expect(await eventCount(orgId, "tokens")).toBe(before + 1)
      expect((await check({ feature: "tokens" })).body.usage).toBe(1)
    })

    test("100 concurrent check+sendEvent against a remaining balance of 10 allow exactly 10", async () => {
      const { apiKey, id: orgId } = await server.createOrg()
      await syncCatalog(server, apiKey, {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 15 }] }]
      })
      await post(server, apiKey, "/v1/customers", { id: "hot", email: "hot@example.com" })
      expect(
        (await post(server, apiKey, "/v1/track", { customer: "hot", feature: "calls", value: 5 })).body.balance
      ).toBe(10)
      const answers = await Promise.all(
        Array.from({ length: 100 }, () =>
          post(server, apiKey, "/v1/check", { customer: "hot", feature: "calls", value: 1, sendEvent: true })
        )
      )
      expect(answers.every((a) => a.status === 200)).toBe(true)
      expect(answers.filter((a) => a.body.allowed).length).toBe(10)
      expect(answers.filter((a) => !a.body.allowed).every((a) => a.body.code === "limit_exceeded")).toBe(true)
      const final = await post(server, apiKey, "/v1/check", { customer: "hot", feature: "calls", value: 0 })
      expect(final.body).toMatchObject({ usage: 15, limit: 15, balance: 0 })
      expect(await eventCount(orgId, "calls")).toBe(11)
      const events = await server.app.runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ n: number; total: number }>`SELECT COUNT(*) AS n, SUM(e.value) AS total FROM usage_events e
          JOIN customers c ON c.organization_id = e.organization_id AND c.id = e.customer_id
          WHERE e.organization_id = ${orgId} AND c.external_id = 'hot'`
        )
      )
      expect(Number(events[0]!.n)).toBe(11)
      expect(Number(events[0]!.total)).toBe(15_000_000)
    })
  })
}
