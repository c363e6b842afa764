import { describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { type BalanceKey, type Decision, makeBalanceWriter } from "./BalanceWriter.ts"
import type { BalanceCommit, BalanceRow, StoredBalance, UsageEventRow } from "./records.ts"

/** A balance store with the repository's guard: a commit writes only if the version is still the expected one. */
const fakeStore = () => {
  const rows = new Map<string, StoredBalance>()
  const steps: Array<ReadonlyArray<BalanceCommit>> = []
  const idOf = (c: { organizationId: string; customerId: string; subjectId: string }) =>
    `${c.organizationId}/${c.customerId}/${c.subjectId}`
  return {
    rows,
    steps,
    /** Another writer (a credit grant, another process) moves the balance: its version grows. */
    bump: (key: BalanceKey, used: bigint) => {
      const current = rows.get(idOf(key))!
      rows.set(idOf(key), { ...current, used, version: current.version + 1 })
    },
    repo: {
      commitBalances: (commits: ReadonlyArray<BalanceCommit>) =>
        Effect.sync(() => {
          steps.push(commits)
          return commits.map((c) => {
            const current = rows.get(idOf(c))
            if ((current?.version ?? null) !== c.expectedVersion) return Option.none<number>()
            const version = (current?.version ?? 0) + 1
            rows.set(idOf(c), { ...c.next, version })
            return Option.some(version)
          })
        }),
      readBalance: (organizationId: string, customerId: string, subjectId: string) =>
        Effect.sync(() => Option.fromNullable(rows.get(idOf({ organizationId, customerId, subjectId }))))
    }
  }
}

const key: BalanceKey = { organizationId: "org", customerId: "cus", subjectId: "feat" }
const empty: BalanceRow = { windowStart: 0, windowEnd: null, used: 0n, overage: 0n, bonus: 0n, addon: 0n }

const event = (value: bigint): UsageEventRow => ({
  organizationId: "org",
  id: `evt_${value}`,
  customerId: "cus",
  featureId: "feat",
  subjectId: "feat",
  entityId: null,
  value,
  cost: value,
  fromPlan: value,
  fromBonus: 0n,
  fromAddon: 0n,
  overage: 0n,
  billable: 0n,
  planId: null,
  metadata: {},
  createdAt: 1
})

/** Draws `value` if it fits under `limit`; answers the usage after the draw, or "denied". */
const upTo =
  (limit: bigint, value: bigint) =>
  (stored: StoredBalance | null): Decision<string> => {
    const used = stored?.used ?? 0n
    if (used + value > limit) return { answer: "denied", write: null }
    return { answer: `used ${used + value}`, write: { next: { ...empty, used: used + value }, event: event(value) } }
  }

describe("balance writer", () => {
  test("with gather, draws that arrive together are decided in arrival order and written in one step", async () => {
    const store = fakeStore()
    const writer = makeBalanceWriter(store.repo, { lanes: 1, gather: true })
    const answers = await Effect.runPromise(
      Effect.all(
        Array.from({ length: 5 }, () => writer.draw(key, null, upTo(3n, 1n))),
        { concurrency: "unbounded" }
      )
    )
    expect(answers).toEqual(["used 1", "used 2", "used 3", "denied", "denied"])
    expect(store.steps.length).toBe(1)
    expect(store.steps[0]![0]!.events.length).toBe(3)
    expect(store.rows.get("org/cus/feat")).toMatchObject({ used: 3n, version: 1 })
  })

  test("without gather, a draw on an idle lane is its own step", async () => {
    const store = fakeStore()
    const writer = makeBalanceWriter(store.repo, { lanes: 1 })
    const answers = await Effect.runPromise(
      Effect.all(
        Array.from({ length: 5 }, () => writer.draw(key, null, upTo(10n, 2n))),
        { concurrency: "unbounded" }
      )
    )
    expect(answers).toEqual(["used 2", "used 4", "used 6", "used 8", "used 10"])
    expect(store.steps[0]!.length).toBe(1)
    expect(store.steps[0]![0]!.events.length).toBe(1)
    expect(store.rows.get("org/cus/feat")).toMatchObject({ used: 10n })
  })

  test("a balance moved by another writer is read again and its draws decided again over it", async () => {
    const store = fakeStore()
    const writer = makeBalanceWriter(store.repo, { lanes: 1, gather: true })
    expect(await Effect.runPromise(writer.draw(key, null, upTo(5n, 1n)))).toBe("used 1")
    // Another process draws 3 more; this writer still remembers version 1 with 1 used.
    store.bump(key, 4n)
    const answers = await Effect.runPromise(
      Effect.all([writer.draw(key, null, upTo(5n, 1n)), writer.draw(key, null, upTo(5n, 1n))], {
        concurrency: "unbounded"
      })
    )
    expect(answers).toEqual(["used 5", "denied"])
    expect(store.rows.get("org/cus/feat")).toMatchObject({ used: 5n, version: 3 })
    // The step over the stale version wrote nothing; the next, over the balance read again, wrote one event.
    expect(store.steps.map((s) => s.map((c) => [c.expectedVersion, c.events.length]))).toEqual([
      [[null, 1]],
      [[1, 2]],
      [[2, 1]]
    ])
  })
})
