import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { makeEncryption } from "../../src/platform/encryption.ts"
import { SLOW_HOOK_MS, startServer, type TestServer } from "../support/harness.ts"
import { deliver, deliveryDatabases, json, type Receiver, startReceiver } from "./support.ts"

/** One endpoint's unreadable signing secret does not stop the deliveries of the others (docs/decisions.md, h11). */
for (const db of deliveryDatabases()) {
  describe(`deliveries with one endpoint's unreadable secret on ${db.name}`, () => {
    let server: TestServer
    let receiver: Receiver
    let drop: () => Promise<void>
    beforeAll(async () => {
      drop = await db.prepare()
      server = await startServer({
        ...db.config,
        webhooks: {
          retryScheduleMs: [5, 5],
          timeoutMs: 2_000,
          leaseMs: 5_000,
          pollMs: 20,
          concurrency: 1,
          worker: false
        }
      })
      receiver = startReceiver()
    }, SLOW_HOOK_MS)
    afterAll(async () => {
      receiver.stop()
      await server.close()
      await drop()
    }, SLOW_HOOK_MS)

    const newOrg = async () => {
      const org = await server.createOrg()
      const endpoint = await json(server, org.apiKey, "/v1/webhook-endpoints", { body: { url: receiver.url } })
      expect(endpoint.status).toBe(200)
      receiver.trust(endpoint.body.secret)
      const customer = await json(server, org.apiKey, "/v1/customers", { body: { id: "c1", email: "c1@example.com" } })
      expect(customer.status).toBe(200)
      const attempts = async () =>
        (await json(server, org.apiKey, `/v1/webhook-endpoints/${endpoint.body.id}/deliveries`)).body.data as Array<any>
      return { ...org, endpoint: endpoint.body, attempts }
    }

    test("that endpoint's attempts fail, recorded on the retry schedule; the others are delivered", async () => {
      const first = await newOrg()
      const broken = await newOrg()
      const last = await newOrg()
      const foreign = makeEncryption(randomBytes(32)).encrypt("whsec_foreign")
      await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql`UPDATE webhook_endpoints SET secret = ${foreign} WHERE organization_id = ${broken.id}`
        )
      )
      const report = await deliver(server)
      expect(report.failed).toBeGreaterThanOrEqual(1)
      for (const ok of [first, last]) {
        expect((await ok.attempts()).map((a) => [a.eventType, a.status])).toEqual([["customer.created", "succeeded"]])
      }
      // Retried on the (shrunk) schedule within the pass, each attempt failed and recorded as such.
      const failed = await broken.attempts()
      expect(failed.length).toBeGreaterThanOrEqual(1)
      for (const a of failed) {
        expect(a).toMatchObject({
          eventType: "customer.created",
          status: "failed",
          responseStatus: null,
          error: "The endpoint's signing secret cannot be read"
        })
      }
      // The receiver got the two readable endpoints' events, each verified with its own secret.
      const delivered = receiver.received.filter((r) => r.event?.type === "customer.created")
      expect(delivered).toHaveLength(2)
      expect(delivered.map((r) => r.verified[first.endpoint.secret] || r.verified[last.endpoint.secret])).toEqual([
        true,
        true
      ])
    }, 30_000)
  })
}
