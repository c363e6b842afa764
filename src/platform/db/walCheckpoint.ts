import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
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
 * only be rewound after a checkpoint that ran between two commits: the backstop's).
 */
export const BACKSTOP_PAGES = 10_000
const INTERVAL_MS = 50

const onceMessage = (worker: Worker, expected: string) =>
  Effect.async<void>((resume) => {
    const listener = (event: MessageEvent) => {
      if (event.data === expected) {
        worker.removeEventListener("message", listener)
        resume(Effect.void)
      }
    }
    worker.addEventListener("message", listener)
  })

/** For a database file in WAL mode (not `:memory:`), after the connection is open and migrated. */
export const walCheckpointer = (filename: string) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`PRAGMA wal_autocheckpoint = ${BACKSTOP_PAGES}`)
      const worker = yield* Effect.acquireRelease(
        Effect.sync(() => new Worker(new URL("./walCheckpointWorker.ts", import.meta.url).href)),
        (worker) =>
          Effect.gen(function*() {
            worker.postMessage("stop")
            // The last checkpoint leaves the file whole; a worker that does not answer is ended regardless.
            yield* onceMessage(worker, "stopped").pipe(Effect.timeoutOption("2 seconds"))
            worker.terminate()
          })
      )
      worker.unref()
      const start: CheckpointerStart = { filename, intervalMs: INTERVAL_MS }
      worker.postMessage(start)
      yield* onceMessage(worker, "started").pipe(Effect.timeoutOption("5 seconds"))
    })
  )
