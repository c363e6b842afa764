import { Effect, Option, Redacted } from "effect"
import { Webhook } from "standardwebhooks"
import { Deliveries, type PassReport } from "../../src/events/Deliveries.ts"
import { scratchDatabase } from "../hardening/support.ts"
import { databases, type Database, type TestServer } from "../support/harness.ts"

/**
 * The databases of the delivery tests. The worker claims across organizations (as the renewals worker does), so on
 * PostgreSQL each suite gets a database of its own: other suites' endpoints (example.com) are not its to deliver.
 */
export const deliveryDatabases = (): ReadonlyArray<
  Database & { readonly prepare: () => Promise<() => Promise<void>> }
> =>
  databases().map((db) => {
    if (db.name === "sqlite") return { ...db, prepare: async () => async () => undefined }
    const config: { databaseUrl?: Option.Option<Redacted.Redacted> } = {}
    return {
      ...db,
      config,
      prepare: async () => {
        const scratch = await scratchDatabase(process.env.DATABASE_URL!.trim(), "billing_events_test")
        config.databaseUrl = Option.some(Redacted.make(scratch.url))
        return scratch.drop
      }
    }
  })

/** One request a receiver got, and what the independent Standard Webhooks library made of it. */
export interface Received {
  readonly id: string
  readonly timestamp: string
  readonly signature: string
  readonly body: string
  readonly event: any
  /** Every secret the receiver was told to check, and whether the library accepted the request with it. */
  readonly verified: Record<string, boolean>
}

/**
 * A vendor's webhook receiver on 127.0.0.1: checks every request with the `standardwebhooks` package (not our code)
 * against the secrets it is given, then answers what `answer` says (200 by default; a number, or a promise of one to
 * hold the request open).
 */
export const startReceiver = () => {
  const received: Array<Received> = []
  const secrets: Array<string> = []
  let answer: (n: number, request: Request) => number | Promise<number> = () => 200
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (request) => {
      const body = await request.text()
      const headers = {
        "webhook-id": request.headers.get("webhook-id") ?? "",
        "webhook-timestamp": request.headers.get("webhook-timestamp") ?? "",
        "webhook-signature": request.headers.get("webhook-signature") ?? ""
      }
      const verified: Record<string, boolean> = {}
      for (const secret of secrets) {
        try {
          new Webhook(secret).verify(body, headers)
          verified[secret] = true
        } catch {
          verified[secret] = false
        }
      }
      let event: any
      try {
        event = JSON.parse(body)
      } catch {
        event = undefined
      }
      received.push({
        id: headers["webhook-id"],
        timestamp: headers["webhook-timestamp"],
        signature: headers["webhook-signature"],
        body,
        event,
        verified
      })
      const status = await answer(received.length, request)
      return new Response(status >= 200 && status < 300 ? "ok" : `no (${status})`, { status })
    }
  })
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    received,
    /** Secrets to verify with (an endpoint's, old and new across a rotation). */
    trust: (secret: string) => void secrets.push(secret),
    answer: (f: (n: number, request: Request) => number | Promise<number>) => {
      answer = f
    },
    stop: () => server.stop(true)
  }
}
export type Receiver = ReturnType<typeof startReceiver>

/** One pass of the delivery worker, awaited. */
export const deliver = (server: TestServer): Promise<PassReport> =>
  server.run(Effect.flatMap(Deliveries, (d) => d.runOnce))

/** Passes of the worker until `done` holds; bounded (fails after `rounds`), never a timed assertion. */
export const deliverUntil = async (server: TestServer, done: () => boolean, rounds = 200) => {
  for (let i = 0; i < rounds; i++) {
    await deliver(server)
    if (done()) return
    await Bun.sleep(10)
  }
  throw new Error("the condition did not hold after every round")
}

/** Waits (bounded) until `done` holds, for workers running in the background or in another process. */
export const waitUntil = async (done: () => boolean | Promise<boolean>, what: string, rounds = 300) => {
  for (let i = 0; i < rounds; i++) {
    if (await done()) return
    await Bun.sleep(50)
  }
  throw new Error(`waited in vain: ${what}`)
}

export const json = async (
  server: TestServer,
  apiKey: string,
  path: string,
  init: { method?: string; body?: unknown } = {}
) => {
  const response = await server.fetch(path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    apiKey,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
  })
  return { status: response.status, body: (await response.json()) as any }
}
