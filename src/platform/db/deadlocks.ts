import { Cause, Effect, Schedule } from "effect"

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

/**
 * SQLite shared by several processes: a transaction that read before it wrote fails at once with SQLITE_BUSY when
 * another process committed in between (its snapshot is stale, so waiting cannot help: `busy_timeout` does not
 * apply); a lock still held past `busy_timeout` fails the same way. Either way nothing of it was written.
 */
const sqliteBusy = (error: unknown) => {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  return (
    (typeof cause?.code === "string" && cause.code.startsWith("SQLITE_BUSY")) ||
    /database is locked/i.test(String(cause?.message ?? ""))
  )
}

/**
 * Runs a whole transaction again when the database gave up on it without writing anything of it: a PostgreSQL
 * deadlock or serialization failure, or SQLite busy (another process's commit), after a short jittered pause so
 * that processes retrying together spread out. Only for a transaction that does nothing outside the database.
 */
export const retryWriteConflicts = <A, E, R>(effect: Effect.Effect<A, E, R>, times = 20): Effect.Effect<A, E, R> =>
  Effect.sandbox(effect).pipe(
    Effect.retry({
      schedule: Schedule.jittered(Schedule.exponential("5 millis", 1.5).pipe(Schedule.upTo("2 seconds"))),
      times,
      while: (cause) => [...Cause.failures(cause), ...Cause.defects(cause)].some((e) => retryable(e) || sqliteBusy(e))
    }),
    Effect.unsandbox
  )
