import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import pg from "pg"
import { cli, scratchDatabase, type Service, startService } from "./support.ts"
import { SLOW_HOOK_MS } from "../support/harness.ts"

/**
 * Crash safety (issue 6), PostgreSQL only: the service runs as a subprocess on a scratch database, takes concurrent
 * `track` load, and is killed with SIGKILL in the middle of it. After a restart, the unacknowledged requests are
 * retried with their Idempotency-Key, and the database shows: every acknowledged event is there, each exactly
 * once, and every balance (and usage rollup) equals the sum of its events.
 */
const serverUrl = process.env.DATABASE_URL?.trim()

const WORKERS = 16
const KILL_AFTER = 300 // acknowledged events before the kill
const CUSTOMERS = 4

if (serverUrl) {
  describe("crash safety on postgresql", () => {
    let database: Awaited<ReturnType<typeof scratchDatabase>>
    let env: Record<string, string>
    let service: Service | undefined
    let apiKey = ""
    let db: pg.Client

    beforeAll(async () => {
      database = await scratchDatabase(serverUrl, "billing_crash")
      env = { DATABASE_URL: database.url, ENCRYPTION_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "error" }
      apiKey = JSON.parse(await cli(env, "org", "create", "crash", "--json")).apiKey
      db = new pg.Client({ connectionString: database.url })
      await db.connect()
    }, 30_000)

    afterAll(async () => {
      if (service !== undefined && service.process.exitCode === null) await service.kill("SIGKILL")
      await db?.end()
      await database?.drop()
    }, SLOW_HOOK_MS)

    test("SIGKILL mid-load loses no acknowledged event and applies none twice", async () => {
      service = await startService(env)
      const call = async (base: string, path: string, body: unknown, headers: Record<string, string> = {}) => {
        const response = await fetch(base + path, {
          method: "POST",
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
          body: JSON.stringify(body)
        })
        return { status: response.status, body: (await response.json()) as any }
      }
      const synced = await call(service.baseUrl, "/v1/sync", {
        features: [
          { slug: "calls", name: "Calls", type: "metered" },
          { slug: "tokens", name: "Tokens", type: "metered" }
        ],
        plans: [
          {
            slug: "free",
            name: "Free",
            autoEnable: true,
            currency: "NGN",
            features: [
              { slug: "calls", limit: null, reset: "none" },
              // A small allowance, then billed overage: both balance columns move.
              { slug: "tokens", limit: 40, reset: "none", overage: "charge", overagePrice: 1 }
            ]
          }
        ]
      })
      expect(synced.status).toBe(200)
      for (let c = 0; c < CUSTOMERS; c++) {
        expect(
          (await call(service.baseUrl, "/v1/customers", { id: `c-${c}`, email: `c-${c}@example.com` })).status
        ).toBe(200)
      }

      /** Request n: always the same body under the same key, so a retry is the same request. */
      const featureOf = (n: number) => (Math.floor(n / CUSTOMERS) % 2 === 0 ? "calls" : "tokens")
      const request = (n: number) => ({
        body: { customer: `c-${n % CUSTOMERS}`, feature: featureOf(n), value: (n % 5) + 1, metadata: { n: String(n) } },
        headers: { "idempotency-key": `crash-${n}` }
      })
      const acknowledged = new Set<number>()
      const unacknowledged = new Set<number>()
      let next = 0
      let killed = false
      const running = service
      const worker = async () => {
        while (!killed) {
          const n = next++
          const { body, headers } = request(n)
          try {
            const r = await call(running.baseUrl, "/v1/track", body, headers)
            if (r.status === 200 && r.body.allowed === true) acknowledged.add(n)
            else unacknowledged.add(n)
          } catch {
            unacknowledged.add(n)
          }
          if (!killed && acknowledged.size >= KILL_AFTER) {
            killed = true
            running.process.kill("SIGKILL")
          }
        }
      }
      await Promise.all(Array.from({ length: WORKERS }, worker))
      await running.process.exited
      expect(running.process.signalCode).toBe("SIGKILL")
      // Requests were in flight when it died.
      expect(unacknowledged.size).toBeGreaterThan(0)

      // Restart on the same database; retry what was not acknowledged, under the same keys.
      service = await startService(env)
      for (const n of unacknowledged) {
        const { body, headers } = request(n)
        const r = await call(service.baseUrl, "/v1/track", body, headers)
        expect({ n, status: r.status, allowed: r.body.allowed }).toEqual({ n, status: 200, allowed: true })
        acknowledged.add(n)
      }
      // A retry of a request that did commit (its answer lost on the way) is the same request: replay some
      // acknowledged before the kill, as a client that never saw their answers would.
      const committed = [...acknowledged].filter((n) => !unacknowledged.has(n)).slice(0, 40)
      for (const n of committed) {
        const { body, headers } = request(n)
        const r = await call(service.baseUrl, "/v1/track", body, headers)
        expect({ n, status: r.status, allowed: r.body.allowed }).toEqual({ n, status: 200, allowed: true })
      }
      const attempted = next

      // Every attempted request is acknowledged now, and each is exactly one event.
      expect(acknowledged.size).toBe(attempted)
      const events = await db.query<{ n: string; count: string }>(
        `SELECT metadata::json->>'n' AS n, COUNT(*) AS count FROM usage_events GROUP BY 1`
      )
      const counts = new Map(events.rows.map((r) => [Number(r.n), Number(r.count)]))
      expect([...counts.values()].filter((c) => c !== 1)).toEqual([])
      expect([...counts.keys()].sort((x, y) => x - y)).toEqual([...acknowledged].sort((x, y) => x - y))

      // Each balance is the sum of its events: plan usage and overage.
      const balances = await db.query(`
        SELECT b.customer_id, b.subject_id, b.used::text AS used, b.overage::text AS overage,
               COALESCE(SUM(e.from_plan), 0)::text AS events_used, COALESCE(SUM(e.overage), 0)::text AS events_overage,
               COUNT(e.id) AS events
          FROM balances b LEFT JOIN usage_events e
            ON e.organization_id = b.organization_id AND e.customer_id = b.customer_id AND e.subject_id = b.subject_id
         GROUP BY b.organization_id, b.customer_id, b.subject_id, b.used, b.overage`)
      expect(balances.rows.length).toBe(CUSTOMERS * 2)
      const wrong = balances.rows.filter((b) => b.used !== b.events_used || b.overage !== b.events_overage)
      expect(wrong).toEqual([])
      // And so is every usage rollup (what usage history reads).
      const rollups = await db.query(`
        SELECT r.customer_id, r.feature_id, SUM(r.value)::text AS value, SUM(r.records)::text AS records,
               (SELECT SUM(e.value) FROM usage_events e WHERE e.organization_id = r.organization_id
                  AND e.customer_id = r.customer_id AND e.feature_id = r.feature_id)::text AS events_value,
               (SELECT COUNT(*) FROM usage_events e WHERE e.organization_id = r.organization_id
                  AND e.customer_id = r.customer_id AND e.feature_id = r.feature_id)::text AS events
          FROM usage_rollups r GROUP BY r.organization_id, r.customer_id, r.feature_id`)
      expect(rollups.rows.filter((r) => r.value !== r.events_value || r.records !== r.events)).toEqual([])

      // The API agrees: usage of the unlimited feature is the sum of the acknowledged values.
      for (let c = 0; c < CUSTOMERS; c++) {
        const expected = [...acknowledged]
          .filter((n) => n % CUSTOMERS === c && featureOf(n) === "calls")
          .reduce((sum, n) => sum + (n % 5) + 1, 0)
        const check = await call(service.baseUrl, "/v1/check", { customer: `c-${c}`, feature: "calls", value: 0 })
        expect({ c, usage: check.body.usage }).toEqual({ c, usage: expected })
      }
      await service.kill("SIGTERM")
    }, 60_000)
  })
}
