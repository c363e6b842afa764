import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cli, scratchDatabase, type Service, startService } from "./hardening/support.ts"
import { SLOW_HOOK_MS } from "./support/harness.ts"

/**
 * Redemption limits across two real service processes sharing one database (decisions.md §15): 100 concurrent
 * attaches of a promotion code limited to 10, split over both processes, attach 10 and refuse 90, on a SQLite file and
 * on PostgreSQL. Neither process holds the count in memory: the guarded UPDATE in the attach's transaction decides.
 */
const serverUrl = process.env.DATABASE_URL?.trim()

const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [{ slug: "pro", name: "Pro", price: 10_000, currency: "NGN", interval: "monthly" }],
  coupons: [{ slug: "open", name: "Open", percentOff: 10, duration: "forever" }],
  promotionCodes: [{ code: "TEN", coupon: "open", maxRedemptions: 10 }]
}

const backends: Array<{
  readonly name: string
  readonly prepare: () => Promise<{ env: Record<string, string>; cleanup: () => Promise<void> }>
}> = [
  {
    name: "a sqlite file",
    prepare: async () => {
      const dir = mkdtempSync(join(tmpdir(), "coupons-processes-"))
      return {
        env: { DATA_DIR: join(dir, "data") },
        cleanup: async () => rmSync(dir, { recursive: true, force: true })
      }
    }
  },
  ...(serverUrl
    ? [
        {
          name: "postgresql",
          prepare: async () => {
            const database = await scratchDatabase(serverUrl, "billing_coupons")
            return { env: { DATABASE_URL: database.url }, cleanup: database.drop }
          }
        }
      ]
    : [])
]

for (const backend of backends) {
  describe(`promotion code limits across two processes on ${backend.name}`, () => {
    let env: Record<string, string>
    let cleanup = async () => {}
    let apiKey = ""
    const services: Array<Service> = []

    beforeAll(async () => {
      const prepared = await backend.prepare()
      cleanup = prepared.cleanup
      env = { ...prepared.env, ENCRYPTION_KEY: "0".repeat(64), LOG_LEVEL: "error" }
      apiKey = JSON.parse(await cli(env, "org", "create", "coupons", "--json")).apiKey
      services.push(await startService(env), await startService(env))
    }, 60_000)

    afterAll(async () => {
      for (const s of services) if (s.process.exitCode === null) await s.kill("SIGTERM")
      await cleanup()
    }, SLOW_HOOK_MS)

    const send = async (service: Service, method: string, path: string, body?: unknown) => {
      const response = await fetch(service.baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      return { status: response.status, body: (await response.json()) as any }
    }

    test("100 concurrent attaches of a code limited to 10, over two processes: 10 attached, 90 × 422", async () => {
      const [a, b] = services as [Service, Service]
      expect((await send(a, "POST", "/v1/sync", catalog)).status).toBe(200)
      const ids = Array.from({ length: 100 }, (_, i) => `p${i}`)
      for (let i = 0; i < ids.length; i += 20) {
        const made = await Promise.all(
          ids.slice(i, i + 20).map((id) => send(a, "POST", "/v1/customers", { id, email: `${id}@example.com` }))
        )
        expect(made.every((m) => m.status === 200)).toBe(true)
      }
      const results = await Promise.all(
        ids.map((id, i) =>
          send(i % 2 === 0 ? a : b, "POST", "/v1/attach", { customer: id, product: "pro", promotionCode: "ten" })
        )
      )
      expect(results.filter((r) => r.status === 200)).toHaveLength(10)
      const refused = results.filter((r) => r.status !== 200)
      expect(refused).toHaveLength(90)
      expect(refused.every((r) => r.status === 422 && r.body.code === "coupon_invalid")).toBe(true)
      // The store holds exactly ten, and the code answers as exhausted from either process.
      const subscriptions = (await send(b, "GET", "/v1/subscriptions")).body.subscriptions
      expect(subscriptions).toHaveLength(10)
      const again = await send(b, "POST", "/v1/attach/preview", {
        customer: "p0",
        product: "pro",
        promotionCode: "ten"
      })
      expect(again.body).toMatchObject({
        code: "coupon_invalid",
        message: "promotion code 'TEN' has no redemptions left"
      })
    }, 120_000)
  })
}
