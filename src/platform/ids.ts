import { Clock, Context, Effect, Layer } from "effect"

/** Prefixes of every id the service mints (decisions.md §1). */
export type IdPrefix =
  | "org"
  /** Coupons and promotion codes (decisions.md §15). */
  | "cpn"
  | "promo"
  /** Customer portal sessions and their audit rows (decisions.md §17). */
  | "pss"
  | "pau"
  | "cus"
  | "feat"
  | "plan"
  | "crs"
  | "pack"
  | "sub"
  | "inv"
  | "pm"
  | "ent"
  | "evt"
  | "key"
  | "pf"
  | "pay"
  | "ntf"
  | "whk"
  | "acct"
  | "chk"
  /** Outbound events: webhook endpoints, events (the `webhook-id`), deliveries (event × endpoint), attempts. */
  | "whe"
  | "msg"
  | "dlv"
  | "att"
  /** Dashboard sessions and the audit log of changes made from the dashboard. */
  | "dss"
  | "aud"
  /** Movements of a customer's credit balance (plan changes, decisions.md §14). */
  | "cbl"
  /** Invoice documents (decisions.md §15, §16): tax rates, credit notes, refunds, coupons, promotion codes. */
  | "txr"
  | "cn"
  | "rfd"
  | "cpn"
  | "promo"

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz" // Crockford base32, lower case

const encodeTime = (ms: number): string => {
  let out = ""
  let t = ms
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out
    t = Math.floor(t / 32)
  }
  return out
}

/** Ids per draw of random bytes (`getRandomValues` fills at most 65,536 bytes at once). */
const IDS_PER_DRAW = 4_096

/**
 * Time-sortable, prefixed, opaque ids: `cus_` + 10 chars of milliseconds + 16 random chars. `count` of one instant at
 * once: the time encoded once, the random bytes drawn together.
 */
export const makeIds = (prefix: IdPrefix, nowMs: number, count: number): Array<string> => {
  const head = `${prefix}_${encodeTime(nowMs)}`
  const ids: Array<string> = []
  while (ids.length < count) {
    const n = Math.min(IDS_PER_DRAW, count - ids.length)
    const bytes = crypto.getRandomValues(new Uint8Array(16 * n))
    for (let i = 0; i < n; i++) {
      let id = head
      for (let j = 16 * i; j < 16 * (i + 1); j++) id += ALPHABET[bytes[j]! & 31]
      ids.push(id)
    }
  }
  return ids
}

/** One id, as `makeIds` makes them. */
export const makeId = (prefix: IdPrefix, nowMs: number): string => makeIds(prefix, nowMs, 1)[0]!

/**
 * Ids that also sort in the order this process made them: within one millisecond (or if the clock steps back) the
 * random part of the last one plus one. Outbound events use them, so that two events of one transaction list in the
 * order they were written.
 */
export const makeMonotonicIds = (prefix: IdPrefix) => {
  let lastMs = -1
  let digits: Array<number> = []
  return (nowMs: number): string => {
    if (nowMs > lastMs) {
      lastMs = nowMs
      // The first digit below 16: room to count up without carrying out of the random part.
      digits = [...crypto.getRandomValues(new Uint8Array(16))].map((b, i) => (i === 0 ? b & 15 : b & 31))
    } else {
      for (let i = digits.length - 1; i >= 0; i--) {
        if (digits[i]! < 31) {
          digits[i]!++
          break
        }
        digits[i] = 0
      }
    }
    return `${prefix}_${encodeTime(lastMs)}${digits.map((d) => ALPHABET[d]).join("")}`
  }
}

export interface IdsShape {
  readonly next: (prefix: IdPrefix) => Effect.Effect<string>
  /** `count` ids at once (a batch's events): one read of the clock, not one effect an id. */
  readonly nextMany: (prefix: IdPrefix, count: number) => Effect.Effect<ReadonlyArray<string>>
}

export class Ids extends Context.Tag("Ids")<Ids, IdsShape>() {}

export const IdsLive = Layer.succeed(Ids, {
  next: (prefix) => Effect.map(Clock.currentTimeMillis, (now) => makeId(prefix, now)),
  nextMany: (prefix, count) => Effect.map(Clock.currentTimeMillis, (now) => makeIds(prefix, now, count))
})

export const nextId = (prefix: IdPrefix) => Effect.flatMap(Ids, (ids) => ids.next(prefix))
