import { Deferred, Duration, Effect, Exit, Redacted, Schedule } from "effect"
import pg from "pg"

const ignore = () => undefined

/**
 * A session of its own on PostgreSQL, for LISTEN (a session-bound feature: behind a transaction-mode pooler it needs
 * DATABASE_DIRECT_URL). Connecting is part of the acquisition, which cannot be interrupted half-way: a scope closed
 * while it connects waits for the connection and then ends it. @effect/sql-pg's own `listen` connected in an
 * interruptible step, so a short-lived process (the CLI) closed during it left a connected socket behind that kept
 * the process alive after it had answered (issue 33).
 */
const session = (url: Redacted.Redacted) =>
  Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const client = new pg.Client({
        connectionString: Redacted.value(url),
        connectionTimeoutMillis: 5_000,
        application_name: "billing-service-listen"
      })
      client.on("error", ignore)
      try {
        await client.connect()
      } catch (cause) {
        await client.end().catch(ignore)
        throw cause
      }
      return client
    }),
    (client) => Effect.promise(() => client.end().catch(ignore)).pipe(Effect.timeoutOption(Duration.seconds(1)))
  )

/**
 * Runs `onEvent` for every notification on `channel`, and once more each time the session is (re)established (what
 * was announced while it was down is unknown). Reconnects every second after a failure; runs until interrupted.
 */
export const listen = (url: Redacted.Redacted, channel: string, onEvent: () => void): Effect.Effect<never> =>
  Effect.scoped(
    Effect.gen(function* () {
      const client = yield* session(url)
      const lost = yield* Deferred.make<never, Error>()
      const onLost = (cause?: Error) => Deferred.unsafeDone(lost, Exit.fail(cause ?? new Error("connection ended")))
      client.on("notification", (message) => {
        if (message.channel === channel) onEvent()
      })
      client.on("error", onLost)
      client.on("end", () => onLost())
      yield* Effect.tryPromise(() => client.query(`LISTEN ${client.escapeIdentifier(channel)}`))
      onEvent()
      return yield* Deferred.await(lost)
    })
  ).pipe(
    Effect.tapError(() => Effect.sync(onEvent)),
    Effect.retry(Schedule.spaced(Duration.seconds(1))),
    Effect.orDie
  )
