import { CUSTOMER_REF_MAX, IDEMPOTENCY_KEY_MAX } from "../api/common.ts"
import {
  EVENT_TIME_MS_MAX,
  ISO_EVENT_TIME,
  TRACK_BATCH_MAX,
  type TrackBatchItem,
  type TrackBatchRequest,
  TrackBatchSlot
} from "../api/entitlements.ts"
import { inRange, USAGE_VALUE } from "../api/numbers.ts"
import { Either, Schema } from "effect"

/**
 * `POST /v1/track/batch`'s body decoded without Effect's parser, for the shape batches nearly always have: items of
 * `customer`, `feature` and any of `value`, `entity`, `timestamp`, `idempotencyKey`. The schema (`TrackBatchRequest`)
 * took ~7–8 µs of CPU an item, as much as the rest of a hot balance's item. It answers what the schema answers, field
 * for field. An item outside that shape (customer data, metadata, a key the schema would drop, any value it would
 * refuse or normalise differently) is decoded alone by the item's schema, to its track or to an invalid item answered
 * in its place; a body that is not a batch is `undefined`, and the caller then decodes it with the schema, whose
 * refusal names the field.
 * src/http/batchDecode.test.ts holds the two to the same answers.
 */
const ITEM_KEYS: ReadonlySet<string> = new Set([
  "customer",
  "feature",
  "value",
  "entity",
  "timestamp",
  "idempotencyKey"
])

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const text = (u: unknown, min: number, max: number): u is string =>
  typeof u === "string" && u.length >= min && u.length <= max

const item = (u: unknown): TrackBatchItem | undefined => {
  if (!isRecord(u)) return undefined
  for (const key in u) if (!ITEM_KEYS.has(key)) return undefined
  const { customer, feature, value, entity, timestamp, idempotencyKey } = u
  if (!text(customer, 1, CUSTOMER_REF_MAX) || !text(feature, 1, Infinity)) return undefined
  const out: { -readonly [K in keyof TrackBatchItem]: TrackBatchItem[K] } = { customer, feature }
  if ("value" in u) {
    if (typeof value !== "number" || !inRange(USAGE_VALUE, value)) return undefined
    // The schema's decoding turns -0 into 0.
    out.value = value === 0 ? 0 : value
  }
  if ("entity" in u) {
    if (!text(entity, 1, Infinity)) return undefined
    out.entity = entity
  }
  if ("timestamp" in u) {
    const ok =
      typeof timestamp === "number"
        ? Number.isInteger(timestamp) && timestamp >= 0 && timestamp <= EVENT_TIME_MS_MAX
        : typeof timestamp === "string" && ISO_EVENT_TIME.test(timestamp)
    if (!ok) return undefined
    out.timestamp = timestamp as number | string
  }
  if ("idempotencyKey" in u) {
    if (!text(idempotencyKey, 1, IDEMPOTENCY_KEY_MAX)) return undefined
    out.idempotencyKey = idempotencyKey
  }
  return out
}

/** An item outside the ordinary shape: the schema's answer for it alone (its track, or an invalid item). */
const slowItem = Schema.decodeUnknownEither(TrackBatchSlot)

export const fastBatchRequest = (body: unknown): TrackBatchRequest | undefined => {
  if (!isRecord(body)) return undefined
  for (const key in body) if (key !== "events") return undefined
  const { events } = body
  if (!Array.isArray(events) || events.length < 1 || events.length > TRACK_BATCH_MAX) return undefined
  const items: Array<TrackBatchSlot> = []
  for (const e of events) {
    const decoded = item(e)
    if (decoded !== undefined) {
      items.push(decoded)
      continue
    }
    // Not an object: not a batch, the whole body is the schema's to refuse.
    const slow = slowItem(e)
    if (Either.isLeft(slow)) return undefined
    items.push(slow.right)
  }
  return { events: items }
}
