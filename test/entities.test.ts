import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { makeShiftedClock } from "./support/clock.ts"
import { type Client, databases, failure, ok, startServer, type TestServer } from "./support/harness.ts"

const DAY = 86_400_000

const catalog = {
  features: [
    { slug: "seats", name: "Seats", type: "metered", meterType: "non_consumable", unit: "seats" },
    { slug: "licenses", name: "Licenses", type: "metered", meterType: "non_consumable" },
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "sso", name: "SSO", type: "boolean" }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      interval: "monthly",
      autoEnable: true,
      features: [{ slug: "seats", limit: 3 }, { slug: "tokens", limit: 10 }, { slug: "sso" }]
    },
    {
      slug: "team",
      name: "Team",
      interval: "monthly",
      features: [{ slug: "seats", limit: 2, overage: "charge", overagePrice: 500 }]
    },
    // No interval: the plan never renews, so there is no period end to wait for.
    { slug: "lifetime", name: "Lifetime", planGroup: "lifetime", features: [{ slug: "licenses", limit: 2 }] },
    { slug: "big", name: "Big", planGroup: "big", interval: "monthly", features: [{ slug: "licenses", limit: 5 }] }
  ]
}

for (const database of databases()) {
  describe(`entities on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const post = async (apiKey: string, path: string, body: unknown) => {
      const response = await server.fetch(path, { method: "POST", apiKey, body: JSON.stringify(body) })
      return { status: response.status, body: (await response.json()) as any }
    }

    /** A fresh organization with the catalog and one customer ("cust") on the free plan (autoEnable). */
    const setup = async (plans: ReadonlyArray<string> = []) => {
      const { apiKey } = await server.createOrg()
      const synced = await post(apiKey, "/v1/sync", catalog)
      expect(synced.status).toBe(200)
      const client: Client = await server.client(apiKey)
      await ok(client.customers.createCustomer({ payload: { id: "cust", email: "cust@example.com" } }))
      for (const product of plans) await ok(client.subscriptions.attach({ payload: { customer: "cust", product } }))
      const add = (entity: string, feature = "seats") =>
        client.entities.addEntity({ payload: { customer: "cust", feature, entity } })
      const remove = (entity: string, feature = "seats") =>
        client.entities.removeEntity({ payload: { customer: "cust", feature, entity } })
      const check = (body: Record<string, unknown>) => post(apiKey, "/v1/check", { customer: "cust", ...body })
      const track = (body: Record<string, unknown>) => post(apiKey, "/v1/track", { customer: "cust", ...body })
      return { apiKey, client, add, remove, check, track }
    }

    test("adds up to the limit, then 409 limit_exceeded", async () => {
      const { add, client } = await setup()
      const first = await ok(add("alice"))
      expect(first).toEqual({
        success: true,
        entityId: "alice",
        featureId: expect.stringMatching(/^feat_/),
        count: 1,
        limit: 3,
        remaining: 2,
        restored: false
      })
      expect(await ok(add("bob"))).toMatchObject({ count: 2, remaining: 1 })
      expect(await ok(add("carol"))).toMatchObject({ count: 3, remaining: 0 })
      const denied = await failure(add("dave"))
      expect(denied).toMatchObject({ _tag: "Conflict", code: "limit_exceeded" })
      expect(denied.message).toContain("3")
      // The feature by id works too, with name, email and metadata.
      const byId = await failure(
        client.entities.addEntity({
          payload: {
            customer: "cust",
            feature: first.featureId,
            entity: "erin",
            name: "Erin",
            email: "erin@example.com",
            metadata: { role: "admin" }
          }
        })
      )
      expect(byId).toMatchObject({ code: "limit_exceeded" })
    })

    test("an active entity again is 409 entity_exists", async () => {
      const { add } = await setup()
      await ok(add("alice"))
      expect(await failure(add("alice"))).toMatchObject({ _tag: "Conflict", code: "entity_exists" })
    })

    test("remove keeps counting until the period ends; adding it back restores it", async () => {
      const { add, remove } = await setup()
      await ok(add("alice"))
      await ok(add("bob"))
      await ok(add("carol"))
      expect(await ok(remove("alice"))).toEqual({ success: true, entityId: "alice", count: 3 })
      // Idempotent while pending.
      expect(await ok(remove("alice"))).toEqual({ success: true, entityId: "alice", count: 3 })
      // Still counts: no room for a new one...
      expect(await failure(add("dave"))).toMatchObject({ code: "limit_exceeded" })
      // ...but the pending one comes back, with no limit check.
      expect(await ok(add("alice"))).toMatchObject({
        entityId: "alice",
        count: 3,
        limit: 3,
        remaining: 0,
        restored: true
      })
      expect(await failure(add("alice"))).toMatchObject({ code: "entity_exists" })
    })

    test("a pending removal stops counting at the end of the billing period", async () => {
      const { add, check, remove } = await setup()
      await ok(add("alice"))
      await ok(add("bob"))
      await ok(add("carol"))
      await ok(remove("alice"))
      clock.advance(32 * DAY)
      try {
        expect((await check({ feature: "seats", value: 1 })).body).toMatchObject({ allowed: true, usage: 2 })
        expect(await failure(remove("alice"))).toMatchObject({ _tag: "NotFound", code: "entity_not_found" })
        // Past its removal, the name is new again: not restored, limit checked.
        expect(await ok(add("alice"))).toMatchObject({ count: 3, restored: false })
      } finally {
        clock.advance(-32 * DAY)
      }
    })

    test("check on the feature: allowed below the limit, limit_exceeded at it", async () => {
      const { add, check } = await setup()
      await ok(add("alice"))
      await ok(add("bob"))
      expect((await check({ feature: "seats", value: 1 })).body).toMatchObject({
        allowed: true,
        code: "access_granted",
        usage: 2,
        limit: 3,
        balance: 1
      })
      expect((await check({ feature: "seats", value: 2 })).body).toMatchObject({
        allowed: false,
        code: "limit_exceeded"
      })
      await ok(add("carol"))
      const full = await check({ feature: "seats", value: 1 })
      expect(full.status).toBe(200)
      expect(full.body).toMatchObject({ allowed: false, code: "limit_exceeded", usage: 3, limit: 3, balance: 0 })
    })

    test("check and track naming an unknown entity answer entity_not_found", async () => {
      const { add, check, track } = await setup()
      await ok(add("alice"))
      for (const call of [track, check]) {
        const answer = await call({ feature: "tokens", entity: "nobody" })
        expect(answer.status).toBe(200)
        expect(answer.body).toMatchObject({ allowed: false, code: "entity_not_found" })
      }
      expect((await track({ feature: "tokens", entity: "alice" })).body).toMatchObject({
        allowed: true,
        code: "tracked"
      })
    })

    test("overage charge lets adds pass the limit", async () => {
      const { add } = await setup(["team"])
      // Team replaces free (same default group): 2 seats, overage charged.
      await ok(add("a"))
      await ok(add("b"))
      const third = await ok(add("c"))
      expect(third).toMatchObject({ count: 3, limit: 2, remaining: 0, restored: false })
    })

    test("the customer's per-feature config caps or blocks overage of entities", async () => {
      const { add, client } = await setup(["team"])
      await ok(
        client.customers.setFeatureConfig({
          payload: { customer: "cust", feature: "seats", overage: "charge", maxOverageUnits: 1 }
        })
      )
      await ok(add("a"))
      await ok(add("b"))
      expect(await ok(add("c"))).toMatchObject({ count: 3, limit: 2 })
      expect(await failure(add("d"))).toMatchObject({ code: "limit_exceeded" })
      await ok(client.customers.setFeatureConfig({ payload: { customer: "cust", feature: "seats", overage: "block" } }))
      expect(await failure(add("d"))).toMatchObject({ code: "limit_exceeded" })
    })

    test("concurrent adds never pass the limit", async () => {
      const { add } = await setup()
      const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => ok(add(`member-${i}`))))
      expect(results.filter((r) => r.status === "fulfilled").length).toBe(3)
      const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected")
      for (const r of rejected) expect(String(r.reason)).toContain("limit_exceeded")
    })

    test("concurrent adds with slots left admit exactly that many", async () => {
      const { add } = await setup(["big"])
      // licenses: 5 on big; fill 2, leaving 3 slots.
      await ok(add("l-0", "licenses"))
      await ok(add("l-1", "licenses"))
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          failure(add(`c-${i}`, "licenses")).then(
            (e): string => ("code" in e ? e.code : e._tag),
            () => "added"
          )
        )
      )
      expect(results.filter((r) => r === "added").length).toBe(3)
      expect(results.filter((r) => r === "limit_exceeded").length).toBe(7)
    })

    test("removing an entity of a never-renewing plan frees its slot at once", async () => {
      const { add, remove } = await setup(["lifetime"])
      await ok(add("x", "licenses"))
      await ok(add("y", "licenses"))
      expect(await failure(add("z", "licenses"))).toMatchObject({ code: "limit_exceeded" })
      expect(await ok(remove("x", "licenses"))).toEqual({ success: true, entityId: "x", count: 1 })
      expect(await ok(add("z", "licenses"))).toMatchObject({ count: 2, remaining: 0, restored: false })
      // Removed for good: adding it again is a new entity, not a restore.
      expect(await failure(add("x", "licenses"))).toMatchObject({ code: "limit_exceeded" })
    })

    test("unknown entity on remove is 404 entity_not_found", async () => {
      const { remove } = await setup()
      expect(await failure(remove("ghost"))).toMatchObject({ _tag: "NotFound", code: "entity_not_found" })
    })

    test("references: unknown customer or feature are 404; boolean and consumable features are 400", async () => {
      const { client, add } = await setup()
      const unknownCustomer = await failure(
        client.entities.addEntity({
          payload: { customer: "nobody", feature: "seats", entity: "a" }
        })
      )
      expect(unknownCustomer).toMatchObject({ _tag: "NotFound", code: "customer_not_found" })
      expect(await failure(add("a", "nope"))).toMatchObject({ _tag: "NotFound", code: "feature_not_found" })
      expect(
        await failure(
          client.entities.removeEntity({
            payload: { customer: "cust", feature: "nope", entity: "a" }
          })
        )
      ).toMatchObject({ _tag: "NotFound", code: "feature_not_found" })
      for (const feature of ["sso", "tokens"]) {
        const error = await failure(add("a", feature))
        expect(error).toMatchObject({ _tag: "BadRequest", code: "invalid_request" })
        expect(error.message).toContain("non_consumable")
      }
    })

    test("a feature no plan of the customer includes is 409 limit_exceeded", async () => {
      const { add } = await setup()
      const error = await failure(add("a", "licenses"))
      expect(error).toMatchObject({ _tag: "Conflict", code: "limit_exceeded" })
      expect(error.message).toContain("licenses")
    })

    test("entities of another organization are invisible", async () => {
      const one = await setup()
      await ok(one.add("alice"))
      const two = await setup()
      expect(await failure(two.remove("alice"))).toMatchObject({ code: "entity_not_found" })
      expect(await ok(two.add("alice"))).toMatchObject({ count: 1, restored: false })
    })
  })
}
