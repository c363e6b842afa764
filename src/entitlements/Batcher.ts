import { SqlClient } from "@effect/sql"
import { type Cause, Context, Deferred, Effect } from "effect"

/**
 * The effect without the caller's transaction, if any: a batch's step is its own statement (or transaction), on a
 * connection of its own, whoever happened to start it.
 */
export const outsideTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(
    effect,
    (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>
  )

/**
 * Runs many small requests as few database steps (docs/decisions.md, "Performance"): up to `lanes` steps at a time;
 * whatever arrives while they are all busy waits and goes, `maxBatch` at most, into the next free one. A request that
 * finds a lane idle runs the step itself, in its own fiber (a quiet service adds no fiber): at once, or with `gather`
 * after one turn of the event loop (or several), together with whatever arrived meanwhile. `run` answers a batch in
 * order.
 *
 * Never for work inside a transaction: a step runs outside the caller's transaction, on a connection of its own.
 */
export interface Batcher<I, O> {
  readonly submit: (item: I) => Effect.Effect<O>
}

interface Entry<I, O> {
  readonly item: I
  readonly done: Deferred.Deferred<O>
}

/**
 * One turn of the event loop (a macrotask): whatever the server reads in the same turn gets this far first. Spent by a
 * lane that was idle before its first step, so that requests that arrived together share one step instead of each
 * taking one (database round trips, not CPU, are what a request costs most on a machine with few cores).
 */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  setImmediate(() => resume(Effect.void))
})

export const makeBatcher = <I, O>(options: {
  readonly lanes: number
  readonly maxBatch: number
  /**
   * An idle lane first waits for the requests of the same turn of the event loop (`nextTurn`); a number: of that many
   * turns (requests still reading their bodies, on a thread that a synchronous database blocked meanwhile).
   */
  readonly gather?: boolean | number
  readonly run: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>>
}): Batcher<I, O> => {
  const queue: Array<Entry<I, O>> = []
  let running = 0
  const turns = options.gather === true ? 1 : typeof options.gather === "number" ? options.gather : 0
  const gathering = turns <= 1 ? nextTurn : Effect.repeatN(nextTurn, turns - 1)

  /** One batch: answers everyone in it; a failed batch is retried item by item, so one bad item fails alone. */
  const step = (batch: ReadonlyArray<Entry<I, O>>): Effect.Effect<void> =>
    Effect.flatMap(Effect.exit(options.run(batch.map((b) => b.item))), (exit) => {
      if (exit._tag === "Success") {
        return Effect.forEach(batch, (b, i) => Deferred.succeed(b.done, exit.value[i]!), { discard: true })
      }
      if (batch.length === 1) return Deferred.failCause(batch[0]!.done, exit.cause as Cause.Cause<never>)
      return Effect.forEach(
        batch,
        (b) =>
          Effect.flatMap(Effect.exit(options.run([b.item])), (alone) =>
            alone._tag === "Success"
              ? Deferred.succeed(b.done, alone.value[0]!)
              : Deferred.failCause(b.done, alone.cause as Cause.Cause<never>)
          ),
        { discard: true }
      )
    })

  const drain: Effect.Effect<void> = Effect.suspend(() => {
    let batch: Array<Entry<I, O>> = []
    return Effect.gen(function* () {
      while (queue.length > 0) {
        batch = queue.splice(0, options.maxBatch)
        yield* step(batch)
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
      // Uninterruptible but for the wait: a lane, once taken, is always given back.
      // Combinators, not a generator: every request passes here (see `Authenticator`).
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Deferred.make<O>(), (done) => {
          const entry: Entry<I, O> = { item, done }
          const answer = restore(Deferred.await(done))
          if (running >= options.lanes) {
            queue.push(entry)
            return answer
          }
          // A free lane: this request runs its own step, in its own fiber (a fiber per request was measured to cost
          // more than the read). Whatever queued meanwhile goes to a daemon, batch after batch.
          running++
          const own =
            turns > 0
              ? Effect.suspend(() => {
                  queue.push(entry)
                  return Effect.zipRight(
                    gathering,
                    Effect.suspend(() => {
                      // Another lane's step may have taken everything meanwhile, this entry included.
                      const batch = queue.splice(0, options.maxBatch)
                      return batch.length > 0 ? outsideTransaction(step(batch)) : Effect.void
                    })
                  )
                })
              : outsideTransaction(step([entry]))
          const handOver = Effect.suspend(() => {
            if (queue.length > 0) return Effect.asVoid(Effect.forkDaemon(outsideTransaction(drain)))
            running--
            return Effect.void
          })
          return Effect.zipRight(Effect.zipRight(own, handOver), answer)
        })
      )
  }
}
