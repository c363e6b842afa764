import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, test } from "bun:test"
import { Effect, Exit } from "effect"
import { retryDeadlocks } from "./deadlocks.ts"

const failingThen = (failures: number, code: string, asDefect: boolean) => {
  let calls = 0
  const effect = Effect.suspend(() => {
    calls++
    if (calls > failures) return Effect.succeed("done")
    const error = new SqlError({ cause: { code }, message: "Failed to execute statement" })
    return asDefect ? Effect.die(error) : Effect.fail(error)
  })
  return { effect, calls: () => calls }
}

describe("retryDeadlocks", () => {
  test("a deadlock (40P01), failed or died, is run again until it succeeds", async () => {
    for (const asDefect of [false, true]) {
      const attempt = failingThen(2, "40P01", asDefect)
      expect(await Effect.runPromise(retryDeadlocks(attempt.effect))).toBe("done")
      expect(attempt.calls()).toBe(3)
    }
  })

  test("any other database error is not retried; a deadlock that persists gives up after the retries", async () => {
    const other = failingThen(1, "23505", true)
    expect(Exit.isFailure(await Effect.runPromiseExit(retryDeadlocks(other.effect)))).toBe(true)
    expect(other.calls()).toBe(1)
    const persistent = failingThen(10, "40P01", false)
    expect(Exit.isFailure(await Effect.runPromiseExit(retryDeadlocks(persistent.effect, 3)))).toBe(true)
    expect(persistent.calls()).toBe(4)
  })
})
