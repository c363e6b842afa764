import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { EntitlementsRepo } from "../src/entitlements/EntitlementsRepo.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * A batch decided over what the service knows of its balances and written only if each is still that state
 * (src/entitlements/guardedBatch.ts, PostgreSQL; SQLite decides under its write lock): whatever else writes a balance
 * in between, a batch never writes over it, and its accepted items are recorded all or none.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" }],
  plans: [
    { slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 100, reset: "monthly" }] }
  ]
}
const MICRO = 1_000_000

// A file database too (its write-ahead log, its connection's settings).
const suites = [
  ...databases().map((d) => ({ name: d.name as string, config: d.config })),
  { name: "sqlite file", config: {} }
]

for (const database of suites) {
  describe(`batches and balances written by others on ${database.name}`, () => {
    let server: TestServer
    let dir: string | undefined
    beforeAll(async () => {
      if (database.name === "sqlite file") dir = mkdtempSync(join(tmpdir(), "guarded-batch-"))
      server = await startServer(dir === undefined ? database.config : { dataDir: dir })
    })
    afterAll(async () => {
      await server.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    })

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const batch = (events: Array<Record<string, unknown>>) => post(server, org.apiKey, "/v1/track/batch", { events })
      const usage = async (customer: string) =>
        (await post(server, org.apiKey, "/v1/check", { customer, feature: "tokens", value: 0 })).body.usage as number
      const items = (customer: string, count: number, value = 1) =>
        Array.from({ length: count }, () => ({ customer, feature: "tokens", value, customerData: {} }))
      const admitted = (answer: { body: { results: Array<{ allowed?: boolean }> } }) =>
        answer.body.results.filter((r) => r.allowed === true).length
      /** Sets the customer's balance of tokens behind the service's back (an operator's SQL, another process). */
      const setUsed = (customer: string, used: number, moveVersion: boolean) =>
        server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql`UPDATE balances SET used = ${used * MICRO}
              ${moveVersion ? sql.literal(", version = version + 1") : sql.literal("")}
              WHERE organization_id = ${org.id}
                AND customer_id = (SELECT id FROM customers WHERE organization_id = ${org.id} AND external_id = ${customer})`
          )
        )
      /** Each customer's balance against its events (micro-units), and the events' count. */
      const ledger = (customer: string) =>
        server.run(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql<{ used: string | number; total: string | number | null; n: string | number }>`
              SELECT b.used, (SELECT SUM(e.value) FROM usage_events e WHERE e.organization_id = b.organization_id
                  AND e.customer_id = b.customer_id) AS total,
                (SELECT COUNT(*) FROM usage_events e WHERE e.organization_id = b.organization_id
                  AND e.customer_id = b.customer_id) AS n
              FROM balances b JOIN customers c ON c.organization_id = b.organization_id AND c.id = b.customer_id
              WHERE b.organization_id = ${org.id} AND c.external_id = ${customer}`.pipe(
              Effect.map(([row]) => ({ used: Number(row!.used), total: Number(row!.total ?? 0), n: Number(row!.n) }))
            )
          )
        )
      return { org, batch, usage, items, admitted, setUsed, ledger }
    }

    // `trusted`: ten batches first, one after another, so that the service has stopped checking what it knows before
    // each batch (three clean checks in a row): only the write's guard can see the change then.
    for (const [moveVersion, trusted] of [
      [true, false],
      [false, false],
      [true, true],
      [false, true]
    ] as const) {
      test(`a balance changed between two batches${moveVersion ? "" : " without its version moving"}${trusted ? ", once checks have stopped" : ""}: the next batch decides over what it is now`, async () => {
        const { batch, usage, items, admitted, setUsed } = await setup()
        if (trusted) for (let i = 0; i < 10; i++) expect(admitted(await batch(items("ext", 1, 5)))).toBe(1)
        else expect(admitted(await batch(items("ext", 10, 5)))).toBe(10)
        expect(await usage("ext")).toBe(50)
        await setUsed("ext", 95, moveVersion)
        const answer = await batch(items("ext", 10))
        expect(answer.status).toBe(200)
        expect(admitted(answer)).toBe(5)
        expect(answer.body.results[4]).toMatchObject({ allowed: true, usage: 100, balance: 0 })
        expect(answer.body.results[5]).toMatchObject({ allowed: false, code: "limit_exceeded", usage: 100 })
        expect(await usage("ext")).toBe(100)
      })
    }

    test("a denial is decided over the balance as it is: room made behind the service's back is used", async () => {
      const { batch, usage, items, admitted, setUsed } = await setup()
      expect(admitted(await batch(items("full", 1, 100)))).toBe(1)
      expect(admitted(await batch(items("full", 3)))).toBe(0)
      await setUsed("full", 98, false)
      expect(admitted(await batch(items("full", 3)))).toBe(2)
      expect(await usage("full")).toBe(100)
    })

    test("concurrent batches over shared customers: each admits exactly its limit, and balances equal their events", async () => {
      const { batch, items, admitted, ledger } = await setup()
      const customers = Array.from({ length: 12 }, (_, i) => `c${i}`)
      // 24 batches of 60 items, each over a rotating half of the customers: 120 draws of 1 per customer, limit 100.
      const batches = Array.from({ length: 24 }, (_, b) =>
        Array.from({ length: 60 }, (_, k) => items(customers[(b + k) % customers.length]!, 1)[0]!)
      )
      const answers = await Promise.all(batches.map((events) => batch(events)))
      expect(answers.every((a) => a.status === 200)).toBe(true)
      const perCustomer = new Map<string, number>()
      answers.forEach((answer, b) =>
        answer.body.results.forEach((r: { allowed?: boolean }, k: number) => {
          if (r.allowed === true) {
            const customer = batches[b]![k]!.customer
            perCustomer.set(customer, (perCustomer.get(customer) ?? 0) + 1)
          }
        })
      )
      expect(answers.reduce((sum, a) => sum + admitted(a), 0)).toBe(12 * 100)
      for (const customer of customers) {
        expect(perCustomer.get(customer)).toBe(100)
        expect(await ledger(customer)).toEqual({ used: 100 * MICRO, total: 100 * MICRO, n: 100 })
      }
    })

    test("the guarded write: a balance in another state at the expected version fails the whole batch, which writes nothing", async () => {
      const { org, batch, items, setUsed, ledger } = await setup()
      await batch([...items("g1", 1, 10), ...items("g2", 1, 20)])
      await setUsed("g2", 30, false)
      const repo = await server.run(EntitlementsRepo)
      const guarded = Option.getOrThrow(repo.guarded)
      const balances = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ customerId: string; subjectId: string }>`SELECT b.customer_id, b.subject_id FROM balances b
            JOIN customers c ON c.organization_id = b.organization_id AND c.id = b.customer_id
            WHERE b.organization_id = ${org.id} ORDER BY c.external_id`
        )
      )
      const named = balances.map((b) => ({
        customerId: b.customerId,
        subjectId: b.subjectId,
        init: { windowStart: 0, windowEnd: null },
        version: null
      }))
      const read = await server.run(guarded.readChanged(org.id, named, Date.now()))
      // Read again knowing their versions: nothing changed, nothing answered.
      const again = named.map((b) => ({ ...b, version: read.find((r) => r.customerId === b.customerId)!.version }))
      expect(await server.run(guarded.readChanged(org.id, again, Date.now()))).toEqual([])
      const byCustomer = new Map(read.map((b) => [b.customerId, b]))
      const [g1, g2] = balances.map((b) => byCustomer.get(b.customerId)!)
      const event = (customerId: string, subjectId: string) => ({
        id: `evt_guard_${customerId}`,
        organizationId: org.id,
        customerId,
        featureId: subjectId,
        subjectId,
        entityId: null,
        value: 1n * BigInt(MICRO),
        cost: 1n * BigInt(MICRO),
        fromPlan: 1n * BigInt(MICRO),
        fromBonus: 0n,
        fromAddon: 0n,
        overage: 0n,
        billable: 0n,
        planId: null,
        metadata: {},
        createdAt: Date.now()
      })
      const write = (b: typeof g1, base: typeof g1) => ({
        organizationId: org.id,
        customerId: b!.customerId,
        subjectId: b!.subjectId,
        expectedVersion: base!.version,
        base: base!,
        next: { ...base!, used: base!.used + BigInt(MICRO) },
        events: [event(b!.customerId, b!.subjectId)],
        now: Date.now()
      })
      // g2 as the service last saw it (used 20), at the version it still has: the guard refuses it, and g1 with it.
      const stale = { ...g2!, used: 20n * BigInt(MICRO) }
      const refused = await server.run(guarded.commit(org.id, [write(g1, g1), write(g2, stale)], []))
      expect(refused).toBe(false)
      expect(await ledger("g1")).toEqual({ used: 10 * MICRO, total: 10 * MICRO, n: 1 })
      // Decided over the state it has: written, both.
      expect(await server.run(guarded.commit(org.id, [write(g1, g1), write(g2, g2)], []))).toBe(true)
      expect(await ledger("g1")).toEqual({ used: 11 * MICRO, total: 11 * MICRO, n: 2 })
      // A balance only checked (its draws denied) that moved fails the batch too.
      const g1Now = { ...g1!, used: 11n * BigInt(MICRO), version: g1!.version + 1 }
      expect(await server.run(guarded.commit(org.id, [], [{ ...g1Now, used: 10n * BigInt(MICRO) }]))).toBe(false)
      expect(await server.run(guarded.commit(org.id, [], [g1Now]))).toBe(true)
    })
  })
}
