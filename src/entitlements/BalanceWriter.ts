import { type Cause, Deferred, Effect, Option } from "effect"
import { nextTurn, outsideTransaction } from "./Batcher.ts"
import type { EntitlementsRepoShape } from "./EntitlementsRepo.ts"
import type { BalanceRow, StoredBalance, UsageEventRow } from "./records.ts"

/**
 * Recording draws on balances without holding a row lock across client round trips, and committing many at once
 * (docs/decisions.md, "Performance").
 *
 * A draw is a pure decision over the balance as stored. Draws queue in one of a few lanes (a balance always in the
 * same lane); each lane writes one batch at a time. Everything that arrives while a lane's batch is being written
 * waits and forms its next batch: the draws of each balance in it are decided in arrival order over the same state,
 * and the whole batch is written in one database step (one statement on PostgreSQL, one transaction on SQLite):
 * each balance's new state only if its `version` is still the one its draws were decided on, with all their events
 * and rollups. Answers are given only after that step committed, so an acknowledged event is durable. A balance
 * whose version moved (another process, a credit grant, an idempotent request under its lock) wrote nothing: it is
 * read again and its draws are decided again over it, in the next step.
 */
export interface Decision<A> {
  readonly answer: A
  /**
   * The balance after the draw and its event; `null` when the draw records nothing (a denial). `notices`: writes that
   * commit with it or not at all (the outbound events the draw causes, such as a usage threshold it crosses).
   */
  readonly write: {
    readonly next: BalanceRow
    readonly event: UsageEventRow
    readonly notices?: ReadonlyArray<Effect.Effect<unknown>>
  } | null
}

export interface BalanceKey {
  readonly organizationId: string
  readonly customerId: string
  readonly subjectId: string
}

export interface BalanceWriter {
  /**
   * Decides `decide` over the freshest state this process knows of the balance (at least `seen`, what the request
   * read; `null` = no row) and records it. Linearizable: the answer holds at the moment its write committed, or, for
   * a denial that wrote nothing, at a moment within the request when the balance was in the state it was decided on.
   */
  readonly draw: <A>(
    key: BalanceKey,
    seen: StoredBalance | null,
    decide: (stored: StoredBalance | null) => Decision<A>
  ) => Effect.Effect<A>
}

export interface BalanceWriterOptions {
  /** Batches written at the same time (each on its own connection); SQLite's one connection wants 1. */
  readonly lanes: number
  /**
   * An idle lane waits one turn of the event loop before its first step (`nextTurn`), so that the draws that arrived
   * together share it. On SQLite, whose steps run on this thread and end before anyone else can join, without it every
   * draw would be a transaction and a commit of its own.
   */
  readonly gather?: boolean
}

interface Pending {
  readonly key: BalanceKey
  readonly id: string
  readonly seen: StoredBalance | null
  readonly decide: (stored: StoredBalance | null) => Decision<unknown>
  readonly done: Deferred.Deferred<unknown>
}

/** The draws of one balance in a batch, and what deciding them over `base` gave. */
interface Group {
  readonly key: BalanceKey
  readonly id: string
  readonly pending: Array<Pending>
  base: StoredBalance | null
  answers: Array<unknown>
  next: BalanceRow | null
  events: Array<UsageEventRow>
  notices: Array<Effect.Effect<unknown>>
}

/** Draws decided and written together at most (bounds a step's size and the first answer's wait). */
const MAX_BATCH = 256
/** Steps in which a balance may find its version moved before its draws give up (a defect, 500). */
const MAX_ATTEMPTS = 100
/** Balances whose last written state this process remembers (spares a failed guard after its own writes). */
const MAX_KNOWN = 10_000

const freshest = (candidates: ReadonlyArray<StoredBalance | null | undefined>): StoredBalance | null => {
  let best: StoredBalance | null = null
  for (const c of candidates) if (c != null && (best === null || c.version > best.version)) best = c
  return best
}

const hash = (text: string) => {
  let h = 0
  for (let i = 0; i < text.length; i++) h = (Math.imul(h, 31) + text.charCodeAt(i)) | 0
  return h >>> 0
}

export const makeBalanceWriter = (
  repo: Pick<EntitlementsRepoShape, "commitBalances" | "readBalance">,
  options: BalanceWriterOptions
): BalanceWriter => {
  const lanes = new Map<number, Array<Pending>>()
  const known = new Map<string, StoredBalance>()
  const remember = (id: string, state: StoredBalance) => {
    known.delete(id)
    if (known.size >= MAX_KNOWN) known.delete(known.keys().next().value!)
    known.set(id, state)
  }

  const decideGroup = (group: Group) => {
    group.answers = []
    group.events = []
    group.notices = []
    group.next = null
    let state = group.base
    for (const pending of group.pending) {
      const decision = pending.decide(state)
      group.answers.push(decision.answer)
      if (decision.write !== null) {
        group.next = decision.write.next
        state = { ...decision.write.next, version: group.base?.version ?? 0 }
        group.events.push(decision.write.event)
        if (decision.write.notices !== undefined) group.notices.push(...decision.write.notices)
      }
    }
  }

  const answer = (group: Group) =>
    Effect.forEach(group.pending, (pending, i) => Deferred.succeed(pending.done, group.answers[i]), { discard: true })

  /** Decides and writes a batch; balances whose version moved are read again and retried in the next step. */
  const commit = (batch: ReadonlyArray<Pending>) =>
    Effect.gen(function* () {
      const byId = new Map<string, Group>()
      for (const pending of batch) {
        const group = byId.get(pending.id)
        if (group !== undefined) group.pending.push(pending)
        else {
          byId.set(pending.id, {
            key: pending.key,
            id: pending.id,
            pending: [pending],
            base: null,
            answers: [],
            next: null,
            events: [],
            notices: []
          })
        }
      }
      let todo = [...byId.values()]
      for (const group of todo) group.base = freshest([known.get(group.id), ...group.pending.map((p) => p.seen)])
      for (let attempt = 1; ; attempt++) {
        const writing: Array<Group> = []
        for (const group of todo) {
          decideGroup(group)
          // Nothing to write (every draw denied): decided over a state the balance had during each request.
          if (group.next === null) yield* answer(group)
          else writing.push(group)
        }
        if (writing.length === 0) return
        // In key order, as a batch locks its balances: a step and a batch never wait on each other in a cycle.
        writing.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        const written = yield* repo.commitBalances(
          writing.map((group) => ({
            organizationId: group.key.organizationId,
            customerId: group.key.customerId,
            subjectId: group.key.subjectId,
            expectedVersion: group.base === null ? null : group.base.version,
            next: group.next!,
            events: group.events,
            notices: group.notices,
            now: group.events[group.events.length - 1]!.createdAt
          }))
        )
        const moved: Array<Group> = []
        for (let i = 0; i < writing.length; i++) {
          const group = writing[i]!
          const version = written[i]!
          if (Option.isSome(version)) {
            remember(group.id, { ...group.next!, version: version.value })
            yield* answer(group)
          } else {
            moved.push(group)
          }
        }
        if (moved.length === 0) return
        if (attempt >= MAX_ATTEMPTS) return yield* Effect.dieMessage("A balance kept changing under its writer")
        for (const group of moved) {
          group.base = Option.getOrNull(
            yield* repo.readBalance(group.key.organizationId, group.key.customerId, group.key.subjectId)
          )
        }
        todo = moved
      }
    })

  /** One batch's step; whoever it has not answered fails with it (their draws were not written). */
  const step = (batch: Array<Pending>) =>
    Effect.flatMap(Effect.exit(commit(batch)), (exit) =>
      exit._tag === "Failure"
        ? Effect.forEach(batch, (pending) => Deferred.failCause(pending.done, exit.cause as Cause.Cause<never>), {
            discard: true
          })
        : Effect.void
    )

  /** Runs the lane's batches until nobody waits; then the lane closes (synchronously after its last check). */
  const drain = (lane: number, queue: Array<Pending>): Effect.Effect<void> => {
    let batch: Array<Pending> = []
    return Effect.gen(function* () {
      while (queue.length > 0) {
        batch = queue.splice(0, MAX_BATCH)
        yield* step(batch)
      }
      lanes.delete(lane)
    }).pipe(
      // Interrupted (the runtime shutting down): whoever still waits fails instead of waiting forever.
      Effect.onInterrupt(() =>
        Effect.suspend(() => {
          lanes.delete(lane)
          return Effect.forEach([...batch, ...queue.splice(0)], (pending) => Deferred.interrupt(pending.done), {
            discard: true
          })
        })
      )
    )
  }

  return {
    draw: <A>(key: BalanceKey, seen: StoredBalance | null, decide: (stored: StoredBalance | null) => Decision<A>) =>
      // Uninterruptible but for the wait: a lane, once opened, is always written and closed.
      // Combinators, not a generator: every recording draw passes here (see `Authenticator`).
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Deferred.make<unknown>(), (done) => {
          const id = `${key.organizationId}\u0000${key.customerId}\u0000${key.subjectId}`
          const lane = options.lanes <= 1 ? 0 : hash(id) % options.lanes
          const pending: Pending = { key, id, seen, decide, done }
          const answer = restore(Deferred.await(done)) as Effect.Effect<A>
          const queue = lanes.get(lane)
          if (queue !== undefined) {
            queue.push(pending)
            return answer
          }
          // The lane was idle: this request writes its own draw, in its own fiber (a fiber per request was measured to
          // cost more than the write). Whatever arrives meanwhile is written by a daemon, batch after batch, so this
          // request answers as soon as its own step has committed. Outside any transaction the caller might be in: a
          // step is its own statement (or transaction).
          const fresh: Array<Pending> = []
          lanes.set(lane, fresh)
          const own =
            options.gather === true
              ? Effect.suspend(() => {
                  fresh.push(pending)
                  return Effect.zipRight(
                    nextTurn,
                    Effect.suspend(() => outsideTransaction(step(fresh.splice(0, MAX_BATCH))))
                  )
                })
              : outsideTransaction(step([pending]))
          const handOver = Effect.suspend(() => {
            if (fresh.length > 0) return Effect.asVoid(Effect.forkDaemon(outsideTransaction(drain(lane, fresh))))
            lanes.delete(lane)
            return Effect.void
          })
          return Effect.zipRight(Effect.zipRight(own, handOver), answer)
        })
      )
  }
}
