import { Cause, Effect } from "effect"

/** PostgreSQL's answers to a transaction it rolled back to break a cycle of waits, or to a serialization failure. */
const RETRYABLE = new Set(["40P01", "40001"])

const retryable = (error: unknown) => {
  const code = (error as { cause?: { code?: unknown } } | null)?.cause?.code
  return typeof code === "string" && RETRYABLE.has(code)
}

/**
 * Runs a transaction (or one statement) again when the database rolled it back to break a deadlock: all of it was
 * undone, so running it again is safe. The database errors here are often defects already (repositories `orDie`), so
 * the whole cause is inspected.
 */
export const retryDeadlocks = <A, E, R>(effect: Effect.Effect<A, E, R>, times = 3): Effect.Effect<A, E, R> =>
  Effect.sandbox(effect).pipe(
    Effect.retry({
      times,
      while: (cause) => [...Cause.failures(cause), ...Cause.defects(cause)].some(retryable)
    }),
    Effect.unsandbox
  )
