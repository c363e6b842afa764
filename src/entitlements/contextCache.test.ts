import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { makeContextCache } from "./contextCache.ts"
import type { EntitlementContext, HotCustomer, ManyRead } from "./hotStatements.ts"

const customer = (id: string, email: string | null = null): HotCustomer => ({
  id,
  externalId: id,
  email,
  overageMaxAmount: null,
  overageOnLimit: null,
  createdAt: 1
})
const subscription = (id: string, customerId: string) =>
  ({
    id,
    customerId,
    organizationId: "org",
    planId: "free",
    status: "active"
  }) as EntitlementContext["subscriptions"][number]

/** A database of three customers (one known by two references), read by a counted fake of the statement. */
const world = () => {
  const customers = [customer("a"), customer("b", "b@example.com"), customer("c")]
  const state = { contextVersion: 1, catalogVersion: 7, reads: [] as Array<ReadonlyArray<string>> }
  const read = (r: ManyRead) =>
    Effect.sync((): EntitlementContext => {
      state.reads.push(r.refs)
      const found = customers.filter((c) => r.refs.includes(c.id) || r.refs.includes(c.email ?? ""))
      return {
        catalogVersion: state.catalogVersion,
        customers: found,
        subscriptions: found.map((c) => subscription(`sub_${c.id}`, c.id)),
        configs: found.map((c) => ({ customerId: c.id, overage: "block" as const, maxOverageUnits: null })),
        balances: []
      }
    })
  const versions = () =>
    Effect.sync(() => ({ catalogVersion: state.catalogVersion, contextVersion: state.contextVersion }))
  return { state, read, versions }
}
const many = (refs: ReadonlyArray<string>, subjects: ReadonlyArray<string> = []): ManyRead => ({
  org: "org",
  refs,
  feature: "tokens",
  subjects
})

describe("a batch's kept reads", () => {
  test("read once while the version stays; only the references not kept are read", () => {
    const { state, read, versions } = world()
    const cache = makeContextCache({ versions, read })
    const first = Effect.runSync(cache.readMany(many(["a", "b"])))
    expect(first.customers.map((c) => c.id)).toEqual(["a", "b"])
    const second = Effect.runSync(cache.readMany(many(["b", "a", "c", "nobody"])))
    expect(state.reads).toEqual([
      ["a", "b"],
      ["c", "nobody"]
    ])
    expect(second.customers.map((c) => c.id).sort()).toEqual(["a", "b", "c"])
    expect(second.subscriptions.map((s) => s.id).sort()).toEqual(["sub_a", "sub_b", "sub_c"])
    expect(second.configs).toHaveLength(3)
    expect(second.catalogVersion).toBe(7)
    // "nobody" is kept as unknown too: a customer created later moves the version.
    Effect.runSync(cache.readMany(many(["nobody", "a"])))
    expect(state.reads).toHaveLength(2)
  })

  test("a moved version reads again; the catalog version is the latest read", () => {
    const { state, read, versions } = world()
    const cache = makeContextCache({ versions, read })
    Effect.runSync(cache.readMany(many(["a"])))
    state.contextVersion = 2
    state.catalogVersion = 8
    const again = Effect.runSync(cache.readMany(many(["a"])))
    expect(state.reads).toEqual([["a"], ["a"]])
    expect(again.catalogVersion).toBe(8)
  })

  test("a customer two references name appears once", () => {
    const { read, versions } = world()
    const cache = makeContextCache({ versions, read })
    Effect.runSync(cache.readMany(many(["b"])))
    const both = Effect.runSync(cache.readMany(many(["b", "b@example.com"])))
    expect(both.customers.map((c) => c.id)).toEqual(["b"])
    expect(both.subscriptions).toHaveLength(1)
  })

  test("a read that asks for balances is made whole every time", () => {
    const { state, read, versions } = world()
    const cache = makeContextCache({ versions, read })
    Effect.runSync(cache.readMany(many(["a"], ["credits"])))
    Effect.runSync(cache.readMany(many(["a"], ["credits"])))
    expect(state.reads).toEqual([["a"], ["a"]])
    expect(cache.size()).toBe(0)
  })

  test("holds at most its bound, the oldest filled first out", () => {
    const { state, read, versions } = world()
    const cache = makeContextCache({ versions, read, maxEntries: 2 })
    Effect.runSync(cache.readMany(many(["a", "b", "c"])))
    expect(cache.size()).toBe(2)
    Effect.runSync(cache.readMany(many(["b", "c"])))
    expect(state.reads).toHaveLength(1)
    Effect.runSync(cache.readMany(many(["a"])))
    expect(state.reads).toEqual([["a", "b", "c"], ["a"]])
  })
})
