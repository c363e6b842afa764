import { Deferred, Effect, FiberId, Option } from "effect"
import type { InvalidInput } from "../domain/errors.ts"
import { type CommitGate, type CommitExpired, gatedCommit } from "../platform/commitGate.ts"
import {
  balanceKey,
  type BatchResult,
  decideDraws,
  type NamedBalances,
  type PlannedDraws,
  planDraws
} from "./batchDraws.ts"
import type { GuardedBatches, KeyedBalance, StoredBalance } from "./records.ts"
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
  /** Its requests' commit gates: no write once one of them has been answered 503 (src/platform/commitGate.ts). */
  readonly gates: ReadonlyArray<CommitGate>
}

type NamedBalance = NamedBalances extends Map<string, infer B> ? B : never

/** A balance's key among everything this process knows (`known`, `writing`): its organization's and its own. */
const knownKey = (org: string, key: string) => `${org}\u0000${key}`

/** A guarded write on its way: what it will leave of a balance, and done once it has ended. */
interface InFlight {
  readonly left: StoredBalance
  readonly done: Deferred.Deferred<void>
}

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
 * - A batch decided over another lane's write on its way may reach the rows first and fail too: it waits for the
 *   writes over its balances to end, and is decided once more over what they left (no read), its statement sent only
 *   once the writes it was decided over have ended. The batch's locked transaction says what it left as well
 *   (`learn`), and a batch over its balances waits for it (`writingOver`).
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
  /**
   * By `org\0customer\0subject`: the guarded writes still on their way over the balance, in the order sent, each with
   * what it will leave and `done` once it has ended (and what it left is known). Batches are decided over the last.
   */
  const writing = new Map<string, Array<InFlight>>()
  const lastWrite = (key: string) => writing.get(key)?.at(-1)
  const sending = (key: string, write: InFlight) => {
    const writes = writing.get(key)
    if (writes === undefined) writing.set(key, [write])
    else writes.push(write)
  }
  /** A write ended: the balance is decided over the one sent before it again, if that one is still on its way. */
  const ended = (key: string, write: InFlight) => {
    const writes = writing.get(key)
    const at = writes?.indexOf(write) ?? -1
    if (at < 0) return
    writes!.splice(at, 1)
    if (writes!.length === 0) writing.delete(key)
  }
  /** By `org\0customer\0subject`: the batch's locked transaction over the balance still on its way, if any. */
  const locking = new Map<string, Deferred.Deferred<void>>()
  /**
   * By organization: how many checks in a row found nothing changed. From `TRUSTED_AFTER` on, batches skip the check
   * (their guards still hold them to the truth) until a guard fails that no write of this process overtook.
   */
  const trusted = new Map<string, number>()
  /** The writes on their way over the balances named: the locked transaction's, and (`guarded`) the last guarded one's. */
  const writesOver = (org: string, keys: Iterable<string>, guarded: boolean) => {
    const waits = new Set<Deferred.Deferred<void>>()
    for (const key of keys) {
      const last = guarded ? lastWrite(knownKey(org, key)) : undefined
      if (last !== undefined) waits.add(last.done)
      const locked = locking.get(knownKey(org, key))
      if (locked !== undefined) waits.add(locked)
    }
    return waits
  }
  const endOf = (writes: Iterable<Deferred.Deferred<void>>) => Effect.forEach(writes, Deferred.await, { discard: true })
  /**
   * The writes still on their way over the balances named, ended. A batch whose guard failed waits for them before its
   * second attempt: decided over another lane's write on its way, its statement may reach the rows first and fail; read
   * again at once, it found them unwritten still, failed again and took the locked transaction (bench/batch.ts).
   */
  const settled = (org: string, keys: Iterable<string>) => endOf(writesOver(org, keys, true))
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
  const attempt = (
    org: string,
    input: GuardedInput,
    plan: PlannedDraws,
    decided: Array<BatchResult | undefined>,
    again: boolean
  ) =>
    Effect.gen(function* () {
      const results = [...decided]
      const id = (key: string) => knownKey(org, key)
      // A locked transaction over one of its balances leaves states nobody knows yet: decided before it ends, the
      // batch would fail its guard.
      const locked = writesOver(org, plan.balances.keys(), false)
      if (locked.size > 0) yield* endOf(locked)
      // Balances known since the batch's check (`check`) need no read: the guard tells if one moved meanwhile.
      const unknown = [...plan.balances].filter(([key]) => !writing.has(id(key)) && !known.has(id(key)))
      if (unknown.length > 0) yield* read(org, unknown, input.now, false)
      // From here to the statement's send nothing yields: the states decided over are these.
      const base = new Map<string, StoredBalance>()
      // The writes still on their way whose states this batch is decided over.
      const after = new Set<Deferred.Deferred<void>>()
      for (const key of plan.balances.keys()) {
        const last = lastWrite(id(key))
        if (last !== undefined) after.add(last.done)
        const stored = last?.left ?? known.get(id(key))
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
      const done = Deferred.unsafeMake<void>(FiberId.none)
      const leaving = written.map((w) => {
        const key = id(balanceKey(w.customerId, w.subjectId))
        const write = { left: { ...w.next, version: w.expectedVersion + 1 }, done }
        sending(key, write)
        return [key, write] as const
      })
      // A second attempt is sent only once the writes it was decided over have ended: sent at once, it could reach
      // its rows first again.
      const commit = gatedCommit(input.gates, guarded.commit(org, written, checked))
      const write = again ? Effect.zipRight(endOf(after), commit) : commit
      // A batch decided over writes on their way that fails its guard was most likely overtaken by one of them (their
      // statements run side by side): what the process knows is not put in doubt. Otherwise another writer moved a
      // balance, and what it knows of the batch's balances is read again, and checked again before each batch.
      const overtaken = after.size > 0
      const wrote = yield* Effect.onExit(write, (exit) =>
        Effect.suspend(() => {
          const committed = exit._tag === "Success" && exit.value
          const failed = exit._tag === "Success" && !exit.value
          for (const [key, write] of leaving) {
            // What it left is known (unless a later write's answer came first: two lanes' writes of a balance may
            // answer out of order); or, if it wrote nothing (or who knows what), the balance is read again.
            if (committed) {
              if ((known.get(key)?.version ?? -1) < write.left.version) remember(key, write.left)
            } else if (!(failed && overtaken)) known.delete(key)
            ended(key, write)
          }
          if (failed && !overtaken) for (const c of checked) known.delete(id(balanceKey(c.customerId, c.subjectId)))
          return Deferred.succeed(done, undefined)
        })
      )
      if (wrote) return results
      if (!overtaken) trusted.delete(org)
      return "moved" as const
    })

  return {
    /**
     * Balances a write of this process outside the guarded path left (the batch's locked transaction), once it has
     * committed: known, as a guarded write's are. Unknown to this cache they were stale, so the next batches over
     * them failed their guards, fell back to the locked transaction in turn and left more stale states behind: over
     * 10,000 balances in batches of 100 on PostgreSQL, ~6% of batches took the locked transaction and most were
     * checked by a read (bench/batch.ts, docs/benchmarks.md). A state older than the one known, or of a balance a
     * guarded write is still writing, is left: what this process knows makes a batch fast or slow, never wrong.
     */
    learn: (org: string, balances: ReadonlyArray<KeyedBalance>): Effect.Effect<void> =>
      Effect.sync(() => {
        for (const b of balances) {
          const key = knownKey(org, balanceKey(b.customerId, b.subjectId))
          const kept = known.get(key)
          if (writing.has(key) || (kept !== undefined && b.version < kept.version)) continue
          remember(key, b)
        }
      }),
    /**
     * `write` (the batch's locked transaction over the balances named, by `balanceKey`) as a write on its way over
     * them until it ends: a guarded batch over them whose guard fails waits for it before trying again.
     */
    writingOver:
      (org: string, keys: Iterable<string>) =>
      <A, E, R>(write: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
        Effect.suspend(() => {
          const done = Deferred.unsafeMake<void>(FiberId.none)
          const held = [...keys].map((key) => knownKey(org, key))
          for (const key of held) locking.set(key, done)
          const end = Effect.suspend(() => {
            for (const key of held) if (locking.get(key) === done) locking.delete(key)
            return Deferred.succeed(done, undefined)
          })
          return Effect.ensuring(write, end)
        }),
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
    run: (org: string, input: GuardedInput): Effect.Effect<Option.Option<ReadonlyArray<BatchResult>>, CommitExpired> =>
      Effect.gen(function* () {
        const decided = [...input.decided]
        const plan = planDraws(input.resolutions, input.meters, decided, new Set())
        if (plan.locked) return Option.none()
        for (let i = 0; i < ATTEMPTS; i++) {
          const results = yield* attempt(org, input, plan, decided, i > 0)
          if (results === "locked") return Option.none()
          if (results !== "moved") return Option.some(results.map((r) => r!))
          yield* settled(org, plan.balances.keys())
        }
        return Option.none()
      })
  }
}
