/**
 * A batch of tracks from its request to its answer: prepared (./batchPrepare.ts), then queued on its organization's
 * lane, where concurrent batches merge into one transaction (./batchCommit.ts); prepared again when a customer it was
 * to create was created meanwhile, interrupted when its request expired before its commit.
 */
import { Effect } from "effect"
import { CommitExpired, RequestCommitGate } from "../platform/commitGate.ts"
import { type Batcher, makeBatcher } from "./Batcher.ts"
import type { makeTransact } from "./batchCommit.ts"
import type { BatchResult } from "./batchDraws.ts"
import type { makePrepareBatch } from "./batchPrepare.ts"
import type { EngineDeps } from "./engineDeps.ts"
import { CreationRaced } from "./newCustomers.ts"
import { type BatchItem, type LaneOutcome, mergeBatches, type PreparedBatch, splitResults } from "./preparedBatch.ts"

/** Batches of one transaction at most: a transaction's row locks and its answers wait for all of them. */
const BATCHES_PER_TRANSACTION = 8
/** Preparations of a batch whose new customers other requests keep creating first, before it gives up. */
const CREATION_ATTEMPTS = 3
/**
 * SQLite: an idle batch lane first waits this many turns of the event loop. Its statements block the one thread, so
 * the batches that arrived meanwhile are still reading their bodies when a transaction ends; without the wait each
 * ran alone and paid its own commit and sync (docs/decisions.md, "Batches and event time"). Six beat three by 3–8% on
 * every line of bench/batch.ts once batches were guarded (the transaction got shorter, so fewer batches had arrived
 * by its end); twelve was no better.
 */
const SQLITE_BATCH_GATHER_TURNS = 6

export const makeBatchLanes = (
  { sql }: EngineDeps,
  prepareBatch: ReturnType<typeof makePrepareBatch>,
  transact: ReturnType<typeof makeTransact>
) => {
  /**
   * A batch decided and recorded. Prepared again if a customer it was to create was created meanwhile by another
   * request (its transaction rolled back: `CreationRaced`); interrupted if its request was answered 503 before its
   * commit could begin (nothing of it was written).
   */
  const evaluateBatch = (org: string, items: ReadonlyArray<BatchItem>): Effect.Effect<ReadonlyArray<BatchResult>> =>
    Effect.flatMap(RequestCommitGate, (gate) => {
      const attempt = (left: number): Effect.Effect<ReadonlyArray<BatchResult>> =>
        Effect.flatMap(prepareBatch(org, items, gate), (prepared) =>
          Effect.flatMap(batchLane(org).submit(prepared), (outcome) =>
            outcome instanceof CreationRaced
              ? left > 0
                ? attempt(left - 1)
                : Effect.dieMessage("A batch's new customers kept being created by other requests")
              : outcome instanceof CommitExpired
                ? Effect.interrupt
                : Effect.succeed(outcome)
          )
        )
      return attempt(CREATION_ATTEMPTS)
    })

  /**
   * Concurrent batches of an organization share a transaction (docs/decisions.md, "Batches and event time"): what
   * arrives while a lane's transaction runs waits, and goes into the next one as one batch of their items in
   * arrival order. A key two of them use is then a key repeated in one batch: an item whose body is not the key's
   * request (the stored one, else the first item's) is a 409, and a later one with it repeats the earlier's answer,
   * which is what it would have been had the later batch waited for the earlier.
   * The row locks of one transaction are taken in one order, so batches merged into it never wait on each other's
   * locks, and each pays a share of its fixed costs (claims, locks, the commit and its sync). PostgreSQL: two lanes
   * (the database works on one while the service decides the other; one lane lost 7–15%); SQLite: one, gathering
   * for a few turns (`SQLITE_BATCH_GATHER_TURNS`). A lane per organization that has sent a batch: merged
   * transactions never mix organizations.
   */
  const batchLanes = new Map<string, Batcher<PreparedBatch, LaneOutcome>>()
  const outcome = (effect: Effect.Effect<ReadonlyArray<BatchResult>, CreationRaced | CommitExpired>) =>
    Effect.catchAll(effect, (e): Effect.Effect<LaneOutcome> => Effect.succeed(e))
  const batchLane = (org: string) => {
    let lane = batchLanes.get(org)
    if (lane === undefined) {
      lane = makeBatcher<PreparedBatch, LaneOutcome>({
        lanes: sql.onDialectOrElse({ pg: () => 2, orElse: () => 1 }),
        maxBatch: BATCHES_PER_TRANSACTION,
        gather: sql.onDialectOrElse({ pg: () => false, orElse: () => SQLITE_BATCH_GATHER_TURNS }),
        // Merged batches that must not commit together (one raced or expired): each on its own.
        run: (batches) =>
          batches.length === 1
            ? Effect.map(outcome(transact(org, batches[0]!)), (o) => [o])
            : Effect.flatMap(outcome(transact(org, mergeBatches(batches))), (o) =>
                Array.isArray(o)
                  ? Effect.succeed(splitResults(batches, o))
                  : Effect.forEach(batches, (b) => outcome(transact(org, b)))
              )
      })
      batchLanes.set(org, lane)
    }
    return lane
  }

  return evaluateBatch
}
