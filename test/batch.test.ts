import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Credits } from "../src/credits/Credits.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * `POST /v1/track/batch` and event time (decisions.md §12): items decided in order and independently by track's
 * rules, accepted ones committed together; keys shared with track; timestamps bounded and placed at their instant.
 */
const DAY = 86_400_000
const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" },
    { slug: "seats", name: "Seats", type: "metered", meterType: "non_consumable" },
    { slug: "sso", name: "SSO", type: "boolean" }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      features: [{ slug: "tokens", limit: 100, reset: "monthly" }, { slug: "seats", limit: 5 }, { slug: "sso" }]
    }
  ]
}

for (const database of databases()) {
  describe(`track batches and event time on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const batch = (events: Array<Record<string, unknown>>) => post(server, org.apiKey, "/v1/track/batch", { events })
      const track = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
        post(server, org.apiKey, "/v1/track", { customerData: {}, ...body }, headers)
      const usage = async (customer: string) =>
        (await post(server, org.apiKey, "/v1/check", { customer, feature: "tokens", value: 0 })).body.usage as number
      return { org, batch, track, usage }
    }

    test("items answered in order: allowed, denied and refused items side by side; only the allowed recorded", async () => {
      const { batch, usage } = await setup()
      const item = (value: number, extra: Record<string, unknown> = {}) => ({
        customer: "b1",
        feature: "tokens",
        value,
        customerData: {},
        ...extra
      })
      const answer = await batch([
        item(60),
        item(50),
        item(30),
        item(1, { timestamp: Date.now() + 10 * 60_000 }),
        item(1, { feature: "nope" }),
        item(10)
      ])
      expect(answer.status).toBe(200)
      const results = answer.body.results
      expect(results).toHaveLength(6)
      expect(results[0]).toMatchObject({ allowed: true, code: "tracked", usage: 60, balance: 40 })
      expect(results[1]).toMatchObject({ allowed: false, code: "limit_exceeded", usage: 60 })
      expect(results[2]).toMatchObject({ allowed: true, code: "tracked", usage: 90 })
      expect(results[3]).toMatchObject({
        success: false,
        error: "Bad Request",
        code: "invalid_request",
        details: [{ path: "timestamp", message: "must be at most 5 minutes in the future" }]
      })
      expect(results[4]).toMatchObject({ allowed: false, code: "feature_not_found" })
      expect(results[5]).toMatchObject({ allowed: true, code: "tracked", usage: 100, balance: 0 })
      expect(await usage("b1")).toBe(100)
    })

    test("one customer's items: each event keeps its own value, metadata and instant, whatever the items share", async () => {
      const { org, batch } = await setup()
      // The customer exists: its items share one read (a new one's are read again each, after its creation).
      expect((await post(server, org.apiKey, "/v1/customers", { id: "m1", email: "m1@example.com" })).status).toBe(200)
      const item = (value: number, extra: Record<string, unknown> = {}) => ({
        customer: "m1",
        feature: "tokens",
        value,
        ...extra
      })
      const hourAgo = Date.now() - 3_600_000
      const answer = await batch([
        item(2),
        item(2),
        item(3),
        item(2, { metadata: { run: "a" } }),
        item(2, { metadata: { run: "b" } }),
        item(2, { timestamp: hourAgo }),
        item(2)
      ])
      expect(answer.body.results.map((r: { usage: number }) => r.usage)).toEqual([2, 4, 7, 9, 11, 13, 15])
      const events = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ value: string | number; metadata: string; createdAt: string | number }>`
            SELECT e.value, e.metadata, e.created_at FROM usage_events e
              JOIN customers c ON c.organization_id = e.organization_id AND c.id = e.customer_id
            WHERE e.organization_id = ${org.id} AND c.external_id = 'm1'`
        )
      )
      const stored = events.map(
        (e) => `${Number(e.value) / 1_000_000} ${e.metadata} ${Number(e.createdAt) === hourAgo}`
      )
      expect(stored.sort()).toEqual(
        [
          "2 {} false",
          "2 {} false",
          "3 {} false",
          '2 {"run":"a"} false',
          '2 {"run":"b"} false',
          "2 {} true",
          "2 {} false"
        ].sort()
      )
    })

    test("references resolve as track resolves them: id, external id, email in any case, ambiguous, unknown", async () => {
      const { org, batch, track } = await setup()
      const create = (body: Record<string, unknown>) => post(server, org.apiKey, "/v1/customers", body)
      const alice = await create({ id: "alice", email: "Alice@Example.com" })
      // One customer's external id is Carol's email: that reference names two customers.
      expect((await create({ id: "bob", email: "bob@example.com" })).status).toBe(200)
      expect((await create({ id: "carol@example.com", email: "c2@example.com" })).status).toBe(200)
      expect((await create({ id: "carol", email: "carol@example.com" })).status).toBe(200)
      expect(alice.status).toBe(200)
      const refs = [alice.body.id, "alice", "ALICE@example.COM", "carol@example.com", "nobody", "bob"]
      const answer = await batch(refs.map((customer) => ({ customer, feature: "tokens", value: 1 })))
      expect(answer.status).toBe(200)
      const singles = []
      for (const customer of refs)
        singles.push((await track({ customer, feature: "tokens", value: 0, customerData: undefined })).body)
      expect(answer.body.results.map((r: any) => r.code)).toEqual([
        "tracked",
        "tracked",
        "tracked",
        "customer_ambiguous",
        "customer_not_found",
        "tracked"
      ])
      // The same codes as single tracks of the same references; Alice's three items drew from one balance.
      expect(singles.map((r: any) => r.code)).toEqual(answer.body.results.map((r: any) => r.code))
      expect(answer.body.results[2]).toMatchObject({ usage: 3 })
      expect(singles[0]).toMatchObject({ usage: 3 })
    })

    test("credit systems: two features drawing from one credit balance in one batch, in order, exact", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        features: [
          { slug: "gen", name: "Gen", type: "metered" },
          { slug: "img", name: "Img", type: "metered" }
        ],
        creditSystems: [
          {
            slug: "cr",
            name: "Credits",
            features: [
              { feature: "gen", creditCost: 2 },
              { feature: "img", creditCost: 5 }
            ]
          }
        ],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "cr", limit: 50, reset: "monthly" }] }]
      })
      const item = (customer: string, feature: string, value: number) => ({
        customer,
        feature,
        value,
        customerData: {}
      })
      const answer = await post(server, org.apiKey, "/v1/track/batch", {
        events: [
          item("k1", "gen", 5), // 10 credits
          item("k2", "img", 1), // another customer's 5
          item("k1", "img", 4), // 20: 30
          item("k1", "gen", 10), // 20: 50, the whole grant
          item("k1", "gen", 1), // 2 more do not fit
          item("k1", "img", 0) // nothing, allowed
        ]
      })
      expect(answer.status).toBe(200)
      expect(answer.body.results.map((r: any) => [r.allowed, r.code, r.usage])).toEqual([
        [true, "tracked", 10],
        [true, "tracked", 5],
        [true, "tracked", 30],
        [true, "tracked", 50],
        [false, "insufficient_credits", 50],
        [true, "tracked", 50]
      ])
      const usage = async (customer: string, feature: string) =>
        (await post(server, org.apiKey, "/v1/check", { customer, feature, value: 0 })).body.usage
      expect([await usage("k1", "gen"), await usage("k1", "img"), await usage("k2", "gen")]).toEqual([50, 50, 5])
    })

    test("bonus credits grant a feature no plan includes, in a batch as in a single track", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        features: [
          { slug: "gen", name: "Gen", type: "metered" },
          { slug: "other", name: "Other", type: "metered" }
        ],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 2 }] }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "other", limit: 5 }] }]
      })
      const batch = (value: number) =>
        post(server, org.apiKey, "/v1/track/batch", {
          events: [{ customer: "k1", feature: "gen", value, customerData: {} }]
        })
      expect((await batch(1)).body.results[0]).toMatchObject({ allowed: false, code: "feature_not_in_plan" })
      await server.run(Effect.flatMap(Credits, (c) => c.grant(org.id, "k1", "cr", 10, "bonus")))
      // The batch's read still brings the credit system's balance: 3 units of 2 credits from the 10 bonus ones.
      const drawn = (await batch(3)).body.results[0]
      expect(drawn).toMatchObject({ allowed: true, credits: { bonusBalance: 4 } })
      const single = await post(server, org.apiKey, "/v1/track", { customer: "k1", feature: "gen", value: 2 })
      expect(single.body).toMatchObject({ allowed: true, code: drawn.code, credits: { bonusBalance: 0 } })
      expect((await batch(1)).body.results[0]).toMatchObject({ allowed: false })
    })

    test("counts and booleans in a batch; several customers and features in one", async () => {
      const { batch } = await setup()
      const answer = await batch([
        { customer: "b2", feature: "seats", value: 3, customerData: {} },
        { customer: "b2", feature: "seats", value: 6 },
        { customer: "b2", feature: "sso", value: 1 },
        { customer: "b3", feature: "tokens", value: 7, customerData: {} }
      ])
      expect(answer.body.results.map((r: any) => [r.allowed, r.code])).toEqual([
        [true, "tracked"],
        [false, "limit_exceeded"],
        [true, "tracked"],
        [true, "tracked"]
      ])
    })

    test("a body that is not a batch, an empty batch and 1,001 items are 400 and change nothing", async () => {
      const { org, batch, usage } = await setup()
      const one = { customer: "b4", feature: "tokens", value: 1, customerData: {} }
      for (const body of [
        {},
        { events: [] },
        { events: Array.from({ length: 1001 }, () => one) },
        [one],
        { events: one },
        { events: [one, 5] },
        { events: [one, null] },
        { events: [one, [one]] }
      ]) {
        const answer = await post(server, org.apiKey, "/v1/track/batch", body)
        expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 400, code: "invalid_request" })
      }
      expect((await batch([one])).body.results[0]).toMatchObject({ allowed: true, usage: 1 })
      expect(await usage("b4")).toBe(1)
    })

    test("an item that fails the item schema is answered in its place with a track's 400 body; the others count", async () => {
      const { org, batch, usage } = await setup()
      const ok = { customer: "b5", feature: "tokens", value: 2, customerData: {} }
      const invalid = [{ value: -5 }, { customer: "b5", feature: "tokens", value: 1e13, idempotencyKey: "never-used" }]
      const answer = await batch([ok, invalid[0]!, invalid[1]!, ok])
      expect(answer.status).toBe(200)
      const results = answer.body.results
      expect(results).toHaveLength(4)
      expect(results[0]).toMatchObject({ allowed: true, code: "tracked", usage: 2 })
      expect(results[3]).toMatchObject({ allowed: true, code: "tracked", usage: 4 })
      // Each invalid item's answer is, byte for byte, the body a track of it gets (without the batch's own key).
      for (const [i, item] of invalid.entries()) {
        const { idempotencyKey: _, ...body } = item as Record<string, unknown>
        const single = await post(server, org.apiKey, "/v1/track", body)
        expect(single.status).toBe(400)
        expect(results[i + 1]).toEqual(single.body)
        expect(single.body.details.map((d: { path: string }) => d.path)).toContain("value")
      }
      expect(results[1].details.map((d: { path: string }) => d.path)).toEqual(["customer", "feature", "value"])
      expect(results[2]).toMatchObject({ code: "invalid_request", details: [{ path: "value" }] })
      expect(await usage("b5")).toBe(4)
      // The invalid item's key was never used: a track with it and another body is not a repeat of anything.
      const keyed = await post(server, org.apiKey, "/v1/track", ok, { "idempotency-key": "never-used" })
      expect(keyed.body).toMatchObject({ allowed: true, usage: 6 })
      // A batch of invalid items only: 200, each answered, nothing recorded.
      const none = await batch([{ customer: "b5" }, { customer: "b5", feature: "tokens", value: -1 }])
      expect(none.status).toBe(200)
      expect(none.body.results.map((r: { code: string }) => r.code)).toEqual(["invalid_request", "invalid_request"])
      expect(await usage("b5")).toBe(6)
    })

    test("idempotency keys: one key space with track; repeats inside a batch; another body is a 409 item", async () => {
      const { org, batch, track, usage } = await setup()
      const first = await track({ customer: "b5", feature: "tokens", value: 5 }, { "Idempotency-Key": "shared" })
      expect(first.body).toMatchObject({ allowed: true, usage: 5 })
      const answer = await batch([
        { customer: "b5", feature: "tokens", value: 5, customerData: {}, idempotencyKey: "shared" },
        { customer: "b5", feature: "tokens", value: 2, idempotencyKey: "new" },
        { customer: "b5", feature: "tokens", value: 2, idempotencyKey: "new" },
        { customer: "b5", feature: "tokens", value: 3, idempotencyKey: "new" }
      ])
      const results = answer.body.results
      expect(results[0]).toMatchObject({ allowed: true, usage: 5 })
      expect(results[1]).toMatchObject({ allowed: true, usage: 7 })
      expect(results[2]).toEqual(results[1])
      expect(results[3]).toMatchObject({ success: false, code: "idempotency_conflict" })
      expect(await usage("b5")).toBe(7)
      const again = await post(
        server,
        org.apiKey,
        "/v1/track",
        { customer: "b5", feature: "tokens", value: 2 },
        {
          "Idempotency-Key": "new"
        }
      )
      expect(again.body).toMatchObject({ allowed: true, usage: 7 })
      expect(await usage("b5")).toBe(7)
    })

    test("concurrent batches sharing a key: one of them records it, the others repeat its answer or are 409", async () => {
      const { batch, usage } = await setup()
      await batch([{ customer: "b6", feature: "tokens", value: 0, customerData: {} }])
      const shared = { customer: "b6", feature: "tokens", value: 4, idempotencyKey: "together" }
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, (_, i) =>
          batch([shared, { customer: "b6", feature: "tokens", value: 1, idempotencyKey: `own-${i}` }])
        ),
        batch([{ ...shared, value: 5 }])
      ])
      expect(answers.every((a) => a.status === 200)).toBe(true)
      const sharedAnswers = answers.slice(0, 6).map((a) => a.body.results[0])
      const conflicting = answers[6]!.body.results[0]
      // Whichever body came first recorded the key; every other use of it repeats that answer or is a conflict.
      const recordedFive = conflicting.allowed === true
      expect(sharedAnswers.every((r: any) => (recordedFive ? r.code === "idempotency_conflict" : r.allowed))).toBe(true)
      if (!recordedFive) {
        expect(conflicting).toMatchObject({ success: false, code: "idempotency_conflict" })
        expect(new Set(sharedAnswers.map((r: any) => r.usage)).size).toBe(1)
      }
      expect(await usage("b6")).toBe((recordedFive ? 5 : 4) + 6)
    })

    test("a stored key: a batch's item with another body is a 409, and a later one with the stored body repeats it", async () => {
      const { batch, usage } = await setup()
      const first = await batch([
        { customer: "b7", feature: "tokens", value: 4, idempotencyKey: "k", customerData: {} }
      ])
      expect(first.body.results[0]).toMatchObject({ allowed: true, usage: 4 })
      // As when two batches merge into one transaction: the other body first, then the stored one.
      const again = await batch([
        { customer: "b7", feature: "tokens", value: 5, idempotencyKey: "k" },
        { customer: "b7", feature: "tokens", value: 4, idempotencyKey: "k", customerData: {} }
      ])
      expect(again.body.results[0]).toMatchObject({ success: false, code: "idempotency_conflict" })
      expect(again.body.results[1]).toEqual(first.body.results[0])
      expect(await usage("b7")).toBe(4)
    })

    test("batches and single tracks racing for one balance admit exactly the remaining 100", async () => {
      const { batch, track, usage } = await setup()
      await track({ customer: "race", feature: "tokens", value: 0 })
      const item = { customer: "race", feature: "tokens", value: 1 }
      const [batches, singles] = await Promise.all([
        Promise.all(Array.from({ length: 6 }, () => batch(Array.from({ length: 20 }, () => item)))),
        Promise.all(Array.from({ length: 60 }, () => track(item)))
      ])
      const admitted =
        batches.flatMap((b) => b.body.results).filter((r: any) => r.allowed === true).length +
        singles.filter((s) => s.body.allowed === true).length
      expect(batches.every((b) => b.status === 200)).toBe(true)
      expect(admitted).toBe(100)
      expect(await usage("race")).toBe(100)
    })

    test("timestamp: bounds named in a 400; a plain check refuses it; late usage lands at its own instant", async () => {
      const { org, track } = await setup()
      const now = Date.now()
      const tooOld = await track({ customer: "t1", feature: "tokens", value: 1, timestamp: now - 36 * DAY })
      expect(tooOld.status).toBe(400)
      expect(tooOld.body.details).toEqual([{ path: "timestamp", message: "must be at most 35 days in the past" }])
      const ahead = await track({ customer: "t1", feature: "tokens", value: 1, timestamp: now + 6 * 60_000 })
      expect(ahead.body.details).toEqual([{ path: "timestamp", message: "must be at most 5 minutes in the future" }])
      const checked = await post(server, org.apiKey, "/v1/check", {
        customer: "t1",
        feature: "tokens",
        timestamp: now
      })
      expect(checked.status).toBe(400)
      expect((await track({ customer: "t1", feature: "tokens", value: 1, timestamp: "yesterday" })).status).toBe(400)
      // Ten days ago, as ISO 8601 with an offset; and as Unix milliseconds.
      const tenDaysAgo = new Date(now - 10 * DAY)
      const iso = tenDaysAgo.toISOString().replace("Z", "+00:00")
      expect((await track({ customer: "t1", feature: "tokens", value: 4, timestamp: iso })).body.usage).toBe(4)
      expect((await track({ customer: "t1", feature: "tokens", value: 2, timestamp: now - 2 * DAY })).body.usage).toBe(
        6
      )
      const sent = await post(server, org.apiKey, "/v1/check", {
        customer: "t1",
        feature: "tokens",
        value: 1,
        sendEvent: true,
        timestamp: now - DAY
      })
      expect(sent.body).toMatchObject({ allowed: true, usage: 7 })
      const history = await server.fetch(`/v1/customers/t1/usage/history?range=30d&feature=tokens`, {
        apiKey: org.apiKey
      })
      const body = (await history.json()) as { series: Array<{ bucket: string; value: number }> }
      const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)
      const byDay = Object.fromEntries(body.series.filter((b) => b.value > 0).map((b) => [b.bucket, b.value]))
      expect(byDay).toEqual({ [day(now - 10 * DAY)]: 4, [day(now - 2 * DAY)]: 2, [day(now - DAY)]: 1 })
    })

    test("late usage either side of midnight in a +05:45 zone lands on its own local day; the window is arrival's", async () => {
      const { org, batch } = await setup()
      // Two days ago, 23:59:59.999 and 00:00 in Asia/Kathmandu (UTC+05:45): 18:14:59.999 and 18:15 UTC.
      const day = new Date(Date.now() - 3 * DAY)
      const midnightUtc =
        Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate() + 1) - (5 * 60 + 45) * 60_000
      const answer = await batch([
        { customer: "tz", feature: "tokens", value: 3, customerData: {}, timestamp: midnightUtc - 1 },
        { customer: "tz", feature: "tokens", value: 5, timestamp: new Date(midnightUtc).toISOString() }
      ])
      expect(answer.body.results.map((r: any) => r.usage)).toEqual([3, 8])
      // Arrival's window: resetsAt is the end of the current month, whatever the events' instants.
      expect(answer.body.results[1].resetsAt > new Date().toISOString()).toBe(true)
      const history = await server.fetch(
        `/v1/customers/tz/usage/history?range=7d&feature=tokens&timezone=Asia/Kathmandu`,
        { apiKey: org.apiKey }
      )
      const series = ((await history.json()) as { series: Array<{ bucket: string; value: number }> }).series
      const local = (ms: number) => new Date(ms + (5 * 60 + 45) * 60_000).toISOString().slice(0, 10)
      expect(Object.fromEntries(series.filter((b) => b.value > 0).map((b) => [b.bucket, b.value]))).toEqual({
        [local(midnightUtc - 1)]: 3,
        [local(midnightUtc)]: 5
      })
      expect(local(midnightUtc - 1)).not.toBe(local(midnightUtc))
    })
  })
}
