import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import pg from "pg"
import { cli, scratchDatabase, type Service, startService } from "../hardening/support.ts"
import { type Receiver, startReceiver, waitUntil } from "./support.ts"
import { SLOW_HOOK_MS } from "../support/harness.ts"

/**
 * The delivery worker in real service processes on one PostgreSQL (a scratch database): killed with SIGKILL in the
 * middle of an attempt, the delivery is made after a restart with the same webhook-id; two processes deliver each
 * event once; SIGTERM lets an attempt in flight finish, or hands it back when it does not.
 */
const serverUrl = process.env.DATABASE_URL?.trim()

if (serverUrl) {
  describe("webhook delivery across processes on postgresql", () => {
    let database: Awaited<ReturnType<typeof scratchDatabase>>
    let env: Record<string, string>
    let apiKey = ""
    let db: pg.Client
    let receiver: Receiver
    const services: Array<Service> = []

    beforeAll(async () => {
      database = await scratchDatabase(serverUrl, "billing_webhooks")
      env = {
        DATABASE_URL: database.url,
        ENCRYPTION_KEY: randomBytes(32).toString("hex"),
        LOG_LEVEL: "error",
        WEBHOOK_POLL_MS: "50",
        WEBHOOK_TIMEOUT_MS: "1500",
        WEBHOOK_LEASE_MS: "2500",
        WEBHOOK_RETRY_SCHEDULE_MS: "50,50,50"
      }
      apiKey = JSON.parse(await cli(env, "org", "create", "hooks", "--json")).apiKey
      db = new pg.Client({ connectionString: database.url })
      await db.connect()
      receiver = startReceiver()
    }, 30_000)

    afterAll(async () => {
      for (const s of services) if (s.process.exitCode === null) await s.kill("SIGKILL")
      receiver?.stop()
      await db?.end()
      await database?.drop()
    }, SLOW_HOOK_MS)

    const start = async () => {
      const service = await startService(env)
      services.push(service)
      return service
    }
    const call = async (service: Service, path: string, body: unknown) => {
      const response = await fetch(service.baseUrl + path, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      expect(response.status).toBe(200)
      return (await response.json()) as any
    }
    const eventOf = async (externalId: string) => {
      const rows = await db.query(
        `SELECT e.id FROM outbound_events e JOIN customers c ON c.organization_id = e.organization_id
        AND c.id = e.customer_id WHERE c.external_id = $1 AND e.type = 'customer.created'`,
        [externalId]
      )
      return rows.rows[0]!.id as string
    }
    const deliveryOf = async (eventId: string) =>
      (await db.query(`SELECT status, attempts, lease_owner FROM webhook_deliveries WHERE event_id = $1`, [eventId]))
        .rows

    let endpointSecret = ""
    test("SIGKILL in the middle of an attempt: after a restart the event is delivered, same webhook-id", async () => {
      const first = await start()
      const endpoint = await call(first, "/v1/webhook-endpoints", { url: receiver.url })
      endpointSecret = endpoint.secret
      receiver.trust(endpoint.secret)
      // The first request is held open: the process dies with it in flight.
      let release: (status: number) => void = () => undefined
      const held = new Promise<number>((resolve) => {
        release = resolve
      })
      receiver.answer((n) => (n === 1 ? held : 200))
      await call(first, "/v1/customers", { id: "killed", email: "killed@example.com" })
      const eventId = await eventOf("killed")
      await waitUntil(() => receiver.received.length === 1, "the first attempt reaches the receiver")
      first.process.kill("SIGKILL")
      await first.process.exited
      release(200)

      await start()
      await waitUntil(
        async () => (await deliveryOf(eventId))[0]?.status === "succeeded",
        "the delivery succeeds after the restart"
      )
      const mine = receiver.received.filter((r) => r.id === eventId)
      expect(mine.length).toBe(2)
      for (const r of mine) expect(r.verified[endpoint.secret]).toBe(true)
      // The killed attempt was never recorded: one attempt, the one that succeeded.
      expect(await deliveryOf(eventId)).toEqual([{ status: "succeeded", attempts: 1, lease_owner: null }])
    }, 30_000)

    test("two processes on one database deliver every event once per endpoint", async () => {
      const [a, b] = [services.at(-1)!, await start()]
      receiver.answer(() => 200)
      const before = receiver.received.length
      const ids: Array<string> = []
      for (let n = 0; n < 24; n++) {
        await call(n % 2 === 0 ? a : b, "/v1/customers", { id: `pair-${n}`, email: `pair-${n}@example.com` })
        ids.push(await eventOf(`pair-${n}`))
      }
      const done = async () => {
        const rows = await db.query(
          `SELECT COUNT(*)::int AS n FROM webhook_deliveries WHERE event_id = ANY($1) AND status = 'succeeded'`,
          [ids]
        )
        return rows.rows[0].n === ids.length
      }
      await waitUntil(done, "every event delivered")
      const received = receiver.received.slice(before)
      const counts = new Map<string, number>()
      for (const r of received) counts.set(r.id, (counts.get(r.id) ?? 0) + 1)
      expect(ids.map((id) => counts.get(id) ?? 0)).toEqual(ids.map(() => 1))
      for (const r of received) expect(r.verified[endpointSecret]).toBe(true)
      // One attempt per delivery: no process attempted what the other had claimed.
      expect(
        (await db.query(`SELECT COUNT(*)::int AS n FROM webhook_attempts WHERE event_id = ANY($1)`, [ids])).rows[0].n
      ).toBe(ids.length)
    }, 30_000)

    test("SIGTERM: an attempt in flight finishes; one that does not answer is handed back unattempted", async () => {
      const service = services.at(-1)!
      const other = services.at(-2)!
      await other.kill("SIGTERM")
      // Answered after a moment: the shutdown waits for it and records it.
      let answered: (status: number) => void = () => undefined
      receiver.answer(() => new Promise<number>((resolve) => (answered = resolve)))
      await call(service, "/v1/customers", { id: "graceful", email: "graceful@example.com" })
      const graceful = await eventOf("graceful")
      await waitUntil(() => receiver.received.some((r) => r.id === graceful), "the attempt reaches the receiver")
      const stopping = service.kill("SIGTERM")
      await Bun.sleep(100)
      answered(200)
      await stopping
      expect(service.process.exitCode).toBe(0)
      expect(await deliveryOf(graceful)).toEqual([{ status: "succeeded", attempts: 1, lease_owner: null }])

      // Never answered: stopped at the end of the grace, the delivery due again at once, no attempt counted.
      const next = await start()
      receiver.answer(() => new Promise<number>(() => undefined))
      await call(next, "/v1/customers", { id: "handed-back", email: "handed-back@example.com" })
      const handedBack = await eventOf("handed-back")
      await waitUntil(() => receiver.received.some((r) => r.id === handedBack), "the attempt reaches the receiver")
      await next.kill("SIGTERM")
      expect(next.process.exitCode).toBe(0)
      expect(await deliveryOf(handedBack)).toEqual([{ status: "pending", attempts: 0, lease_owner: null }])
      const [{ due }] = (
        await db.query(`SELECT next_attempt_at <= $2 AS due FROM webhook_deliveries WHERE event_id = $1`, [
          handedBack,
          Date.now()
        ])
      ).rows
      expect(due).toBe(true)
      receiver.answer(() => 200)
    }, 30_000)
  })
}
