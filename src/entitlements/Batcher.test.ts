import { describe, expect, test } from "bun:test"
import { Deferred, Effect } from "effect"
import { makeBatcher, nextTurn } from "./Batcher.ts"

/**
 * A batcher that doubles numbers and remembers the batches it ran; `fail` makes a batch containing it fail. A batch
 * takes a millisecond, or until `gate` opens when one is given (a test of turns must not race the wall clock).
 */
const doubling = (options: { lanes: number; gather?: boolean | number }, fail?: number, gate?: Effect.Effect<void>) => {
  const batches: Array<ReadonlyArray<number>> = []
  const batcher = makeBatcher<number, number>({
    ...options,
    maxBatch: 3,
    // Asynchronous, as a database round trip is: what arrives meanwhile queues.
    run: (items) =>
      Effect.zipRight(
        gate ?? Effect.sleep("1 millis"),
        Effect.suspend(() => {
          batches.push(items)
          return fail !== undefined && items.includes(fail)
            ? Effect.dieMessage("bad item")
            : Effect.succeed(items.map((n) => n * 2))
        })
      )
  })
  return { batcher, batches }
}

const submitAll = (batcher: { submit: (n: number) => Effect.Effect<number> }, items: ReadonlyArray<number>) =>
  Effect.runPromise(
    Effect.all(
      items.map((n) => Effect.exit(batcher.submit(n))),
      { concurrency: "unbounded" }
    )
  )

describe("batcher", () => {
  test("with gather, requests of the same turn share steps of at most maxBatch, answered in order", async () => {
    const { batcher, batches } = doubling({ lanes: 1, gather: true })
    const answers = await submitAll(batcher, [1, 2, 3, 4, 5])
    expect(answers.map((a) => (a._tag === "Success" ? a.value : null))).toEqual([2, 4, 6, 8, 10])
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5]
    ])
  })

  test("without gather, the request that finds the lane idle runs alone; the rest wait for the next step", async () => {
    const { batcher, batches } = doubling({ lanes: 1 })
    await submitAll(batcher, [1, 2, 3, 4])
    expect(batches).toEqual([[1], [2, 3, 4]])
  })

  test("gathering over several turns joins requests that arrive a turn or two later; one turn does not", async () => {
    const lateBy = (turns: number, n: number, batcher: { submit: (n: number) => Effect.Effect<number> }) =>
      Effect.zipRight(Effect.repeatN(nextTurn, turns - 1), batcher.submit(n))
    for (const [gather, expected] of [
      [3, [[1, 2, 3]]],
      [true, [[1], [2, 3]]]
    ] as const) {
      // The first batch runs until every request has arrived (two turns), however slow the machine.
      const gate = Effect.runSync(Deferred.make<void>())
      const { batcher, batches } = doubling({ lanes: 1, gather }, undefined, Deferred.await(gate))
      const open = Effect.zipRight(Effect.repeatN(nextTurn, 3), Deferred.succeed(gate, undefined))
      const answers = await Effect.runPromise(
        Effect.all([batcher.submit(1), lateBy(1, 2, batcher), lateBy(2, 3, batcher), open], {
          concurrency: "unbounded"
        })
      )
      expect(answers).toEqual([2, 4, 6, true])
      expect(batches).toEqual(expected.map((b) => [...b]))
    }
  })

  test("with gather and several lanes, a lane whose requests another lane took runs no empty step", async () => {
    const { batcher, batches } = doubling({ lanes: 2, gather: true })
    const answers = await submitAll(batcher, [1, 2])
    expect(answers.map((a) => (a._tag === "Success" ? a.value : null))).toEqual([2, 4])
    expect(batches).toEqual([[1, 2]])
  })

  test("a failed batch is retried item by item: only the bad item fails", async () => {
    const { batcher, batches } = doubling({ lanes: 1, gather: true }, 2)
    const answers = await submitAll(batcher, [1, 2, 3])
    expect(answers.map((a) => (a._tag === "Success" ? a.value : "failed"))).toEqual([2, "failed", 6])
    expect(batches).toEqual([[1, 2, 3], [1], [2], [3]])
  })
})
