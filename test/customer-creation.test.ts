import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock, Effect } from "effect"
import { Entitlements } from "../src/entitlements/Engine.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * Customers created on first use (customerData on track, check and attach, and POST /v1/customers): creation and the
 * autoEnable subscriptions are one step that concurrent requests wait for or see whole, and a request's records all
 * carry the one instant it read.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" }],
  plans: [{ slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 1000, reset: "daily" }] }]
}

const CONCURRENT = 20
const ROUNDS = 5

for (const database of databases()) {
  describe(`customers created on first use, on ${database.name}`, () => {
    let server: TestServer
    // Every reading of the clock is a new millisecond: a request that reads it twice stamps two instants.
    const clock = makeShiftedClock({ stepping: true })
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const { apiKey, id: orgId } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      return { apiKey, orgId }
    }

    const get = async (apiKey: string, path: string) => {
      const response = await server.fetch(path, { apiKey })
      expect(response.status).toBe(200)
      return (await response.json()) as any
    }

    /** The organization's rows of one customer (by external id), as stored. */
    const stored = (orgId: string, externalId: string) =>
      server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const customers = yield* sql<{ id: string; createdAt: number }>`SELECT id, created_at FROM customers
          WHERE organization_id = ${orgId} AND external_id = ${externalId}`
          const ids = customers.map((c) => c.id)
          const inIds = ids.length === 0 ? sql`1 = 0` : sql`customer_id IN ${sql.in(ids)}`
          const subscriptions = yield* sql<{ planId: string; status: string; startedAt: number }>`SELECT plan_id,
            status, started_at FROM subscriptions WHERE organization_id = ${orgId} AND ${inIds}`
          const events = yield* sql<{ id: string; value: number; createdAt: number }>`SELECT id, value, created_at
            FROM usage_events WHERE organization_id = ${orgId} AND ${inIds}`
          const balances = yield* sql<{ windowStart: number; windowEnd: number | null; used: number }>`SELECT
            window_start, window_end, used FROM balances WHERE organization_id = ${orgId} AND ${inIds}`
          const rollups = yield* sql<{ value: number; records: number }>`SELECT value, records FROM usage_rollups
            WHERE organization_id = ${orgId} AND ${inIds}`
          const n = (v: unknown) => Number(v)
          return {
            customers: customers.map((c) => ({ ...c, createdAt: n(c.createdAt) })),
            subscriptions: subscriptions.map((s) => ({ ...s, startedAt: n(s.startedAt) })),
            events: events.map((e) => ({ ...e, value: n(e.value), createdAt: n(e.createdAt) })),
            balances: balances.map((b) => ({
              windowStart: n(b.windowStart),
              windowEnd: b.windowEnd === null ? null : n(b.windowEnd),
              used: n(b.used)
            })),
            rollups: rollups.map((r) => ({ value: n(r.value), records: n(r.records) }))
          }
        })
      )

    /** Every event at or after the subscription's start and inside the balance's window, which counts exactly them. */
    const expectEventsInWindow = async (orgId: string, externalId: string, count: number) => {
      const rows = await stored(orgId, externalId)
      expect(rows.customers).toHaveLength(1)
      expect(rows.subscriptions).toHaveLength(1)
      expect(rows.balances).toHaveLength(1)
      const [subscription] = rows.subscriptions
      const [balance] = rows.balances
      expect(rows.events).toHaveLength(count)
      const outside = rows.events.filter(
        (e) =>
          e.createdAt < subscription!.startedAt ||
          e.createdAt < balance!.windowStart ||
          (balance!.windowEnd !== null && e.createdAt >= balance!.windowEnd)
      )
      expect({ outside, subscriptionStart: subscription!.startedAt, window: balance }).toEqual({
        outside: [],
        subscriptionStart: subscription!.startedAt,
        window: balance
      })
      const inWindow = rows.events.reduce((sum, e) => sum + e.value, 0)
      expect(balance!.used).toBe(inWindow)
      expect(rows.rollups.reduce((sum, r) => sum + r.value, 0)).toBe(inWindow)
      expect(rows.rollups.reduce((sum, r) => sum + r.records, 0)).toBe(count)
      return rows
    }

    test("concurrent first tracks with customerData: every one allowed, one customer with one subscription", async () => {
      const { apiKey, orgId } = await setup()
      for (let round = 0; round < ROUNDS; round++) {
        const customer = `fresh-${round}`
        // All at once, or spread over a few milliseconds: the later ones then arrive while the first creates.
        const spacing = round % 3
        const answers = await Promise.all(
          Array.from({ length: CONCURRENT }, (_, i) =>
            Bun.sleep(i * spacing).then(() =>
              post(server, apiKey, "/v1/track", {
                customer,
                feature: "tokens",
                value: 1,
                customerData: { email: `${customer}@example.com`, name: "Fresh" }
              })
            )
          )
        )
        expect(answers.map((a) => `${a.status} ${a.body.code}`)).toEqual(Array(CONCURRENT).fill("200 tracked"))
        const customers = await get(apiKey, `/v1/customers?externalId=${customer}`)
        expect(customers.total).toBe(1)
        const subscriptions = await get(apiKey, `/v1/subscriptions?customer=${customer}`)
        expect(subscriptions.subscriptions.map((s: any) => `${s.plan} ${s.status}`)).toEqual(["free active"])
        const check = await post(server, apiKey, "/v1/check", { customer, feature: "tokens" })
        expect(check.body).toMatchObject({ allowed: true, usage: CONCURRENT, limit: 1000 })
        await expectEventsInWindow(orgId, customer, CONCURRENT)
      }
    })

    test("every creation path at once: one customer, its autoEnable plan, no request denied for want of it", async () => {
      const { apiKey, orgId } = await setup()
      for (let round = 0; round < ROUNDS; round++) {
        const customer = `mixed-${round}`
        const customerData = { email: `${customer}@example.com` }
        const requests = Array.from({ length: CONCURRENT }, (_, i) => {
          switch (i % 5) {
            case 0:
              return post(server, apiKey, "/v1/customers", { id: customer, ...customerData })
            case 1:
              return post(server, apiKey, "/v1/attach", { customer, product: "free", customerData })
            case 2:
              return post(server, apiKey, "/v1/check", { customer, feature: "tokens", customerData })
            case 3:
              return post(server, apiKey, "/v1/track", { customer, feature: "tokens", customerData })
            default:
              // Without customerData: not found yet, or found whole.
              return post(server, apiKey, "/v1/check", { customer, feature: "tokens" })
          }
        })
        const answers = (await Promise.all(requests)).map((a, i) => ({
          kind: i % 5,
          status: a.status,
          code: a.body.code
        }))
        const expected = answers.map(({ code, kind }) => ({
          kind,
          status: 200,
          code:
            kind <= 1
              ? undefined
              : kind === 3
                ? "tracked"
                : kind === 4 && code === "customer_not_found"
                  ? code
                  : "access_granted"
        }))
        expect(answers).toEqual(expected)
        const customers = await get(apiKey, `/v1/customers?externalId=${customer}`)
        expect(customers.total).toBe(1)
        const subscriptions = await get(apiKey, `/v1/subscriptions?customer=${customer}`)
        expect(subscriptions.subscriptions.map((s: any) => `${s.plan} ${s.status}`)).toEqual(["free active"])
        await expectEventsInWindow(orgId, customer, CONCURRENT / 5)
      }
    })

    test("a first track stamps the customer, its subscription, the window, the event and the idempotency record with one instant", async () => {
      const { apiKey, orgId } = await setup()
      const first = await post(
        server,
        apiKey,
        "/v1/track",
        {
          customer: "once",
          feature: "tokens",
          value: 3,
          customerData: { email: "once@example.com" }
        },
        { "idempotency-key": "first-track" }
      )
      expect(first.body).toMatchObject({ allowed: true, code: "tracked", usage: 3 })
      const plain = await post(server, apiKey, "/v1/track", {
        customer: "plain",
        feature: "tokens",
        value: 2,
        customerData: { email: "plain@example.com" }
      })
      expect(plain.body).toMatchObject({ allowed: true, code: "tracked", usage: 2 })
      const viaCheck = await post(server, apiKey, "/v1/check", {
        customer: "checked",
        feature: "tokens",
        sendEvent: true,
        customerData: { email: "checked@example.com" }
      })
      expect(viaCheck.body).toMatchObject({ allowed: true, usage: 1 })

      for (const [customer, count] of [
        ["once", 1],
        ["plain", 1],
        ["checked", 1]
      ] as const) {
        const rows = await expectEventsInWindow(orgId, customer, count)
        const instant = rows.customers[0]!.createdAt
        expect({
          subscription: rows.subscriptions[0]!.startedAt,
          window: rows.balances[0]!.windowStart,
          event: rows.events[0]!.createdAt
        }).toEqual({ subscription: instant, window: instant, event: instant })
        if (customer === "once") {
          const claim = await server.run(
            Effect.flatMap(
              SqlClient.SqlClient,
              (sql) =>
                sql<{ createdAt: number }>`SELECT created_at FROM idempotency_keys
              WHERE organization_id = ${orgId} AND key = 'first-track'`
            )
          )
          expect(Number(claim[0]!.createdAt)).toBe(instant)
        }
      }
    })

    test("a request that read the clock before a concurrent request created its customer is served at the creation", async () => {
      const { apiKey, orgId } = await setup()
      const first = await post(server, apiKey, "/v1/track", {
        customer: "late",
        feature: "tokens",
        customerData: { email: "late@example.com" }
      })
      expect(first.body).toMatchObject({ allowed: true, code: "tracked", usage: 1 })
      const createdAt = (await stored(orgId, "late")).customers[0]!.createdAt
      // This request's one reading of the clock came before the creation it then found (it raced the first track).
      const readBefore: Clock.Clock = { ...clock.clock, currentTimeMillis: Effect.succeed(createdAt - 50) }
      const second = await server.run(
        Effect.flatMap(Entitlements, (engine) =>
          engine.evaluate(orgId, "track", {
            customer: "late",
            feature: "tokens",
            value: 1,
            customerData: { email: "late@example.com" }
          })
        ).pipe(Effect.withClock(readBefore))
      )
      expect(second).toMatchObject({ allowed: true, code: "tracked", usage: 2 })
      const rows = await expectEventsInWindow(orgId, "late", 2)
      expect(rows.events.map((e) => e.createdAt)).toEqual([createdAt, createdAt])
    })
  })
}
