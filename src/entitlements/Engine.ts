/**
 * The entitlement engine's service: every check and track, single (./decisions.ts over ./reads.ts) or in batches
 * (./batchLanes.ts: ./batchPrepare.ts, ./batchCommit.ts, ./batchLocked.ts, ./batchCustomers.ts). The Layer takes the
 * services once (./engineDeps.ts) and composes the parts.
 */
import { type Either, Context, Effect, Layer } from "effect"
import type { EntitlementState } from "../api/entitlements.ts"
import type { Conflict, InvalidInput } from "../domain/errors.ts"
import { makeTransact } from "./batchCommit.ts"
import { makeBatchCustomers } from "./batchCustomers.ts"
import { makeBatchLanes } from "./batchLanes.ts"
import { makeTransactLocked } from "./batchLocked.ts"
import { makePrepareBatch } from "./batchPrepare.ts"
import { makeDecisions } from "./decisions.ts"
import { engineDeps } from "./engineDeps.ts"
import type { EntitlementInput, Mode } from "./meter.ts"
import type { BatchItem } from "./preparedBatch.ts"
import { makeReads } from "./reads.ts"

export type { EntitlementInput, Mode } from "./meter.ts"
export type { BatchItem } from "./preparedBatch.ts"

export interface EntitlementsShape {
  readonly evaluate: (
    organizationId: string,
    mode: Mode,
    input: EntitlementInput,
    idempotencyKey?: string
  ) => Effect.Effect<EntitlementState, InvalidInput | Conflict>
  /**
   * A batch of tracks (decisions.md §12): each item decided in order, independently, by every rule of `track`; the
   * accepted items committed together (one transaction) before the answer. In request order: each item's state or
   * its refusal.
   */
  readonly evaluateBatch: (
    organizationId: string,
    items: ReadonlyArray<BatchItem>
  ) => Effect.Effect<ReadonlyArray<Either.Either<EntitlementState, InvalidInput | Conflict>>>
}

export class Entitlements extends Context.Tag("Entitlements")<Entitlements, EntitlementsShape>() {}

export const EntitlementsLive = Layer.effect(
  Entitlements,
  Effect.gen(function* () {
    const deps = yield* engineDeps
    const reads = makeReads(deps)
    const decisions = makeDecisions(deps, reads)
    const prepareBatch = makePrepareBatch(deps, reads, makeBatchCustomers(deps, reads))
    const transact = makeTransact(deps, makeTransactLocked(deps, decisions))
    const evaluateBatch = makeBatchLanes(deps, prepareBatch, transact)
    return { evaluate: decisions.evaluate, evaluateBatch }
  })
)
