import { SqlClient } from "@effect/sql"
import { type Duration, Effect, Layer } from "effect"
import type { CheckpointerStart } from "./walCheckpointWorker.ts"

/**
 * SQLite's WAL checkpoints off the service's thread (docs/decisions.md, "Performance").
 *
 * By default the connection that commits copies the log back into the database whenever it passes 1,000 pages, with
 * two fsyncs, inside that commit: measured on `track`, ~100 µs of every commit on average, and a stall of several
 * milliseconds for the request that happens to trigger it. bun:sqlite is synchronous, so that is time the one JS
 * thread serves nobody. Here a worker thread with its own connection runs passive checkpoints every `intervalMs`,
 * and the service's connection keeps an automatic checkpoint only as a backstop, at `BACKSTOP_PAGES`, should the
 * worker fall behind or die (a passive checkpoint never waits for writers, so under constant writing the log may
 * only be rewound after a checkpoint that ran between two commits: the backstop's). 50,000 pages (200 MiB): one
 * batch creating 1,000 customers with 20 `autoEnable` plans logs ~10,100 pages, and at 10,000 its own commit ran the
 * backstop (the commit 200 → 800 ms, docs/decisions.md, "New customers in batches").
 */
export const BACKSTOP_PAGES = 50_000
/** SQLite's own default, kept when the worker cannot run. */
const DEFAULT_PAGES = 1_000
const INTERVAL_MS = 50

/** The worker's first answer: one of `answers`, or "failed" if it threw (an error event) or said nothing in time. */
const firstAnswer = (worker: Worker, answers: ReadonlyArray<string>, within: Duration.DurationInput) =>
  Effect.async<string>((resume) => {
    const done = (answer: string) => {
      worker.removeEventListener("message", onMessage)
      worker.removeEventListener("error", onError)
      resume(Effect.succeed(answer))
    }
    const onMessage = (event: MessageEvent) => {
      if (typeof event.data === "string" && answers.includes(event.data)) done(event.data)
    }
    const onError = (event: Event) => {
      event.preventDefault()
      done("failed")
    }
    worker.addEventListener("message", onMessage)
    worker.addEventListener("error", onError)
    return Effect.sync(() => {
      worker.removeEventListener("message", onMessage)
      worker.removeEventListener("error", onError)
    })
  }).pipe(Effect.timeoutTo({ duration: within, onTimeout: () => "failed", onSuccess: (answer) => answer }))

/**
 * For a database file in WAL mode (not `:memory:`), after the connection is open and migrated. Should the worker not
 * start, the service's connection keeps checkpointing as SQLite does by default, and a warning says so.
 */
export const walCheckpointer = (filename: string) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const worker = yield* Effect.acquireRelease(
        Effect.sync(() => new Worker(new URL("./walCheckpointWorker.ts", import.meta.url).href)),
        (worker) =>
          Effect.gen(function* () {
            worker.postMessage("stop")
            // The last checkpoint leaves the file whole; a worker that does not answer is ended regardless.
            yield* firstAnswer(worker, ["stopped"], "2 seconds")
            worker.terminate()
          })
      )
      worker.unref()
      const start: CheckpointerStart = { filename, intervalMs: INTERVAL_MS }
      worker.postMessage(start)
      const answer = yield* firstAnswer(worker, ["started", "failed"], "5 seconds")
      if (answer === "started") {
        yield* sql.unsafe(`PRAGMA wal_autocheckpoint = ${BACKSTOP_PAGES}`)
      } else {
        yield* sql.unsafe(`PRAGMA wal_autocheckpoint = ${DEFAULT_PAGES}`)
        yield* Effect.logWarning("the WAL checkpoint worker did not start; checkpoints stay on the service's thread")
      }
    })
  )
