import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { CatalogRepo } from "../src/catalog/CatalogRepo.ts"
import { CustomersRepo, toCustomerRecord } from "../src/customers/CustomersRepo.ts"
import {
  decodeFirstRow,
  decodeRows,
  Flag,
  JsonObjectText,
  MicroUnits,
  Millis,
  NullableMillis,
  RowShapeError
} from "../src/platform/db/rowSchemas.ts"
import { SubscriptionsRepo, toSubscriptionRecord } from "../src/subscriptions/SubscriptionsRepo.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * Repositories decode their rows with schemas (src/platform/db/rowSchemas.ts): a row that is not what its table
 * holds, written here through SQL as a bug or a hand edit would, is a defect at the repository that names the table
 * and the column, never the value; and the hot path's hand mappers read the same rows as the schemas do.
 */
const SECRET = "s3cret-row-value"

describe("row schemas", () => {
  const Row = Schema.Struct({
    at: Millis,
    ended: NullableMillis,
    units: MicroUnits,
    on: Flag,
    metadata: JsonObjectText
  })
  const decode = (rows: ReadonlyArray<unknown>) => Effect.runSync(Effect.exit(decodeRows("t", Row)(rows)))
  const defect = (rows: ReadonlyArray<unknown>) => {
    const exit = decode(rows)
    return Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined
  }
  const row = { at: 1, ended: null, units: 2, on: 1, metadata: "{}" }

  test("each database's representation: numbers, bigints past 2^53 (PostgreSQL), 0/1, JSON text", () => {
    const big = 2n ** 60n + 1n
    expect(
      decode([row, { at: 2n ** 53n, ended: 5, units: big, on: 0, metadata: `{"a": [1]}` }, { ...row, units: 2 ** 60 }])
    ).toEqual(
      Exit.succeed([
        { at: 1, ended: null, units: 2n, on: true, metadata: {} },
        { at: 2 ** 53, ended: 5, units: big, on: false, metadata: { a: [1] } },
        { at: 1, ended: null, units: 2n ** 60n, on: true, metadata: {} }
      ])
    )
    // An object's keys are kept as JSON.parse made them: `__proto__` stays an own key, not the prototype.
    const [decoded] = Effect.runSync(decodeRows("t", Row)([{ ...row, metadata: `{"__proto__": {"a": 1}}` }]))
    expect(Object.keys(decoded!.metadata)).toEqual(["__proto__"])
    expect(Object.getPrototypeOf(decoded!.metadata)).toBe(Object.prototype)
  })

  test("anything else is a RowShapeError naming the table and each column once, never a value", () => {
    const error = defect([
      row,
      { ...row, at: SECRET, units: 1.5, on: 2, metadata: `["${SECRET}"]` },
      { ...row, at: "1", metadata: `{"${SECRET}"` },
      { at: 1, units: 1, on: 0, metadata: "{}" }
    ]) as RowShapeError
    expect(error).toBeInstanceOf(RowShapeError)
    expect(error.table).toBe("t")
    expect(error.problems).toEqual([
      "at: unexpected value",
      "units: unexpected value",
      "on: unexpected value",
      "metadata: unexpected value",
      "metadata: unreadable",
      "ended: missing"
    ])
    expect(error.message).not.toContain(SECRET)
    expect(Effect.runSync(Effect.exit(decodeFirstRow("t", Row)([])))).toEqual(Exit.succeed(Option.none()))
    expect(Effect.runSync(Effect.exit(decodeFirstRow("t", Row)([row, { nonsense: true }])))).toEqual(
      Exit.succeed(Option.some({ at: 1, ended: null, units: 2n, on: true, metadata: {} }))
    )
  })
})

for (const database of databases()) {
  describe(`rows decoded by schemas (${database.name})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    /** An organization with a plan every customer is on, and customer "c" with metadata and an overage cap. */
    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        features: [{ slug: "t", name: "T", type: "metered" }],
        plans: [{ slug: "free", name: "Free", autoEnable: true, currency: "NGN", features: [{ slug: "t", limit: 5 }] }]
      })
      expect(
        (await post(server, org.apiKey, "/v1/customers", { id: "c", email: "c@example.com", metadata: { note: "n" } }))
          .status
      ).toBe(200)
      expect(
        (await post(server, org.apiKey, "/v1/customers/overage-limit", { customer: "c", maxOverageAmount: 500 })).status
      ).toBe(200)
      return org
    }

    const sql = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
      server.run(Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.orDie))

    /** The defect `effect` dies with (the test fails if it succeeds or fails otherwise). */
    const defectOf = async (effect: Parameters<TestServer["run"]>[0]) => {
      const exit = await server.run(Effect.exit(effect))
      expect(Exit.isFailure(exit)).toBe(true)
      const defect = Exit.isFailure(exit) ? Cause.dieOption(exit.cause) : Option.none()
      expect(Option.isSome(defect)).toBe(true)
      return Option.getOrThrow(defect)
    }

    const expectRowShape = (defect: unknown, table: string, problems: ReadonlyArray<string>) => {
      expect(defect).toBeInstanceOf(RowShapeError)
      const error = defect as RowShapeError
      expect({ table: error.table, problems: error.problems }).toEqual({ table, problems })
      expect(error.message).toBe(`A row of table ${table} does not have the expected shape: ${problems.join(", ")}`)
      expect(JSON.stringify(error) + error.message + String(error.stack)).not.toContain(SECRET)
    }

    test("a JSON column that does not parse: a defect naming the table and the column, not the value", async () => {
      const org = await setup()
      await sql((s) => s`UPDATE customers SET metadata = ${`{"note": "${SECRET}"`} WHERE organization_id = ${org.id}`)

      const list = Effect.flatMap(CustomersRepo, (repo) => repo.list(org.id, { limit: 10, offset: 0 }))
      expectRowShape(await defectOf(list), "customers", ["metadata: unreadable"])
      const matches = Effect.flatMap(CustomersRepo, (repo) => repo.matches(org.id, "c"))
      expectRowShape(await defectOf(matches), "customers", ["metadata: unreadable"])

      // Over HTTP: a 500 like any defect, with nothing of the row in it.
      const response = await server.fetch("/v1/customers", { apiKey: org.apiKey })
      expect(response.status).toBe(500)
      expect(await response.text()).not.toContain(SECRET)
    })

    test("JSON of another shape and a flag that is not 0/1: defects naming the table and the path inside the row", async () => {
      const org = await setup()
      await sql((s) =>
        Effect.gen(function* () {
          const [plan] = yield* s<{ features: string }>`SELECT features FROM plans WHERE organization_id = ${org.id}`
          const features = JSON.parse(plan!.features)
          features[0].limit = SECRET
          yield* s`UPDATE plans SET features = ${JSON.stringify(features)} WHERE organization_id = ${org.id}`
          yield* s`UPDATE subscriptions SET cancel_at_period_end = 2 WHERE organization_id = ${org.id}`
        })
      )

      const load = Effect.flatMap(CatalogRepo, (repo) => repo.load(org.id))
      expectRowShape(await defectOf(load), "plans", ["features[0].limit: unexpected value"])
      const subscriptions = Effect.flatMap(SubscriptionsRepo, (repo) => repo.listByOrganization(org.id))
      expectRowShape(await defectOf(subscriptions), "subscriptions", ["cancelAtPeriodEnd: unexpected value"])
    })

    test("the hot path's hand mappers read a row as the repositories' schemas do", async () => {
      const org = await setup()
      const { customers, subscriptions, rows } = await server.run(
        Effect.gen(function* () {
          const s = yield* SqlClient.SqlClient
          return {
            customers: yield* Effect.flatMap(CustomersRepo, (repo) => repo.list(org.id, { limit: 10, offset: 0 })).pipe(
              Effect.map((page) => page.rows)
            ),
            subscriptions: yield* Effect.flatMap(SubscriptionsRepo, (repo) => repo.listByOrganization(org.id)),
            rows: {
              customers: yield* s`SELECT * FROM customers WHERE organization_id = ${org.id}`,
              subscriptions: yield* s`SELECT * FROM subscriptions WHERE organization_id = ${org.id}`
            }
          }
        }).pipe(Effect.orDie)
      )

      expect(customers).toHaveLength(1)
      expect(customers[0]).toMatchObject({ externalId: "c", metadata: { note: "n" }, overageMaxAmount: "500" })
      expect(rows.customers.map(toCustomerRecord)).toEqual([...customers])
      expect(subscriptions).toHaveLength(1)
      expect(subscriptions[0]).toMatchObject({ status: "active", cancelAtPeriodEnd: false })
      expect(rows.subscriptions.map(toSubscriptionRecord)).toEqual([...subscriptions])
    })
  })
}
