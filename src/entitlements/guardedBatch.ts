import { Effect, Option } from "effect"
import type { InvalidInput } from "../domain/errors.ts"
import { balanceKey, type BatchResult, decideDraws, planDraws } from "./batchDraws.ts"
import type { GuardedBatches, StoredBalance } from "./EntitlementsRepo.ts"
import type { Meter } from "./meter.ts"
import type { Resolution } from "./resolution.ts"

/** What a guarded batch decides over: a batch resolved outside any transaction, without idempotency keys. */
export interface GuardedInput {
  readonly resolutions: ReadonlyArray<Resolution | undefined>
  readonly meters: ReadonlyArray<Meter | InvalidInput | undefined>
  readonly eventIds: ReadonlyArray<string>
  /** Items answered before (refused by their timestamp or value). */
  readonly decided: ReadonlyArray<BatchResult | undefined>
  readonly now: number
}

/** Balances whose state this process last wrote, read or is writing (bounded as the service's other caches). */
const MAX_KNOWN = 10_000
/** Guarded writes of a batch whose versions moved before it falls back to its locked transaction. */
const ATTEMPTS = 2

/**
 * A batch written without holding its balances' row locks across round trips (PostgreSQL; docs/decisions.md,
 * "Batches and event time"). A batch's transaction held them from its lock to its commit: four round trips, the
 * service's decisions and whatever else the service was busy with in between. Two batches sharing a balance then ran
 * one after the other, and the service's own statements, replayed without it, ran at twice its rate.
 *
 * Here a batch is decided over the states this process knows of its balances: what its last write left (for one still
 * on its way, what that write will leave if it commits), or else what it reads now, without a lock. Then one statement
 * that commits by itself (`COMMIT_GUARDED`) locks every balance the batch decided over, in the one order every writer
 * locks in, and writes the batch only if each is still exactly the state it was decided over; otherwise nothing.
 * - A batch's answers hold when its statement commits, as if it had held the locks from the start; its accepted items
 *   are all recorded or none.
 * - A balance changed by anyone else (another process, a single track, a credit grant, an operator's SQL) fails the
 *   guard: the statement answers what its lock found, and the batch is decided once more over that; if a balance
 *   moved again, the locked transaction decides it.
 * - What this process knows only makes a batch fast or slow, never wrong: the guard compares the whole state, so even
 *   a state expected from a write that then failed cannot pass for another of the same version.
 *
 * A batch that needs a transaction for more than its balances (idempotency keys, a spend cap, a count's event, an
 * outbound event to write with it) takes the locked transaction (`run` answers none).
 */
export const makeGuardedBatches = (guarded: GuardedBatches) => {
  const known = new Map<string, StoredBalance>()
  const remember = (key: string, state: StoredBalance) => {
    known.delete(key)
    if (known.size >= MAX_KNOWN) known.delete(known.keys().next().value!)
    known.set(key, state)
  }
  const forgetAll = (org: string, keys: Iterable<string>) => {
    for (const key of keys) known.delete(`${org}\u0000${key}`)
  }

  /**
   * One guarded write of the batch: its results; or `moved`, a balance had moved (nothing written); or `locked`, it
   * needs the locked transaction (nothing written).
   */
  const attempt = (
    org: string,
    input: GuardedInput,
    plan: ReturnType<typeof planDraws>,
    decided: Array<BatchResult | undefined>
  ) =>
    Effect.gen(function* () {
      const results = [...decided]
      const unknown = [...plan.balances].filter(([key]) => !known.has(`${org}\u0000${key}`))
      const read = new Map<string, StoredBalance>()
      if (unknown.length > 0) {
        const rows = yield* guarded.readBalances(
          org,
          unknown.map(([, balance]) => balance),
          input.now
        )
        for (const row of rows) read.set(balanceKey(row.customerId, row.subjectId), row)
      }
      // From here to the statement's send, nothing yields: what `known` holds is what the batch decides over.
      const state = new Map<string, StoredBalance>()
      for (const key of plan.balances.keys()) {
        // A state a write of this process sent while this batch read is fresher than what it read.
        const stored = known.get(`${org}\u0000${key}`) ?? read.get(key)
        if (stored === undefined) return "moved" as const
        if (!known.has(`${org}\u0000${key}`)) remember(`${org}\u0000${key}`, stored)
        state.set(key, stored)
      }
      const base = new Map(state)
      const draws = decideDraws({
        meters: plan.meters,
        customerOf: (i) => (input.resolutions[i] as Extract<Resolution, { _tag: "Resolved" }>).resolved.customer.id,
        eventIds: input.eventIds,
        state,
        spent: new Map(),
        results
      })
      if (draws.notices.size > 0 || draws.denialNotices.length > 0) return "locked" as const
      const written = [...draws.events].map(([key, events]) => {
        const { customerId, subjectId } = plan.balances.get(key)!
        return {
          organizationId: org,
          customerId,
          subjectId,
          expectedVersion: base.get(key)!.version,
          base: base.get(key)!,
          next: state.get(key)!,
          events,
          now: input.now
        }
      })
      const checked = [...plan.balances].flatMap(([key, { customerId, subjectId }]) =>
        draws.events.has(key) ? [] : [{ ...base.get(key)!, customerId, subjectId }]
      )
      if (written.length === 0 && checked.length === 0) return results
      // What the write will leave, for the batches decided while it is on its way (their guards expect it).
      const expected = written.map((w) => {
        const left = { ...w.next, version: w.expectedVersion + 1 }
        remember(`${org}\u0000${balanceKey(w.customerId, w.subjectId)}`, left)
        return left
      })
      const outcome = yield* guarded
        .commit(org, written, checked)
        .pipe(
          Effect.onExit((exit) => Effect.sync(() => exit._tag === "Failure" && forgetAll(org, plan.balances.keys())))
        )
      if (outcome.written) return results
      // It wrote nothing: a balance that moved is as its lock found it; another is as it was before (unless a batch
      // decided since expects what this one would have left: it will fail too, and the balance is read again).
      written.forEach((w, i) => {
        const key = `${org}\u0000${balanceKey(w.customerId, w.subjectId)}`
        if (known.get(key) === expected[i]) remember(key, base.get(balanceKey(w.customerId, w.subjectId))!)
        else known.delete(key)
      })
      for (const [customerId, subjectId, found] of outcome.moved) {
        const key = `${org}\u0000${balanceKey(customerId, subjectId)}`
        if (found === null) known.delete(key)
        else remember(key, found)
      }
      return "moved" as const
    })

  return {
    /** The batch's results, or none: it is for the locked transaction (it needs one, or its balances kept moving). */
    run: (org: string, input: GuardedInput): Effect.Effect<Option.Option<ReadonlyArray<BatchResult>>> =>
      Effect.gen(function* () {
        const decided = [...input.decided]
        const plan = planDraws(input.resolutions, input.meters, decided, new Set())
        if (plan.locked) return Option.none()
        for (let i = 0; i < ATTEMPTS; i++) {
          const results = yield* attempt(org, input, plan, decided)
          if (results === "locked") return Option.none()
          if (results !== "moved") return Option.some(results.map((r) => r!))
        }
        return Option.none()
      }),
    /** Balances written by someone else in this process (a batch's locked transaction): read them again. */
    forget: forgetAll
  }
}
