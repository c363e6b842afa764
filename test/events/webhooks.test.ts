import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { CustomerCreatedHook, Customers } from "../../src/customers/Customers.ts"
import { SLOW_HOOK_MS, startServer, type TestServer } from "../support/harness.ts"
import { deliver, deliverUntil, deliveryDatabases, json, type Receiver, startReceiver } from "./support.ts"

/**
 * Outbound events end to end (decisions.md §11): endpoints through the API, events written with the change that
 * causes them, delivered by the worker to a real receiver that checks each request with the `standardwebhooks`
 * package. The retry schedule is shrunk to milliseconds.
 */
for (const db of deliveryDatabases()) {
  describe(`outbound events on ${db.name}`, () => {
    let server: TestServer
    let receiver: Receiver
    let drop: () => Promise<void>
    beforeAll(async () => {
      drop = await db.prepare()
      server = await startServer({
        ...db.config,
        webhooks: {
          retryScheduleMs: [5, 5, 5, 5],
          timeoutMs: 2_000,
          leaseMs: 5_000,
          pollMs: 20,
          concurrency: 4,
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
      const endpoint = await json(server, org.apiKey, "/v1/webhook-endpoints", {
        body: { url: receiver.url, description: "test receiver" }
      })
      expect(endpoint.status).toBe(200)
      receiver.trust(endpoint.body.secret)
      return { ...org, endpoint: endpoint.body }
    }

    test("an endpoint's secret is shown once; a customer created is delivered signed, verified by standardwebhooks", async () => {
      const org = await newOrg()
      expect(org.endpoint).toMatchObject({ url: receiver.url, description: "test receiver", enabled: true })
      expect(org.endpoint.id).toStartWith("whe_")
      expect(org.endpoint.secret).toStartWith("whsec_")
      expect(org.endpoint.events).toContain("customer.created")
      const read = await json(server, org.apiKey, `/v1/webhook-endpoints/${org.endpoint.id}`)
      expect(read.status).toBe(200)
      expect(read.body.secret).toBeUndefined()
      const listed = await json(server, org.apiKey, "/v1/webhook-endpoints")
      expect(listed.body).toEqual({ data: [read.body], hasMore: false })
      // Stored encrypted, like provider secrets.
      const [stored] = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ secret: string }>`SELECT secret FROM webhook_endpoints WHERE organization_id = ${org.id}`
        ).pipe(Effect.orDie)
      )
      expect(stored!.secret).not.toContain(org.endpoint.secret.slice(6))

      const customer = await json(server, org.apiKey, "/v1/customers", {
        body: { id: "ext-1", email: "one@example.com" }
      })
      expect(customer.status).toBe(200)
      const events = await json(server, org.apiKey, "/v1/events")
      expect(events.status).toBe(200)
      expect(events.body.hasMore).toBe(false)
      const [event] = events.body.data
      expect(event).toMatchObject({
        type: "customer.created",
        data: { id: customer.body.id, externalId: "ext-1", email: "one@example.com" }
      })
      expect(event.id).toStartWith("msg_")

      const before = receiver.received.length
      const report = await deliver(server)
      expect(report.succeeded).toBeGreaterThanOrEqual(1)
      const mine = receiver.received.slice(before).filter((r) => r.id === event.id)
      expect(mine.length).toBe(1)
      expect(mine[0]!.verified[org.endpoint.secret]).toBe(true)
      expect(mine[0]!.event).toEqual(event)
      // The events API answers the event as it was delivered.
      expect((await json(server, org.apiKey, `/v1/events/${event.id}`)).body).toEqual(event)
      const attempts = await json(server, org.apiKey, `/v1/webhook-endpoints/${org.endpoint.id}/deliveries`)
      expect(attempts.body.data).toMatchObject([
        {
          eventId: event.id,
          eventType: "customer.created",
          attempt: 1,
          status: "succeeded",
          responseStatus: 200,
          responseBody: "ok"
        }
      ])
      expect(attempts.body.data[0].nextAttemptAt).toBeUndefined()
      // Nothing left to do: a second pass sends nothing again.
      const again = receiver.received.length
      await deliver(server)
      expect(receiver.received.length).toBe(again)
    })

    test("a receiver answering 500 three times gets the event on the fourth attempt, with the same webhook-id", async () => {
      const org = await newOrg()
      const failures = new Map<string, number>()
      receiver.answer((_n, request) => {
        const id = request.headers.get("webhook-id")!
        const seen = (failures.get(id) ?? 0) + 1
        failures.set(id, seen)
        return seen <= 3 ? 500 : 200
      })
      try {
        await json(server, org.apiKey, "/v1/customers", { body: { id: "retry-1", email: "retry@example.com" } })
        const [event] = (await json(server, org.apiKey, "/v1/events")).body.data
        await deliverUntil(server, () => receiver.received.filter((r) => r.id === event.id).length >= 4)
        const mine = receiver.received.filter((r) => r.id === event.id)
        expect(mine.length).toBe(4)
        // Each attempt signed afresh, each verifying, each the same event.
        for (const r of mine) {
          expect(r.verified[org.endpoint.secret]).toBe(true)
          expect(r.event).toEqual(event)
        }
        const attempts = (await json(server, org.apiKey, `/v1/webhook-endpoints/${org.endpoint.id}/deliveries`)).body
          .data
        expect(attempts.map((a: any) => [a.attempt, a.status, a.responseStatus])).toEqual([
          [4, "succeeded", 200],
          [3, "failed", 500],
          [2, "failed", 500],
          [1, "failed", 500]
        ])
        expect(attempts[1].nextAttemptAt).toBeString()
        expect(attempts[1].responseBody).toBe("no (500)")
        // Succeeded: never sent again.
        const count = receiver.received.length
        await deliver(server)
        expect(receiver.received.length).toBe(count)
      } finally {
        receiver.answer(() => 200)
      }
    })

    test("past the last retry a delivery has failed and is not tried again; resend sends it anew", async () => {
      const org = await newOrg()
      let refuse = true
      receiver.answer(() => (refuse ? 503 : 200))
      try {
        await json(server, org.apiKey, "/v1/customers", { body: { id: "fail-1", email: "fail@example.com" } })
        const [event] = (await json(server, org.apiKey, "/v1/events")).body.data
        const attemptsOf = async () =>
          (await json(server, org.apiKey, `/v1/webhook-endpoints/${org.endpoint.id}/deliveries?limit=100`)).body.data
        for (let i = 0; i < 100 && (await attemptsOf()).length < 5; i++) {
          await deliver(server)
          await Bun.sleep(10)
        }
        // The first attempt and the four retries of the (shrunk) schedule.
        const attempts = await attemptsOf()
        expect(attempts.length).toBe(5)
        expect(attempts[0]).toMatchObject({ attempt: 5, status: "failed", responseStatus: 503 })
        expect(attempts[0].nextAttemptAt).toBeUndefined()
        await Bun.sleep(20)
        await deliver(server)
        expect((await attemptsOf()).length).toBe(5)

        refuse = false
        const resent = await json(server, org.apiKey, `/v1/events/${event.id}/resend`, { body: {} })
        expect(resent).toEqual({ status: 200, body: { id: event.id, endpoints: [org.endpoint.id] } })
        const before = receiver.received.filter((r) => r.id === event.id).length
        await deliver(server)
        const after = receiver.received.filter((r) => r.id === event.id)
        expect(after.length).toBe(before + 1)
        expect(after.at(-1)!.verified[org.endpoint.secret]).toBe(true)
        expect((await attemptsOf())[0]).toMatchObject({ attempt: 1, status: "succeeded" })
      } finally {
        receiver.answer(() => 200)
      }
    })

    test("an endpoint of organization B never receives A's events, and B cannot read them", async () => {
      const a = await newOrg()
      const b = await newOrg()
      await json(server, a.apiKey, "/v1/customers", { body: { id: "iso-a", email: "iso-a@example.com" } })
      const [event] = (await json(server, a.apiKey, "/v1/events")).body.data
      await deliver(server)
      const toA = receiver.received.filter((r) => r.id === event.id)
      expect(toA.length).toBe(1)
      // Every delivery of A's event verifies with A's secret only.
      expect(toA[0]!.verified[b.endpoint.secret]).toBe(false)
      expect((await json(server, b.apiKey, "/v1/events")).body).toEqual({ data: [], hasMore: false })
      expect(await json(server, b.apiKey, `/v1/events/${event.id}`)).toMatchObject({
        status: 404,
        body: { code: "not_found" }
      })
      expect((await json(server, b.apiKey, `/v1/webhook-endpoints/${b.endpoint.id}/deliveries`)).body.data).toEqual([])
      for (const path of [
        `/v1/webhook-endpoints/${a.endpoint.id}`,
        `/v1/webhook-endpoints/${a.endpoint.id}/deliveries`
      ]) {
        expect(await json(server, b.apiKey, path)).toMatchObject({ status: 404, body: { code: "not_found" } })
      }
      expect(
        await json(server, b.apiKey, `/v1/events/${event.id}/resend`, { body: { endpoint: b.endpoint.id } })
      ).toMatchObject({ status: 404, body: { code: "not_found" } })
      expect(
        await json(server, a.apiKey, `/v1/events/${event.id}/resend`, { body: { endpoint: b.endpoint.id } })
      ).toMatchObject({ status: 404, body: { code: "not_found" } })
    })

    test("a change that rolls back emits nothing", async () => {
      const org = await newOrg()
      // The customer's insert and its event are written, then the creation fails inside its transaction.
      const failed = await server.run(
        Effect.flatMap(Customers, (c) =>
          c.findOrCreate(org.id, { externalId: "rolled-back", email: "rb@example.com" }, Date.now())
        ).pipe(
          Effect.provideService(CustomerCreatedHook, () => Effect.die(new Error("the plans could not be attached"))),
          Effect.exit
        )
      )
      expect(failed._tag).toBe("Failure")
      expect((await json(server, org.apiKey, "/v1/customers")).body.data).toEqual([])
      expect((await json(server, org.apiKey, "/v1/events")).body.data).toEqual([])
      const count = receiver.received.length
      await deliver(server)
      expect(receiver.received.length).toBe(count)
    })

    test("rotation: for 24 h every delivery carries the new secret's signature and the old one's", async () => {
      const org = await newOrg()
      const rotated = await json(server, org.apiKey, `/v1/webhook-endpoints/${org.endpoint.id}/rotate-secret`, {
        body: {}
      })
      expect(rotated.status).toBe(200)
      expect(rotated.body.secret).toStartWith("whsec_")
      expect(rotated.body.secret).not.toBe(org.endpoint.secret)
      receiver.trust(rotated.body.secret)
      await json(server, org.apiKey, "/v1/customers", { body: { id: "rot-1", email: "rot@example.com" } })
      const [event] = (await json(server, org.apiKey, "/v1/events")).body.data
      await deliver(server)
      const [r] = receiver.received.filter((x) => x.id === event.id)
      expect(r!.signature.split(" ").length).toBe(2)
      expect(r!.verified[rotated.body.secret]).toBe(true)
      expect(r!.verified[org.endpoint.secret]).toBe(true)
    })

    test("endpoint management: partial update, type filter, disable, delete; unknown types 400, unknown ids 404", async () => {
      const org = await newOrg()
      const bad = await json(server, org.apiKey, "/v1/webhook-endpoints", {
        body: { url: receiver.url, events: ["customer.created", "customer.exploded"] }
      })
      expect(bad).toMatchObject({ status: 400, body: { code: "invalid_request" } })
      expect(JSON.stringify(bad.body.details)).toContain("events")
      expect(
        await json(server, org.apiKey, "/v1/webhook-endpoints", { body: { url: "ftp://example.com" } })
      ).toMatchObject({ status: 400, body: { code: "invalid_request" } })
      expect(await json(server, org.apiKey, "/v1/events?type=nope")).toMatchObject({
        status: 400,
        body: { code: "invalid_request" }
      })
      for (const path of ["/v1/webhook-endpoints/whe_nope", "/v1/events/msg_nope"]) {
        expect(await json(server, org.apiKey, path)).toMatchObject({ status: 404, body: { code: "not_found" } })
      }
      expect(await json(server, org.apiKey, "/v1/events?customer=nobody")).toMatchObject({
        status: 404,
        body: { code: "customer_not_found" }
      })

      const id = org.endpoint.id
      const updated = await json(server, org.apiKey, `/v1/webhook-endpoints/${id}`, {
        body: { events: ["invoice.paid"], description: null }
      })
      expect(updated.status).toBe(200)
      expect(updated.body).toMatchObject({ id, url: receiver.url, events: ["invoice.paid"], enabled: true })
      expect(updated.body.description).toBeUndefined()
      // Not subscribed to customer.created any more: nothing is sent.
      await json(server, org.apiKey, "/v1/customers", { body: { id: "filtered", email: "filtered@example.com" } })
      const [event] = (await json(server, org.apiKey, "/v1/events?type=customer.created")).body.data
      await deliver(server)
      expect(receiver.received.filter((r) => r.id === event.id)).toEqual([])
      // Resend naming it sends anyway: the vendor asked for it.
      expect(
        (await json(server, org.apiKey, `/v1/events/${event.id}/resend`, { body: { endpoint: id } })).body.endpoints
      ).toEqual([id])
      await deliver(server)
      expect(receiver.received.filter((r) => r.id === event.id).length).toBe(1)

      const disabled = await json(server, org.apiKey, `/v1/webhook-endpoints/${id}`, {
        body: { enabled: false, events: null }
      })
      expect(disabled.body.enabled).toBe(false)
      expect(disabled.body.events).toContain("customer.created")
      expect((await json(server, org.apiKey, `/v1/events/${event.id}/resend`, { body: {} })).body.endpoints).toEqual([])

      // Pages: newest first, with a cursor.
      for (const n of [1, 2, 3])
        await json(server, org.apiKey, "/v1/customers", { body: { id: `page-${n}`, email: `page-${n}@example.com` } })
      const first = await json(server, org.apiKey, "/v1/events?limit=2")
      expect(first.body.data.length).toBe(2)
      expect(first.body.hasMore).toBe(true)
      const second = await json(server, org.apiKey, `/v1/events?limit=2&startingAfter=${first.body.data[1].id}`)
      expect(second.body.data[0].id < first.body.data[1].id).toBe(true)
      const byCustomer = await json(server, org.apiKey, "/v1/events?customer=page-2@example.com")
      expect(byCustomer.body.data.map((e: any) => e.data.externalId)).toEqual(["page-2"])

      expect(await json(server, org.apiKey, `/v1/webhook-endpoints/${id}`, { method: "DELETE" })).toEqual({
        status: 200,
        body: { id, deleted: true }
      })
      expect(await json(server, org.apiKey, `/v1/webhook-endpoints/${id}`)).toMatchObject({ status: 404 })
      expect(await json(server, org.apiKey, `/v1/webhook-endpoints/${id}/deliveries`)).toMatchObject({ status: 404 })
    })
  })
}
