import { expect, test } from "bun:test"
import { Either, Schema } from "effect"
import { InvalidBatchItem, TrackBatchRequest } from "../api/entitlements.ts"
import { fastBatchRequest } from "./batchDecode.ts"

const schema = Schema.decodeUnknownEither(TrackBatchRequest)
const FAST_KEYS = ["customer", "feature", "value", "entity", "timestamp", "idempotencyKey"]

/** Every field's values at and past the schema's edges, valid or not. */
const fieldValues: Record<string, ReadonlyArray<unknown>> = {
  customer: ["c", "", "x".repeat(320), "x".repeat(321), "a@b.co", 5, null, ["c"]],
  feature: ["calls", "", " ", 1, null],
  value: [0, -0, 1, 2.5, 0.000001, 0.0000001, 1e-7, 9_000_000_000, 9_000_000_001, -1, NaN, "1", null, 1e308],
  entity: ["seat-1", "", 3, null],
  timestamp: [
    0,
    1_764_000_000_000,
    -1,
    1.5,
    8_640_000_000_000_000,
    8_640_000_000_000_001,
    "2026-11-24T10:00:00Z",
    "2026-11-24T10:00+05:30",
    "2026-11-24T10:00:00.123456789-0330",
    "2026-11-24",
    "2026-11-24T10:00:00",
    "",
    null
  ],
  idempotencyKey: ["k", "", "k".repeat(255), "k".repeat(256), 7, null],
  customerData: [{ email: "a@b.co" }],
  metadata: [{ a: 1 }],
  extra: [1],
  __proto__: [1]
}

const bodies = (): Array<unknown> => {
  const out: Array<unknown> = []
  const base = { customer: "c", feature: "calls" }
  out.push({ events: [base] })
  for (const [field, values] of Object.entries(fieldValues))
    for (const value of values) out.push({ events: [base, JSON.parse(JSON.stringify({ ...base, [field]: value }))] })
  // The items' container, at and past its edges.
  out.push({ events: [] }, { events: Array.from({ length: 1000 }, () => base) })
  out.push({ events: Array.from({ length: 1001 }, () => base) }, { events: base }, { events: [base], more: 1 })
  // Not through JSON: -0 survives only in an object built here.
  out.push({ events: [base, { ...base, value: -0 }] })
  out.push(
    null,
    [],
    "events",
    { events: [null] },
    { events: [[base]] },
    JSON.parse('{"events":[{"customer":"c","feature":"calls","__proto__":{"x":1}}]}')
  )
  return out
}

test("the fast decoder answers as the schema does, or leaves the body to it", () => {
  let taken = 0
  for (const body of bodies()) {
    const fast = fastBatchRequest(body)
    const slow = schema(body)
    const plain = (e: unknown) => Object.keys(e as object).every((k) => FAST_KEYS.includes(k))
    // Whatever the schema accepts in the ordinary shape, it takes.
    const sent = body as { readonly events: ReadonlyArray<unknown> }
    if (Either.isRight(slow) && sent.events.every(plain) && Object.keys(sent).length === 1)
      expect({ body, taken: fast !== undefined }).toEqual({ body, taken: true })
    if (fast === undefined) continue
    taken++
    // Whatever it takes, the schema accepts, with the same value.
    expect({ body, decoded: Either.getOrUndefined(slow) }).toEqual({ body, decoded: fast })
    for (const e of fast.events) expect(Object.is((e as { value?: number }).value, -0)).toBe(false)
  }
  // It takes the ordinary shapes, so the comparison above is not vacuous.
  expect(taken).toBeGreaterThan(20)
})

test("the shapes a batch nearly always has are taken, and what the schema refuses never is", () => {
  const ordinary = {
    events: [
      { customer: "c", feature: "calls" },
      { customer: "c", feature: "calls", value: 2.5, entity: "seat-1", timestamp: "2026-11-24T10:00:00Z" },
      { customer: "c", feature: "calls", timestamp: 1_764_000_000_000, idempotencyKey: "k" }
    ]
  }
  expect(fastBatchRequest(ordinary)).toEqual(ordinary)
  for (const body of bodies()) if (Either.isLeft(schema(body))) expect(fastBatchRequest(body)).toBeUndefined()
  // An item the schema would decode further or drop is decoded alone by the item's schema.
  for (const odd of [
    { customer: "c", feature: "calls", customerData: {} },
    { customer: "c", feature: "calls", note: "x" }
  ]) {
    const body = { events: [ordinary.events[0], odd] }
    expect(fastBatchRequest(body)).toEqual(Either.getOrThrow(schema(body)))
  }
})

test("an item that fails the item schema is an invalid item in its place, with the schema's issues from the item", () => {
  const ok = { customer: "c", feature: "calls" }
  const body = { events: [ok, { value: -5 }, { customer: "c", feature: "calls", value: 1e13 }, ok] }
  const fast = fastBatchRequest(body)!
  expect(fast).toEqual(Either.getOrThrow(schema(body)))
  expect(fast.events[0]).toEqual(ok)
  expect(fast.events[3]).toEqual(ok)
  const [negative, huge] = [fast.events[1], fast.events[2]]
  expect(negative).toBeInstanceOf(InvalidBatchItem)
  expect(huge).toBeInstanceOf(InvalidBatchItem)
  const paths = (item: unknown) => (item as InvalidBatchItem).issues.map((i) => i.path.join("."))
  expect(paths(negative)).toEqual(["customer", "feature", "value"])
  expect(paths(huge)).toEqual(["value"])
  // Not an object: not a batch, left to the schema, which refuses the body.
  for (const broken of [{ events: [ok, 5] }, { events: [ok, null] }, { events: [ok, [ok]] }]) {
    expect(fastBatchRequest(broken)).toBeUndefined()
    expect(Either.isLeft(schema(broken))).toBe(true)
  }
})
