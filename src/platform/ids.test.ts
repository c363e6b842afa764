import { expect, test } from "bun:test"
import { makeId, makeIds, makeMonotonicIds } from "./ids.ts"

test("event ids sort in the order they were made, also within one millisecond", () => {
  const next = makeMonotonicIds("msg")
  const ids = Array.from({ length: 500 }, (_, i) => next(1_000 + Math.floor(i / 100)))
  expect([...ids].sort()).toEqual(ids)
  expect(new Set(ids).size).toBe(ids.length)
  // A clock that steps back keeps counting from the last instant.
  expect(next(10) > ids.at(-1)!).toBe(true)
})

test("ids made together look like ids made one by one: prefix, the instant, 16 random characters, all distinct", () => {
  const one = makeId("evt", 1_700_000_000_000)
  // More than one draw of random bytes (4,096 ids a draw).
  const many = makeIds("evt", 1_700_000_000_000, 5_000)
  expect(many.length).toBe(5_000)
  expect(new Set(many).size).toBe(5_000)
  for (const id of many) {
    expect(id).toMatch(/^evt_[0-9a-hjkmnp-tv-z]{26}$/)
    expect(id.slice(0, 14)).toBe(one.slice(0, 14))
  }
  // The random part uses the whole alphabet, in the last draw as in the first.
  expect(new Set(many.slice(-900).flatMap((id) => [...id.slice(14)])).size).toBe(32)
  expect(makeIds("evt", 1, 0)).toEqual([])
})
