import { Effect, Option } from "effect"
import type { InvalidInput } from "../domain/errors.ts"
import {
  balanceKey,
  type BatchResult,
  decideDraws,
  type NamedBalances,
  type PlannedDraws,
  planDraws
} from "./batchDraws.ts"
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

type NamedBalance = NamedBalances extends Map<string, infer B> ? B : never

/** A balance's key among everything this process knows (`known`, `writing`): its organization's and its own. */
const knownKey = (org: string, key: string) => `${org}\u0000${key}`

/** Guarded writes of a batch whose balances moved before it falls back to its locked transaction. */
const ATTEMPTS = 2
/** Balances whose state this process last wrote or read (bounded as the service's other caches). */
const MAX_KNOWN = 10_000
/**
 * Checks in a row that found no balance moved by another writer, after which an organization's batches skip the
 * check (measured: the check's read cost ~17% of the rate over 10,000 balances in batches of 100, when it found
 * nothing).
 */
const TRUSTED_AFTER = 3
/** A check that found at least this many, and half, of its balances moved sets off a check of all (`relearn`). */
const RELEARN_MIN = 20
const RELEARN_MS = 10_000
const RELEARN_CHUNK = 1_000

/**
 * A batch written without holding its balances' row locks across round trips (docs/decisions.md, "Batches and event
 * time"). On PostgreSQL a batch's transaction held them from its lock to its commit: four round trips, the service's
 * decisions and whatever else the service was busy with in between. Two batches sharing a balance then ran one after
 * the other, and the service's own statements, replayed without it, ran at twice its rate.
 *
 * Here a batch is decided over the states this process knows of its balances: what it last wrote or read of each,
 * checked before the batch queues for its lane by one read that answers only the balances whose version moved
 * (skipped while such checks keep finding nothing). Over a balance that a write of this process is still writing, it
 * is decided over what that write will leave, so the other lane need not wait for it. Then one write (PostgreSQL: one
 * statement that commits by itself, `COMMIT_GUARDED`; SQLite: one short transaction) locks every balance the batch
 * decided over, in the one order every writer locks in, and writes the batch only if each is still exactly the state
 * it was decided over; otherwise nothing.
 * - A batch's answers hold when its write commits, as if it had held the locks from the start; its accepted items are
 *   all recorded or none.
 * - A balance changed by anyone else (another process, a single track, a credit grant, an operator's SQL) fails the
 *   guard: the batch is read and decided once more, and if a balance moved again, the locked transaction decides it.
 * - The guard compares the whole state, not only the version: a state expected from a write that then failed cannot
 *   pass for another that some other writer gave the same version. What this process knows makes a batch fast or
 *   slow, never wrong.
 *
 * A batch that needs a transaction for more than its balances (idempotency keys, a spend cap, a count's event, an
 * outbound event to write with it) takes the locked transaction (`run` answers none).
 */
export const makeGuardedBatches = (guarded: GuardedBatches) => {
  /** By `org\0customer\0subject`: the state each balance had when this process last wrote or read it. */
  const known = new Map<string, StoredBalance>()
  /** What the writes still on their way will leave: the last one sent of each balance. */
  const writing = new Map<string, StoredBalance>()
  /**
   * By organization: how many checks in a row found nothing changed. From `TRUSTED_AFTER` on, batches skip the check
   * (their guards still hold them to the truth) until a guard fails.
   */
  const trusted = new Map<string, number>()
  const remember = (key: string, state: StoredBalance) => {
    known.delete(key)
    if (known.size >= MAX_KNOWN) known.delete(known.keys().next().value!)
    known.set(key, state)
  }

  /**
   * Reads the balances named whose version is not the one known (`check`: all that are not being written; else the
   * unknown ones), and keeps what it read unless a write of this process sent meanwhile knows better. Answers how
   * many it knew at an older version: what another writer moved. A balance it knew nothing of, or found at the
   * version its own write left while the read was on its way (on PostgreSQL, most checks of concurrent batches cross
   * such a write), says nothing of other writers, and is not counted against `trusted`.
   */
  const read = (org: string, balances: ReadonlyArray<[string, NamedBalance]>, now: number, check: boolean) =>
    Effect.flatMap(
      guarded.readChanged(
        org,
        balances.map(([key, balance]) => ({
          ...balance,
          version: check ? (known.get(knownKey(org, key))?.version ?? null) : null
        })),
        now
      ),
      (changed) =>
        Effect.sync(() => {
          let moved = 0
          for (const row of changed) {
            const key = knownKey(org, balanceKey(row.customerId, row.subjectId))
            const kept = known.get(key)
            if (writing.has(key) || (kept !== undefined && row.version < kept.version)) continue
            if (kept !== undefined && row.version > kept.version) moved += 1
            remember(key, row)
          }
          return moved
        })
    )

  /** By organization: when all its balances known were last checked at once (`relearn`). */
  const relearned = new Map<string, number>()
  /**
   * Every balance this process knows of the organization checked at once, `RELEARN_CHUNK` a read: when a check finds
   * most of its batch's balances changed, another writer changed many of them, and batch by batch relearning 10,000
   * balances takes ~700 batches of 100. At most once per `RELEARN_MS`, so a writer that keeps changing them costs a
   * few reads a minute, not a read of everything per batch.
   */
  const relearn = (org: string, now: number) => {
    const prefix = knownKey(org, "")
    const balances: Array<[string, NamedBalance]> = []
    for (const id of known.keys()) {
      if (!id.startsWith(prefix) || writing.has(id)) continue
      const key = id.slice(prefix.length)
      const [customerId, subjectId] = key.split("\u0000") as [string, string]
      // Known, so never created here: `init` is only a missing row's.
      balances.push([key, { customerId, subjectId, init: { windowStart: 0, windowEnd: null } }])
    }
    const chunks: Array<ReadonlyArray<[string, NamedBalance]>> = []
    for (let i = 0; i < balances.length; i += RELEARN_CHUNK) chunks.push(balances.slice(i, i + RELEARN_CHUNK))
    return Effect.forEach(chunks, (chunk) => read(org, chunk, now, true), { discard: true })
  }

  /**
   * One guarded write of the batch: its results; or `moved`, a balance had moved (nothing written); or `locked`, it
   * needs the locked transaction (nothing written).
   */
  const attempt = (org: string, input: GuardedInput, plan: PlannedDraws, decided: Array<BatchResult | undefined>) =>
    Effect.gen(function* () {
      const results = [...decided]
      const id = (key: string) => knownKey(org, key)
      // Balances known since the batch's check (`check`) need no read: the guard tells if one moved meanwhile.
      const unknown = [...plan.balances].filter(([key]) => !writing.has(id(key)) && !known.has(id(key)))
      if (unknown.length > 0) yield* read(org, unknown, input.now, false)
      // From here to the statement's send nothing yields: the states decided over are these.
      const base = new Map<string, StoredBalance>()
      for (const key of plan.balances.keys()) {
        const stored = writing.get(id(key)) ?? known.get(id(key))
        if (stored === undefined) return "moved" as const
        base.set(key, stored)
      }
      const state = new Map(base)
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
      const sent = written.map((w) => {
        const key = id(balanceKey(w.customerId, w.subjectId))
        const left = { ...w.next, version: w.expectedVersion + 1 }
        writing.set(key, left)
        return [key, left] as const
      })
      const wrote = yield* Effect.onExit(guarded.commit(org, written, checked), (exit) =>
        Effect.sync(() => {
          const committed = exit._tag === "Success" && exit.value
          for (const [key, left] of sent) {
            // What it left is known; or, if it wrote nothing (or who knows what), the balance is read again.
            if (committed) remember(key, left)
            else known.delete(key)
            if (writing.get(key) === left) writing.delete(key)
          }
          // A balance only checked that failed the guard is read again too.
          if (exit._tag === "Success" && !exit.value)
            for (const c of checked) known.delete(id(balanceKey(c.customerId, c.subjectId)))
        })
      )
      if (wrote) return results
      // What this process knows of the organization's balances proved stale: checked again before each batch.
      trusted.delete(org)
      return "moved" as const
    })

  return {
    /**
     * Before a batch queues for its lane: what this process knows of its balances checked against the database
     * (one read, answering only those whose version is not the one known), so that its lane decides without a read.
     * Outside the lane, while other batches are written. Once checks keep finding nothing moved (`TRUSTED_AFTER`),
     * only the balances it knows nothing of are read.
     */
    check: (org: string, input: GuardedInput): Effect.Effect<void> =>
      Effect.suspend(() => {
        const plan = planDraws(input.resolutions, input.meters, [...input.decided], new Set())
        if (plan.locked) return Effect.void
        const idle = [...plan.balances].filter(([key]) => !writing.has(knownKey(org, key)))
        // Trusted: only the balances this process knows nothing of, read here rather than in its lane (a process that
        // has just started learns its balances outside the lane, however soon its checks stop).
        const trust = trusted.get(org) ?? 0
        const asked = trust < TRUSTED_AFTER ? idle : idle.filter(([key]) => !known.has(knownKey(org, key)))
        if (asked.length === 0) return Effect.void
        return Effect.flatMap(read(org, asked, input.now, true), (moved) => {
          trusted.set(org, moved === 0 ? trust + 1 : 0)
          const stale = moved >= RELEARN_MIN && moved * 2 >= asked.length
          if (!stale || input.now - (relearned.get(org) ?? -Infinity) < RELEARN_MS) return Effect.void
          relearned.set(org, input.now)
          return relearn(org, input.now)
        })
      }),
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
      })
  }
}
