import { SqlClient } from "@effect/sql"
import { type Cause, Context, Deferred, Effect } from "effect"

/**
 * Runs many small requests as few database steps (docs/decisions.md, "Performance"): up to `lanes` steps at a time;
 * whatever arrives while they are all busy waits and goes, `maxBatch` at most, into the next free one. A request that
 * finds a lane idle goes at once, alone, so a quiet service adds no wait. `run` answers a batch in order.
 *
 * Never for work inside a transaction: the step runs in its own fiber, on a connection of its own.
 */
/**
 * The effect without the caller's transaction, if any: a batch's step is its own statement (or transaction), on a
 * connection of its own, whoever happened to start it.
 */
export const outsideTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(effect, (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>)

export interface Batcher<I, O> {
  readonly submit: (item: I) => Effect.Effect<O>
}

export const makeBatcher = <I, O>(options: {
  readonly lanes: number
  readonly maxBatch: number
  readonly run: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>>
}): Batcher<I, O> => {
  const queue: Array<{ readonly item: I; readonly done: Deferred.Deferred<O> }> = []
  let running = 0

  const drain: Effect.Effect<void> = Effect.suspend(() => {
    let batch: typeof queue = []
    return Effect.gen(function*() {
      while (queue.length > 0) {
        batch = queue.splice(0, options.maxBatch)
        const exit = yield* Effect.exit(options.run(batch.map((b) => b.item)))
        if (exit._tag === "Success") {
          for (let i = 0; i < batch.length; i++) yield* Deferred.succeed(batch[i]!.done, exit.value[i]!)
        } else if (batch.length === 1) {
          yield* Deferred.failCause(batch[0]!.done, exit.cause as Cause.Cause<never>)
        } else {
          // One request's failure must not be everyone's: each again on its own.
          for (const b of batch) {
            const alone = yield* Effect.exit(options.run([b.item]))
            yield* alone._tag === "Success"
              ? Deferred.succeed(b.done, alone.value[0]!)
              : Deferred.failCause(b.done, alone.cause as Cause.Cause<never>)
          }
        }
      }
      running--
    }).pipe(
      // Interrupted (the runtime shutting down): the batch in hand fails instead of waiting forever.
      Effect.onInterrupt(() =>
        Effect.suspend(() => {
          running--
          return Effect.forEach(batch, (b) => Deferred.interrupt(b.done), { discard: true })
        })
      )
    )
  })

  return {
    submit: (item) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<O>()
        queue.push({ item, done })
        if (running < options.lanes) {
          running++
          // A daemon (its batch answers everyone in it even if this request is gone), outside any transaction the
          // caller might be in: a step is its own statement.
          yield* Effect.forkDaemon(outsideTransaction(drain))
        }
        return yield* Deferred.await(done)
      })
  }
}
