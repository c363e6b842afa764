/**
 * A batch of tracks on its way through the engine: its items as sent, what its preparation outside the transaction
 * hands to the lane that decides and records it, and how concurrent batches merge into one and get their answers back.
 * Pure.
 */
import type { InvalidInput } from "../domain/errors.ts"
import type { CommitExpired, CommitGate } from "../platform/commitGate.ts"
import type { BatchResult } from "./batchDraws.ts"
import type { EntitlementInput, Meter } from "./meter.ts"
import { type CreationRaced, mergeNewCustomers, type NewCustomers } from "./newCustomers.ts"
import type { Resolution } from "./resolution.ts"

export interface BatchItem extends EntitlementInput {
  readonly idempotencyKey?: string | undefined
}

/** A batch resolved outside its transaction: what the transaction decides over (`transact`). */
export interface PreparedBatch {
  readonly items: ReadonlyArray<BatchItem>
  /** Each keyed item's request hash (the key's stored one must match); "" for items without a key. */
  readonly hashes: ReadonlyArray<string>
  /** Items answered before the transaction (refused by their timestamp or value). */
  readonly decided: ReadonlyArray<BatchResult | undefined>
  readonly resolutions: ReadonlyArray<Resolution | undefined>
  /**
   * Each resolved draw's meter and its event's id, made before the lane takes the batch: pure of the balances, so
   * that a transaction holding row locks only decides and writes.
   */
  readonly meters: ReadonlyArray<Meter | InvalidInput | undefined>
  readonly eventIds: ReadonlyArray<string>
  readonly now: number
  /** The customers its items create, written by its transaction (./newCustomers.ts). */
  readonly created: NewCustomers
  /** The requests' commit gates (src/platform/commitGate.ts): one a batch, several once merged. */
  readonly gates: ReadonlyArray<CommitGate>
}

/** What a lane answers a batch: its results, or that it must be prepared again, or that its request has expired. */
export type LaneOutcome = ReadonlyArray<BatchResult> | CreationRaced | CommitExpired

/** Several batches as one, their items in order (each item keeps its own instant: its resolution carries it). */
export const mergeBatches = (batches: ReadonlyArray<PreparedBatch>): PreparedBatch => ({
  items: batches.flatMap((b) => b.items),
  hashes: batches.flatMap((b) => b.hashes),
  decided: batches.flatMap((b) => b.decided),
  resolutions: batches.flatMap((b) => b.resolutions),
  meters: batches.flatMap((b) => b.meters),
  eventIds: batches.flatMap((b) => b.eventIds),
  now: Math.max(...batches.map((b) => b.now)),
  created: mergeNewCustomers(batches.map((b) => b.created)),
  gates: batches.flatMap((b) => b.gates)
})

/** The merged batch's results, given back to each batch. */
export const splitResults = (batches: ReadonlyArray<PreparedBatch>, results: ReadonlyArray<BatchResult>) => {
  let offset = 0
  return batches.map((b) => {
    const mine = results.slice(offset, offset + b.items.length)
    offset += b.items.length
    return mine
  })
}

/** Batches with idempotency keys, or creating customers, commit in the locked transaction. */
export const isGuarded = (prepared: PreparedBatch) =>
  prepared.created.customers.length === 0 && prepared.items.every((item) => item.idempotencyKey === undefined)
