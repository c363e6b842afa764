import { Either } from "effect"
import type { EntitlementState, TrackBatchRequest, TrackBatchResponse } from "../api/entitlements.ts"
import { errorBody } from "../api/errors.ts"
import type { Conflict, InvalidInput } from "../domain/errors.ts"
import { toApiError } from "../boundary/toApiError.ts"

/** A batch's items as the engine takes them: an item without a value counts 1, as a track does. */
export const batchItems = (payload: TrackBatchRequest) =>
  payload.events.map((item) => ({ ...item, value: item.value ?? 1 }))

/** A batch's answer: each item's state, or its refusal as the whole error body the same track would have got. */
export const batchAnswer = (
  results: ReadonlyArray<Either.Either<EntitlementState, InvalidInput | Conflict>>
): TrackBatchResponse => ({
  results: results.map(
    Either.match({
      onRight: (state) => state,
      onLeft: (error) => {
        const wire = toApiError(error)
        return errorBody(wire._tag, wire.code, wire.message, wire.details)
      }
    })
  )
})
