import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { makeShiftedClock } from "../support/clock.ts"
import { SLOW_HOOK_MS, startServer, type TestServer } from "../support/harness.ts"
import { deliver, deliveryDatabases, json, type Receiver, startReceiver } from "./support.ts"

/**
 * Issue 37, item 8: a second rotation within 24 h stopped the first old secret verifying. Every secret retired in the
 * last 24 h keeps signing, each for 24 h from its own retirement; the receiver checks every delivery with the
 * `standardwebhooks` package. Rotations happen in the past on a moved clock; deliveries at the real time, so the
 * library's timestamp tolerance holds.
 */
const HOUR = 3_600_000

for (const db of deliveryDatabases()) {
  describe(`secret rotations on ${db.name}`, () => {
    let server: TestServer
    let receiver: Receiver
    let drop: () => Promise<void>
    const clock = makeShiftedClock()
    beforeAll(async () => {
      drop = await db.prepare()
      server = await startServer(
        {
          ...db.config,
          webhooks: {
            retryScheduleMs: [5, 5],
            timeoutMs: 2_000,
            leaseMs: 5_000,
            pollMs: 20,
            concurrency: 4,
            worker: false
          }
        },
        { clock: clock.clock }
      )
      receiver = startReceiver()
    }, SLOW_HOOK_MS)
    afterAll(async () => {
      receiver.stop()
      await server.close()
      await drop()
    }, SLOW_HOOK_MS)

    /** An endpoint rotated at each of `hoursAgo` (oldest first): its secrets, oldest first, the current one last. */
    const rotatedAt = async (hoursAgo: ReadonlyArray<number>) => {
      const org = await server.createOrg()
      clock.set(Date.now() - hoursAgo[0]! * HOUR - HOUR)
      const endpoint = await json(server, org.apiKey, "/v1/webhook-endpoints", { body: { url: receiver.url } })
      expect(endpoint.status).toBe(200)
      const secrets: Array<string> = [endpoint.body.secret]
      for (const h of hoursAgo) {
        clock.set(Date.now() - h * HOUR)
        const rotated = await json(server, org.apiKey, `/v1/webhook-endpoints/${endpoint.body.id}/rotate-secret`, {
          body: {}
        })
        expect(rotated.status).toBe(200)
        secrets.push(rotated.body.secret)
      }
      clock.set(Date.now())
      for (const s of secrets) receiver.trust(s)
      return { org, secrets }
    }

    /** One event delivered now: which of `secrets` the library accepts it with, and how many signatures it carries. */
    const delivered = async (org: { apiKey: string }, secrets: ReadonlyArray<string>) => {
      const created = await json(server, org.apiKey, "/v1/customers", { body: { email: "rot@example.com" } })
      expect(created.status).toBe(200)
      const [event] = (await json(server, org.apiKey, "/v1/events")).body.data
      await deliver(server)
      const [r] = receiver.received.filter((x) => x.id === event.id)
      return { verifies: secrets.map((s) => r!.verified[s]), signatures: r!.signature.split(" ").length }
    }

    test("two rotations within 24 h: the first old secret still verifies, beside the second and the new one", async () => {
      const { org, secrets } = await rotatedAt([3, 2])
      expect(await delivered(org, secrets)).toEqual({ verifies: [true, true, true], signatures: 3 })
    })

    test("each retired secret stops 24 h after its own retirement, not at the next rotation", async () => {
      // Retired 25 h ago (gone), 23 h ago and 1 h ago (both still signing).
      const { org, secrets } = await rotatedAt([25, 23, 1])
      expect(await delivered(org, secrets)).toEqual({ verifies: [false, true, true, true], signatures: 3 })
    })
  })
}
