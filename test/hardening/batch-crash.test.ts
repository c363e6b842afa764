import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cli, type Service, startService } from "./support.ts"

/**
 * A batch of new customers killed mid-way (SIGKILL, SQLite, the service as a real process): after a restart, each
 * batch left all of its customers, their subscriptions, their events and their usage, or nothing of them
 * (decisions.md §12). Before, its customers were created one by one ahead of its transaction, and a kill left
 * hundreds of customers without their usage.
 */
const PLANS = 20
const SIZE = 1000

describe("a batch of new customers and SIGKILL on sqlite", () => {
  let dir: string
  let env: Record<string, string>
  let apiKey = ""
  let service: Service | undefined

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "billing-batch-crash-"))
    env = { DATA_DIR: dir, ENCRYPTION_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "error" }
    apiKey = JSON.parse(await cli(env, "org", "create", "crash", "--json")).apiKey
  }, 30_000)

  afterAll(async () => {
    if (service !== undefined && service.process.exitCode === null) await service.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  })

  const call = (path: string, body: unknown) =>
    fetch(service!.baseUrl + path, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  /** Of the batch `prefix`: customers, subscriptions, outbound events and usage events, read from the file. */
  const left = (prefix: string) => {
    const db = new Database(join(dir, "billing.db"), { readonly: true })
    try {
      const count = (text: string) => Number((db.query(text).get(`${prefix}%`) as { n: number }).n)
      const of = "JOIN customers c ON c.organization_id = t.organization_id AND c.id = t.customer_id"
      return [
        count("SELECT COUNT(*) AS n FROM customers WHERE external_id LIKE ?1"),
        count(`SELECT COUNT(*) AS n FROM subscriptions t ${of} WHERE c.external_id LIKE ?1`),
        count(`SELECT COUNT(*) AS n FROM outbound_events t ${of} WHERE c.external_id LIKE ?1`),
        count(`SELECT COUNT(*) AS n FROM usage_events t ${of} WHERE c.external_id LIKE ?1`)
      ]
    } finally {
      db.close()
    }
  }

  test("killed at different moments of a batch: after a restart, all of it or nothing", async () => {
    service = await startService(env)
    const synced = await call("/v1/sync", {
      features: [{ slug: "f", name: "F", type: "metered" }],
      plans: Array.from({ length: PLANS }, (_, i) => ({
        slug: `p${i}`,
        name: `P${i}`,
        autoEnable: true,
        features: [{ slug: "f", limit: 1e9, reset: "monthly" }]
      }))
    })
    expect(synced.status).toBe(200)
    // Each customer: its plans (each replacing the one before), its created event, each plan's created and all but
    // the last one's canceled events, and its usage.
    const whole = [SIZE, SIZE * PLANS, SIZE * (1 + PLANS + PLANS - 1), SIZE]
    const outcomes: Array<string> = []
    for (const [round, afterMs] of [150, 400, 900, 1600].entries()) {
      const prefix = `k${round}-`
      const answer = call("/v1/track/batch", {
        events: Array.from({ length: SIZE }, (_, i) => ({
          customer: `${prefix}${i}`,
          feature: "f",
          value: 1,
          customerData: { name: `N${i}` }
        }))
      }).then(
        (r) => r.status,
        () => "killed"
      )
      await Bun.sleep(afterMs)
      await service.kill("SIGKILL")
      outcomes.push(String(await answer))
      const counts = left(prefix)
      expect([whole, [0, 0, 0, 0]]).toContainEqual(counts)
      service = await startService(env)
      // Restarted: the same counts (nothing half-written was replayed or lost).
      expect(left(prefix)).toEqual(counts)
    }
    // At least one kill landed while a batch was under way (else the test proved nothing).
    expect(outcomes).toContain("killed")
  }, 120_000)
})
