import { SqlClient } from "@effect/sql"
import { Clock, Context, Duration, Effect, Either, Layer, type Scope } from "effect"
import { hostname } from "node:os"
import { AppConfig } from "../platform/config.ts"
import { describeDefect } from "../platform/defects.ts"
import { Encryption } from "../platform/encryption.ts"
import { Ids } from "../platform/ids.ts"
import { receives } from "./Events.ts"
import { retiredSigning, type StoredSecrets } from "./retiredSecrets.ts"
import { signedHeaders } from "./signing.ts"
import { type AttemptOutcome, post } from "./transport.ts"

export interface PassReport {
  /** Events given their deliveries (one per subscribed endpoint). */
  readonly fannedOut: number
  readonly attempted: number
  readonly succeeded: number
  /** Attempts that did not succeed (retried later, or the delivery has failed for good). */
  readonly failed: number
  /** Attempts stopped by shutdown, their deliveries handed back. */
  readonly released: number
}

/**
 * The delivery worker (decisions.md §11). Events written by the outbox are fanned out to the endpoints subscribed at
 * that moment; due deliveries are claimed (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so every process may run a worker
 * without doubling work; on SQLite one worker per process), each claim pushing the delivery's `next_attempt_at` out
 * by a lease, so the delivery of a process that died is due again when its lease runs out. Every attempt is signed
 * afresh, recorded, and a failure is retried on the schedule, then `failed`.
 */
export interface DeliveriesShape {
  /** One pass, awaited: fan out new events, then attempt every due delivery (tests drive the worker with it). */
  readonly runOnce: Effect.Effect<PassReport>
  /**
   * Passes in the background until the scope closes. Closing stops claiming, lets attempts in flight finish for a
   * moment, then stops the rest and hands their deliveries back (due at once, for this or another process).
   */
  readonly start: Effect.Effect<void, never, Scope.Scope>
}

export class Deliveries extends Context.Tag("Deliveries")<Deliveries, DeliveriesShape>() {}

const FAN_OUT_BATCH = 200
const MAX_ROUNDS = 1_000
/** How long a shutdown waits for attempts in flight before stopping them (at most half the attempt timeout). */
const SHUTDOWN_GRACE_MS = 3_000

interface Claimed {
  readonly organizationId: string
  readonly id: string
  readonly eventId: string
  readonly endpointId: string
  readonly attempts: number
}

const USER_AGENT = "billing-service-webhooks/1"

export const DeliveriesLive = Layer.effect(
  Deliveries,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids
    const encryption = yield* Encryption
    const config = yield* AppConfig
    const settings = config.webhooks
    const schedule = settings.retryScheduleMs
    const publicOnly = config.appEnv === "live"
    // Who holds a claim: guards the record of an attempt against a claim that passed to another process meanwhile.
    const owner = `${hostname()}:${process.pid}:${(yield* ids.next("dlv")).slice(-8)}`
    const skipLocked = sql.onDialectOrElse({
      pg: () => sql.literal("FOR UPDATE SKIP LOCKED"),
      orElse: () => sql.literal("")
    })
    // Aborts attempts in flight when a background worker is stopped.
    let shutdown = new AbortController()
    let inFlight = 0

    /** New events → one delivery per enabled endpoint subscribed to the type; answers how many events. */
    const fanOutBatch = sql
      .withTransaction(
        Effect.gen(function* () {
          const events = yield* sql<{
            organizationId: string
            id: string
            type: string
          }>`SELECT organization_id, id, type
          FROM outbound_events WHERE fanned_out = 0 ORDER BY created_at LIMIT ${FAN_OUT_BATCH} ${skipLocked}`
          if (events.length === 0) return 0
          const now = yield* Clock.currentTimeMillis
          const byOrg = new Map<string, Array<{ id: string; type: string }>>()
          for (const e of events) byOrg.set(e.organizationId, [...(byOrg.get(e.organizationId) ?? []), e])
          for (const [org, list] of byOrg) {
            const endpoints = yield* sql<{ id: string; events: string | null }>`SELECT id, events FROM webhook_endpoints
            WHERE organization_id = ${org} AND enabled = 1`
            for (const event of list) {
              for (const endpoint of endpoints) {
                if (!receives(endpoint.events, event.type)) continue
                yield* sql`INSERT INTO webhook_deliveries ${sql.insert({
                  organizationId: org,
                  id: yield* ids.next("dlv"),
                  eventId: event.id,
                  endpointId: endpoint.id,
                  status: "pending",
                  attempts: 0,
                  nextAttemptAt: now,
                  leaseOwner: null,
                  createdAt: now,
                  updatedAt: now
                })}`
              }
            }
            yield* sql`UPDATE outbound_events SET fanned_out = 1
            WHERE organization_id = ${org} AND id IN ${sql.in(list.map((e) => e.id))}`
          }
          return events.length
        })
      )
      .pipe(Effect.orDie)

    const fanOut = Effect.gen(function* () {
      let total = 0
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const n = yield* fanOutBatch
        total += n
        if (n < FAN_OUT_BATCH) break
        // A timer's turn between rounds: requests waiting for the database (on SQLite, its one connection) take it
        // then, rather than after a batch's tens of thousands of events are all fanned out.
        yield* Effect.sleep(0)
      }
      return total
    })

    /** Due deliveries, claimed for this process until now + lease (across organizations: the one such query). */
    const claim = (limit: number) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const due =
              yield* sql<Claimed>`SELECT organization_id, id, event_id, endpoint_id, attempts FROM webhook_deliveries
            WHERE status = 'pending' AND next_attempt_at <= ${now} ORDER BY next_attempt_at LIMIT ${limit} ${skipLocked}`
            const claimed: Array<Claimed> = []
            for (const d of due) {
              const taken = yield* sql`UPDATE webhook_deliveries SET next_attempt_at = ${now + settings.leaseMs},
              lease_owner = ${owner}, updated_at = ${now}
              WHERE organization_id = ${d.organizationId} AND id = ${d.id} AND status = 'pending'
                AND next_attempt_at <= ${now} RETURNING id`
              if (taken.length > 0) claimed.push({ ...d, attempts: Number(d.attempts) })
            }
            return claimed
          })
        )
        .pipe(Effect.orDie)

    /** A claim handed back unattempted: due at once. */
    const release = (d: Claimed) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) =>
          sql`UPDATE webhook_deliveries SET next_attempt_at = ${now}, lease_owner = NULL, updated_at = ${now}
            WHERE organization_id = ${d.organizationId} AND id = ${d.id} AND lease_owner = ${owner} AND status = 'pending'`
      ).pipe(Effect.asVoid, Effect.orDie)

    const record = (d: Claimed, eventType: string, outcome: AttemptOutcome) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const attempt = d.attempts + 1
            const ok = outcome.status !== null && outcome.status >= 200 && outcome.status < 300
            const wait = ok ? undefined : schedule[attempt - 1]
            const nextAttemptAt = wait === undefined ? null : now + wait
            const status = ok ? "succeeded" : nextAttemptAt === null ? "failed" : "pending"
            yield* sql`INSERT INTO webhook_attempts ${sql.insert({
              organizationId: d.organizationId,
              id: yield* ids.next("att"),
              deliveryId: d.id,
              endpointId: d.endpointId,
              eventId: d.eventId,
              eventType,
              attempt,
              status: ok ? "succeeded" : "failed",
              responseStatus: outcome.status,
              responseBody: outcome.body,
              durationMs: outcome.durationMs,
              error: outcome.error ?? null,
              nextAttemptAt,
              createdAt: now
            })}`
            yield* sql`UPDATE webhook_deliveries SET status = ${status}, attempts = ${attempt},
            next_attempt_at = ${nextAttemptAt ?? now}, lease_owner = NULL, updated_at = ${now}
            WHERE organization_id = ${d.organizationId} AND id = ${d.id} AND lease_owner = ${owner}`
            return ok
          })
        )
        .pipe(Effect.orDie)

    type Result = "succeeded" | "failed" | "released" | "dropped"

    /** One attempt of one claimed delivery. Uninterruptible: it ends by its timeout, or by the shutdown's abort. */
    const attempt = (d: Claimed): Effect.Effect<Result> =>
      Effect.gen(function* () {
        const [event] = yield* sql<{ type: string; data: string; createdAt: number }>`SELECT type, data, created_at
            FROM outbound_events WHERE organization_id = ${d.organizationId} AND id = ${d.eventId}`.pipe(Effect.orDie)
        const [endpoint] = yield* sql<StoredSecrets & { url: string; secret: string }>`SELECT url, secret,
            previous_secret, previous_secret_expires_at, retired_secrets FROM webhook_endpoints
            WHERE organization_id = ${d.organizationId} AND id = ${d.endpointId}`.pipe(Effect.orDie)
        if (event === undefined || endpoint === undefined) {
          // The endpoint was deleted meanwhile (with its deliveries): nothing to send.
          yield* sql`DELETE FROM webhook_deliveries WHERE organization_id = ${d.organizationId} AND id = ${d.id}`.pipe(
            Effect.orDie
          )
          return "dropped" as const
        }
        const now = yield* Clock.currentTimeMillis
        const body = JSON.stringify({
          id: d.eventId,
          type: event.type,
          createdAt: Number(event.createdAt),
          data: JSON.parse(event.data)
        })
        const readable = yield* Effect.try(() => [
          encryption.decrypt(endpoint.secret),
          ...retiredSigning(endpoint, now).map((r) => encryption.decrypt(r.secret))
        ]).pipe(Effect.either)
        if (Either.isLeft(readable)) {
          // One endpoint's secret stored under another key: its attempt fails (and is retried on the schedule), the
          // pass goes on with the others. The log names the endpoint and the defect's kind, never the text.
          yield* Effect.logError("webhook signing secret unreadable; attempt failed", {
            organizationId: d.organizationId,
            endpointId: d.endpointId,
            ...describeDefect(readable.left.error)
          })
          const unsigned = {
            status: null,
            body: "",
            durationMs: 0,
            error: "The endpoint's signing secret cannot be read"
          }
          return (yield* record(d, event.type, unsigned)) ? ("succeeded" as const) : ("failed" as const)
        }
        const secrets = readable.right
        const signal = shutdown.signal
        const outcome = yield* Effect.promise(() =>
          post({
            url: endpoint.url,
            headers: {
              "content-type": "application/json",
              "user-agent": USER_AGENT,
              ...signedHeaders(secrets, d.eventId, Math.floor(now / 1000), body)
            },
            body,
            timeoutMs: settings.timeoutMs,
            publicOnly,
            signal
          })
        )
        if (outcome.released === true) {
          yield* release(d)
          return "released" as const
        }
        return (yield* record(d, event.type, outcome)) ? ("succeeded" as const) : ("failed" as const)
      }).pipe(
        (body) =>
          Effect.zipRight(
            Effect.sync(() => inFlight++),
            body
          ),
        Effect.ensuring(Effect.sync(() => inFlight--)),
        Effect.uninterruptible
      )

    const pass = (stopping: () => boolean) =>
      Effect.gen(function* () {
        const fannedOut = yield* fanOut
        const report = { fannedOut, attempted: 0, succeeded: 0, failed: 0, released: 0 }
        for (let round = 0; round < MAX_ROUNDS && !stopping(); round++) {
          // As many as run at once: a claimed delivery starts at once, well inside its lease.
          const claimed = yield* claim(settings.concurrency)
          if (claimed.length === 0) break
          const results = yield* Effect.forEach(claimed, attempt, { concurrency: settings.concurrency })
          for (const r of results) {
            if (r === "dropped") continue
            if (r === "released") report.released++
            else {
              report.attempted++
              report[r]++
            }
          }
        }
        return report satisfies PassReport
      })

    let stopping = false
    const runOnce = pass(() => false)

    const start = Effect.gen(function* () {
      stopping = false
      shutdown = new AbortController()
      const loop = pass(() => stopping).pipe(
        Effect.catchAllCause((cause) => Effect.logError("webhook delivery pass failed", cause)),
        Effect.zipRight(Effect.sleep(Duration.millis(settings.pollMs))),
        Effect.repeat({ while: () => !stopping })
      )
      yield* Effect.forkScoped(loop)
      // Runs before the loop is interrupted (finalizers run in reverse): stop claiming, give attempts in flight a
      // moment, then abort the rest, which hand their deliveries back.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          stopping = true
          const deadline = Date.now() + Math.min(SHUTDOWN_GRACE_MS, settings.timeoutMs / 2)
          while (inFlight > 0 && Date.now() < deadline) yield* Effect.sleep(Duration.millis(20))
          shutdown.abort()
          while (inFlight > 0) yield* Effect.sleep(Duration.millis(5))
        })
      )
    })

    return { runOnce, start }
  })
)
