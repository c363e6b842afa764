/**
 * A batch prepared outside its transaction: items refused by their timestamp or value answered, the rest resolved all
 * at once (items naming the same customer, feature and entity share one read), the customers it creates planned, each
 * draw's meter and event id made; a guarded batch's balances checked against what the service knows of them.
 */
import { Clock, Effect, Either, Option } from "effect"
import { VALUE_MAX } from "../domain/bounds.ts"
import { InvalidInput } from "../domain/errors.ts"
import { fitsMicro } from "../domain/quantity.ts"
import type { CommitGate } from "../platform/commitGate.ts"
import { sha256Hex } from "../platform/crypto.ts"
import type { makeBatchCustomers } from "./batchCustomers.ts"
import type { BatchResult } from "./batchDraws.ts"
import { isCount } from "./decisions.ts"
import type { EngineDeps } from "./engineDeps.ts"
import { canonical } from "./idempotency.ts"
import { drawsAlike, eventTime, invalid, makeMeter } from "./meter.ts"
import { type BatchItem, isGuarded, type PreparedBatch } from "./preparedBatch.ts"
import type { Reads } from "./reads.ts"
import type { Resolution } from "./resolution.ts"

export const makePrepareBatch = (
  { ids, outbox, guardedBatches }: EngineDeps,
  { resolveMany }: Reads,
  createCustomers: ReturnType<typeof makeBatchCustomers>
) => {
  const prepareBatch = (org: string, items: ReadonlyArray<BatchItem>, gate: CommitGate) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const results: Array<BatchResult | undefined> = items.map(() => undefined)
      const inputs = items.map(({ idempotencyKey: _, ...input }) => input)
      // Only a keyed item's request is compared with what its key stored.
      const hashes = items.map((item, i) =>
        item.idempotencyKey === undefined
          ? ""
          : sha256Hex(JSON.stringify(canonical({ mode: "track", input: inputs[i] })))
      )
      const times = items.map((item) => {
        const at = eventTime("track", item.timestamp, now)
        return at instanceof InvalidInput ? at : item.timestamp === undefined ? undefined : at
      })
      items.forEach((item, i) => {
        const time = times[i]
        if (time instanceof InvalidInput) results[i] = Either.left(time)
        else if (!(item.value >= 0) || !fitsMicro(item.value)) {
          results[i] = Either.left(invalid("value", `must be 0 to ${VALUE_MAX} with at most 6 decimal places`))
        }
      })
      // Resolved outside the transaction and all at once (`resolveMany`: one read per feature named). The customers
      // the batch creates (once per reference) are planned here and written by its transaction (./newCustomers.ts):
      // its items are resolved over them as they will be, and a batch that fails leaves none of them.
      // Items naming the same customer, feature and entity share one read (a hot customer's batch is one).
      const shared = new Map<string, number>()
      const firstOf = items.map((item, i) => {
        if (results[i] !== undefined) return i
        const key = JSON.stringify([item.customer, item.feature, item.entity ?? null])
        const first = shared.get(key)
        if (first !== undefined) return first
        shared.set(key, i)
        return i
      })
      const resolutions: Array<Resolution | undefined> = items.map(() => undefined)
      yield* resolveMany(
        org,
        inputs,
        items.flatMap((_, i) => (results[i] === undefined && firstOf[i] === i ? [i] : [])),
        now,
        times as ReadonlyArray<number | undefined>,
        resolutions
      )
      items.forEach((_, i) => {
        const first = resolutions[firstOf[i]!]
        if (firstOf[i] === i || first === undefined) return
        resolutions[i] =
          first._tag === "Answered"
            ? first
            : {
                ...first,
                resolved: {
                  ...first.resolved,
                  input: inputs[i]!,
                  at: (times[i] as number | undefined) ?? first.resolved.now
                }
              }
      })
      const created = yield* createCustomers(org, items, inputs, times, now, resolutions)

      // Items that share their first's read and draw alike share its meter (`drawsAlike`): a hot customer's batch
      // builds one, not one an item.
      const meters: Array<ReturnType<typeof makeMeter> | undefined> = []
      resolutions.forEach((resolution, i) => {
        if (resolution?._tag !== "Resolved" || isCount(resolution.resolved.feature)) return void meters.push(undefined)
        const first = resolutions[firstOf[i]!]
        const shared =
          firstOf[i] !== i && first?._tag === "Resolved" && drawsAlike(first.resolved, resolution.resolved)
            ? meters[firstOf[i]!]
            : undefined
        meters.push(shared ?? makeMeter({ ...resolution.resolved, inTransaction: true }, outbox))
      })
      const eventIds = yield* ids.nextMany("evt", items.length)
      const prepared: PreparedBatch = {
        items,
        hashes,
        decided: results,
        resolutions,
        meters,
        eventIds,
        now,
        created,
        gates: [gate]
      }
      if (Option.isSome(guardedBatches) && isGuarded(prepared)) yield* guardedBatches.value.check(org, prepared)
      return prepared
    })

  return prepareBatch
}
