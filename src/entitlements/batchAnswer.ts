import { Effect, Either } from "effect"
import {
  type EntitlementState,
  InvalidBatchItem,
  type TrackBatchItem,
  type TrackBatchRequest,
  type TrackBatchResponse
} from "../api/entitlements.ts"
import { errorBody } from "../api/errors.ts"
import type { Conflict, InvalidInput } from "../domain/errors.ts"
import { invalidRequest } from "../boundary/issues.ts"
import { toApiError } from "../boundary/toApiError.ts"

/** A batch item as the engine takes it: without a value it counts 1, as a track does. */
export type DecidedItem = TrackBatchItem & { readonly value: number }

type ItemResult = Either.Either<EntitlementState, InvalidInput | Conflict>

/**
 * A batch answered, by HttpApi's handler and by the direct endpoint alike: the items that passed the item schema go to
 * `decide` (the engine) as a batch of their own, in order; each item that failed it is answered in its place with the
 * 400 body a track of it gets (decisions.md §12), and nothing of it reaches the engine. A batch of invalid items only
 * is answered without the engine.
 */
export const answerBatch = <E, R>(
  payload: TrackBatchRequest,
  decide: (items: ReadonlyArray<DecidedItem>) => Effect.Effect<ReadonlyArray<ItemResult>, E, R>
): Effect.Effect<TrackBatchResponse, E, R> => {
  const items: Array<DecidedItem> = []
  const refused: Array<TrackBatchResponse["results"][number] | undefined> = []
  for (const item of payload.events) {
    if (item instanceof InvalidBatchItem) {
      const { message, details } = invalidRequest(item.issues)
      refused.push(errorBody("BadRequest", "invalid_request", message, details))
    } else {
      refused.push(undefined)
      items.push({ ...item, value: item.value ?? 1 })
    }
  }
  if (items.length === payload.events.length) return Effect.map(decide(items), batchAnswer)
  const decided = items.length === 0 ? Effect.succeed([]) : decide(items)
  return Effect.map(decided, (results) => {
    let next = 0
    return { results: refused.map((body) => body ?? answerOf(results[next++]!)) }
  })
}

/** One item's answer: its state, or its refusal as the whole error body the same track would have got. */
const answerOf = Either.match({
  onRight: (state: EntitlementState): TrackBatchResponse["results"][number] => state,
  onLeft: (error: InvalidInput | Conflict): TrackBatchResponse["results"][number] => {
    const wire = toApiError(error)
    return errorBody(wire._tag, wire.code, wire.message, wire.details)
  }
})

const batchAnswer = (results: ReadonlyArray<ItemResult>): TrackBatchResponse => ({ results: results.map(answerOf) })
