import { describe, expect, test } from "bun:test"
import { Deferred, Effect, Fiber, FiberId } from "effect"
import type { EntitlementState } from "../api/entitlements.ts"
import type { GuardedBatches, KeyedBalance, UsageEventRow } from "./records.ts"
import { balanceKey } from "./batchDraws.ts"
import { type GuardedInput, makeGuardedBatches } from "./guardedBatch.ts"
import type { Meter } from "./meter.ts"
import type { Resolution } from "./resolution.ts"

/**
 * What a guarded batch's check reads (src/entitlements/guardedBatch.ts), over a store that counts its reads: only the
 * balances whose version moved come back, and once most of a batch's balances turn out moved, every balance the
 * process knows is checked at once (`relearn`), at most once per 10 s.
 */
const ORG = "org_1"
const SUBJECT = "feat_tokens"
const customers = Array.from({ length: 60 }, (_, i) => `cus_${String(i).padStart(2, "0")}`)

/**
 * A store of balances another writer may move, and every read made of it: the customers each read asked about, and
 * how many of them it answered (those whose version was not the one given).
 */
const makeStore = () => {
  const versions = new Map(customers.map((c) => [c, 1]))
  const reads: Array<ReadonlyArray<string>> = []
  const answered: Array<number> = []
  /** Each guarded write: whether its guard held. */
  const guards: Array<boolean> = []
  /** Holds the next write on its way until it is done (a statement the database has not reached yet). */
  let gate: Deferred.Deferred<void> | undefined
  const holdNextWrite = () => {
    gate = Deferred.unsafeMake<void>(FiberId.none)
    return gate
  }
  /** Whether the write to hold has not been sent yet. */
  const holding = () => gate !== undefined
  /** Runs while the next read is on its way, before it answers (a write of the same process committing meanwhile). */
  let meanwhile: Effect.Effect<unknown> = Effect.void
  const guarded: GuardedBatches = {
    readChanged: (_org, balances) =>
      Effect.suspend(() => {
        const running = meanwhile
        meanwhile = Effect.void
        return running
      }).pipe(
        Effect.zipRight(
          Effect.sync(() => {
            reads.push(balances.map((b) => b.customerId))
            const changed = balances.flatMap((b): Array<KeyedBalance> => {
              const version = versions.get(b.customerId)!
              if (b.version === version) return []
              const row = { windowStart: 0, windowEnd: null, used: 0n, overage: 0n, bonus: 0n, addon: 0n }
              return [{ ...row, version, customerId: b.customerId, subjectId: b.subjectId }]
            })
            answered.push(changed.length)
            return changed
          })
        )
      ),
    // A guard holds where every balance is still at the version decided over: then the written ones move one version.
    commit: (_org, written, checked) =>
      Effect.suspend(() => {
        const held = gate
        gate = undefined
        return held === undefined ? Effect.void : Deferred.await(held)
      }).pipe(
        Effect.zipRight(
          Effect.sync(() => {
            const held =
              written.every((w) => versions.get(w.customerId) === w.expectedVersion) &&
              checked.every((c) => versions.get(c.customerId) === c.version)
            guards.push(held)
            if (held) for (const w of written) versions.set(w.customerId, versions.get(w.customerId)! + 1)
            return held
          })
        )
      )
  }
  /** Another writer (another process, an operator) moves these balances. */
  const move = (moved: ReadonlyArray<string>) => {
    for (const c of moved) versions.set(c, versions.get(c)! + 1)
  }
  const forget = () => {
    reads.length = 0
    answered.length = 0
    guards.length = 0
  }
  /** Balances created since (by another process, or by this one's first batch over a new customer). */
  const add = (created: ReadonlyArray<string>) => {
    for (const c of created) versions.set(c, 1)
  }
  const whileReading = (effect: Effect.Effect<unknown>) => {
    meanwhile = effect
  }
  return { guarded, reads, answered, guards, versions, move, add, forget, whileReading, holdNextWrite, holding }
}

/** Resolves once `done` holds (other fibers run meanwhile), or fails after 100 turns of the event loop. */
const until = async (done: () => boolean) => {
  for (let turn = 0; turn < 100 && !done(); turn++) await new Promise((resolve) => setTimeout(resolve, 0))
  if (!done()) throw new Error("the awaited step never happened")
}

/** A draw of one unit, always admitted (what the check reads does not depend on the draw's rules). */
const drawOne = {
  subjectId: SUBJECT,
  init: { windowStart: 0, windowEnd: null },
  capped: false,
  over: (stored: KeyedBalance | null, _spent: string, eventId: string) => ({
    answer: { allowed: true } as unknown as EntitlementState,
    write: {
      next: { ...stored!, used: stored!.used + 1n },
      event: { id: eventId } as UsageEventRow,
      notices: [],
      spentAfter: null
    },
    denialNotices: []
  })
} as unknown as Meter

/** A batch of one draw from each customer named (only its balances matter to the check). */
const batchOver = (names: ReadonlyArray<string>, now: number): GuardedInput => ({
  resolutions: names.map((id) => ({ _tag: "Resolved", resolved: { customer: { id } } }) as unknown as Resolution),
  meters: names.map(() => drawOne),
  eventIds: names.map((_, i) => `evt_${i}`),
  gates: [],
  decided: names.map(() => undefined),
  now
})

describe("guarded batches", () => {
  test("most of a batch's balances moved: every balance known is checked at once, and later batches find nothing left to read", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const first = customers.slice(0, 30)
    const second = customers.slice(30)
    const t0 = 1_000_000
    // Learns all 60 (two batches of unknown balances).
    await Effect.runPromise(batches.check(ORG, batchOver(first, t0)))
    await Effect.runPromise(batches.check(ORG, batchOver(second, t0 + 20_000)))
    store.forget()

    store.move(customers)
    await Effect.runPromise(batches.check(ORG, batchOver(first, t0 + 40_000)))
    // Its own 30, then all 60 it knows in one read: the other 30 are learnt before any batch names them.
    expect(store.reads.map((r) => r.length)).toEqual([30, 60])
    expect([...store.reads[1]!].sort()).toEqual(customers)
    expect(store.answered).toEqual([30, 30])
    store.forget()
    // The next batch over those 30: one read, which answers nothing (every version is the one known).
    await Effect.runPromise(batches.check(ORG, batchOver(second, t0 + 41_000)))
    expect(store.reads).toEqual([second])
    expect(store.answered).toEqual([0])
  })

  test("a relearn at most once per 10 s: a writer that keeps moving balances costs a batch its own read only", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const first = customers.slice(0, 30)
    const t0 = 1_000_000
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    store.forget()

    store.move(customers)
    await Effect.runPromise(batches.check(ORG, batchOver(first, t0 + 20_000)))
    expect(store.reads.map((r) => r.length)).toEqual([30, 60])
    store.forget()
    store.move(customers)
    await Effect.runPromise(batches.check(ORG, batchOver(first, t0 + 25_000)))
    expect(store.reads.map((r) => r.length)).toEqual([30])
    store.forget()
    store.move(customers)
    await Effect.runPromise(batches.check(ORG, batchOver(first, t0 + 31_000)))
    expect(store.reads.map((r) => r.length)).toEqual([30, 60])
  })

  test("a few of a batch's balances moved: only those are read again, nothing more", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const t0 = 1_000_000
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    store.forget()
    // 10 of 60 moved: fewer than the 20 (and the half) that set off a relearn.
    store.move(customers.slice(0, 10))
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0 + 20_000)))
    expect(store.reads.map((r) => r.length)).toEqual([60])
    expect(store.answered).toEqual([10])
  })

  test("a check whose read crosses this process's own write of its balances still counts as clean: after three, batches skip it", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const t0 = 1_000_000
    // Learnt (balances it knew nothing of say nothing of other writers), then moved by another writer: not trusted.
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    store.move(customers)
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    for (let i = 1; i <= 3; i++) {
      store.forget()
      // Another batch over the same balances commits while this check's read is on its way: the read answers every
      // balance at the version that write left, which this process already knows.
      store.whileReading(Effect.orDie(batches.run(ORG, batchOver(customers, t0 + i))))
      await Effect.runPromise(batches.check(ORG, batchOver(customers, t0 + i)))
      expect(store.reads.map((r) => r.length)).toEqual([60])
      expect(store.answered).toEqual([60])
    }
    store.forget()
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0 + 4)))
    expect(store.reads).toEqual([])
    // Trusted, a batch's check reads only the balances the process knows nothing of.
    const newcomers = ["cus_new_1", "cus_new_2"]
    store.add(newcomers)
    await Effect.runPromise(batches.check(ORG, batchOver([...customers.slice(0, 5), ...newcomers], t0 + 5)))
    expect(store.reads).toEqual([newcomers])
  })

  test("what the locked transaction left, learnt once it committed: the next batch over those balances reads nothing and its guard holds", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const t0 = 1_000_000
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    // The locked transaction of this process moves 10 balances, then says what it left; an older state said after
    // that (a write that committed before it) changes nothing.
    const moved = customers.slice(0, 10)
    store.move(moved)
    const row = { windowStart: 0, windowEnd: null, used: 0n, overage: 0n, bonus: 0n, addon: 0n }
    const left = (customerId: string, version: number) => ({ ...row, customerId, subjectId: SUBJECT, version })
    await Effect.runPromise(
      batches.learn(
        ORG,
        moved.map((c) => left(c, store.versions.get(c)!))
      )
    )
    await Effect.runPromise(batches.learn(ORG, [left(moved[0]!, 1)]))
    store.forget()
    const results = await Effect.runPromise(batches.run(ORG, batchOver(customers, t0 + 1)))
    expect(results._tag).toBe("Some")
    expect(store.reads).toEqual([])
    expect(store.guards).toEqual([true])
    // Not learnt, the same write fails the next batch's guard: it reads the balances again before its second attempt.
    store.move(moved)
    store.forget()
    await Effect.runPromise(batches.run(ORG, batchOver(customers, t0 + 2)))
    expect(store.guards).toEqual([false, true])
    expect(store.reads.length).toBe(1)
  })

  test("a batch decided over another's write on its way that reaches its rows first: it waits for that write, then passes its guard without a read", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const t0 = 1_000_000
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    store.forget()
    // The first batch's write is on its way; the second, over five of its balances, is decided over what it will
    // leave, and its statement reaches the rows first: its guard fails.
    const gate = store.holdNextWrite()
    const first = Effect.runFork(batches.run(ORG, batchOver(customers.slice(0, 10), t0 + 1)))
    await until(() => !store.holding())
    const second = Effect.runFork(batches.run(ORG, batchOver(customers.slice(5, 15), t0 + 2)))
    await until(() => store.guards.length > 0)
    expect(store.guards).toEqual([false])
    await Effect.runPromise(Deferred.succeed(gate, undefined))
    const [a, b] = await Effect.runPromise(Fiber.joinAll([first, second]))
    expect([a?._tag, b?._tag]).toEqual(["Some", "Some"])
    // Its second attempt waited for the first write and was decided over what it left: no read, and its guard held.
    expect(store.guards).toEqual([false, true, true])
    expect(store.reads).toEqual([])
    expect(customers.slice(0, 15).map((c) => store.versions.get(c))).toEqual([
      ...Array(5).fill(2),
      ...Array(5).fill(3),
      ...Array(5).fill(2)
    ])
  })

  test("a batch over balances the locked transaction is writing waits for it, then is decided over what it left", async () => {
    const store = makeStore()
    const batches = makeGuardedBatches(store.guarded)
    const t0 = 1_000_000
    await Effect.runPromise(batches.check(ORG, batchOver(customers, t0)))
    store.forget()
    // The locked transaction over the first ten balances, held on its way; it moves them and says what it left.
    const moved = customers.slice(0, 10)
    const held = Deferred.unsafeMake<void>(FiberId.none)
    const row = { windowStart: 0, windowEnd: null, used: 0n, overage: 0n, bonus: 0n, addon: 0n }
    const locked = Effect.runFork(
      batches.writingOver(
        ORG,
        moved.map((c) => balanceKey(c, SUBJECT))
      )(
        Deferred.await(held).pipe(
          Effect.tap(() => store.move(moved)),
          Effect.zipRight(
            Effect.suspend(() =>
              batches.learn(
                ORG,
                moved.map((c) => ({ ...row, customerId: c, subjectId: SUBJECT, version: store.versions.get(c)! }))
              )
            )
          )
        )
      )
    )
    const batch = Effect.runFork(batches.run(ORG, batchOver(customers.slice(5, 15), t0 + 1)))
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setTimeout(resolve, 0))
    expect(store.guards).toEqual([])
    await Effect.runPromise(Deferred.succeed(held, undefined))
    await Effect.runPromise(Fiber.join(locked))
    expect((await Effect.runPromise(Fiber.join(batch)))._tag).toBe("Some")
    // Decided over what the transaction left: one write, no read, its guard held.
    expect(store.guards).toEqual([true])
    expect(store.reads).toEqual([])
    expect(customers.slice(0, 15).map((c) => store.versions.get(c))).toEqual([
      ...Array(5).fill(2),
      ...Array(5).fill(3),
      ...Array(5).fill(2)
    ])
  })
})
