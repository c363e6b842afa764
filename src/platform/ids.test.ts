import { expect, test } from "bun:test"
import { makeMonotonicIds } from "./ids.ts"

test("event ids sort in the order they were made, also within one millisecond", () => {
  const next = makeMonotonicIds("msg")
  const ids = Array.from({ length: 500 }, (_, i) => next(1_000 + Math.floor(i / 100)))
  expect([...ids].sort()).toEqual(ids)
  expect(new Set(ids).size).toBe(ids.length)
  // A clock that steps back keeps counting from the last instant.
  expect(next(10) > ids.at(-1)!).toBe(true)
})
