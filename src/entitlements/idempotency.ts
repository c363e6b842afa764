/**
 * What an Idempotency-Key is checked by, for a single request and a batch's items alike: the request's canonical form
 * (its hash is stored with the key), how long a key holds, and the conflict of a key used with another request. Pure.
 */
import { Conflict } from "../domain/errors.ts"

/** A key's claim expires a day after it was made. */
export const DAY_MS = 86_400_000

/** A key used again with another request: by a single request, its 409; by a batch item, that item's. */
export const idempotencyConflict = () =>
  new Conflict({ code: "idempotency_conflict", message: "This Idempotency-Key was used with a different request" })

/** A request as its hash sees it: objects' keys in order, so that two spellings of one request match. */
export const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, canonical((value as Record<string, unknown>)[k])])
        )
      : value
