import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option, Schema, SchemaAST } from "effect"
import { BillingApi } from "../src/api/Api.ts"
import { BillingApiError, createBillingClient, makeClient } from "../src/api/client.ts"
import { startServer, type TestServer } from "./support/harness.ts"

/** Every endpoint of the contract, with its request body's schema AST. */
const endpoints = () =>
  Object.values(BillingApi.groups).flatMap((group) =>
    Object.values(group.endpoints).map((endpoint) => ({
      name: `${group.identifier}.${endpoint.name}`,
      payload: Option.getOrUndefined(endpoint.payloadSchema as Option.Option<Schema.Schema.Any>)?.ast
    }))
  )

/** Whether a schema applies a property default (or any struct-level transformation) on decode. */
const appliesDefaults = (ast: SchemaAST.AST, seen = new Set<SchemaAST.AST>()): boolean => {
  if (seen.has(ast)) return false
  seen.add(ast)
  switch (ast._tag) {
    case "Transformation":
      return (
        ast.transformation._tag === "TypeLiteralTransformation" ||
        appliesDefaults(ast.from, seen) ||
        appliesDefaults(ast.to, seen)
      )
    case "TypeLiteral":
      return (
        ast.propertySignatures.some((p) => appliesDefaults(p.type, seen)) ||
        ast.indexSignatures.some((s) => appliesDefaults(s.type, seen))
      )
    case "Union":
      return ast.types.some((t) => appliesDefaults(t, seen))
    case "TupleType":
      return (
        ast.elements.some((e) => appliesDefaults(e.type, seen)) || ast.rest.some((r) => appliesDefaults(r.type, seen))
      )
    case "Refinement":
      return appliesDefaults(ast.from, seen)
    case "Suspend":
      return appliesDefaults(ast.f(), seen)
    default:
      return false
  }
}

describe("the typed clients", () => {
  let server: TestServer
  let apiKey: string
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    apiKey = (await server.createOrg()).apiKey
  })
  afterAll(() => server.close())

  test("no request body applies a default in the contract: the client's input is what the wire accepts", () => {
    const all = endpoints()
    expect(all.length).toBeGreaterThan(30)
    expect(all.filter((e) => e.payload !== undefined && appliesDefaults(e.payload)).map((e) => e.name)).toEqual([])
  })

  test("the Promise client: the README's catalog without defaults, check/track without headers, errors with code", async () => {
    const billing = createBillingClient({ baseUrl: server.baseUrl, apiKey })
    const synced = await billing.catalog.sync({
      payload: {
        features: [{ slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" }],
        plans: [
          { slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 1000 }] },
          {
            slug: "pro",
            name: "Pro",
            price: 500000,
            currency: "NGN",
            interval: "monthly",
            features: [{ slug: "tokens", limit: 100000, overage: "charge", overagePrice: 0.5 }]
          }
        ]
      }
    })
    expect(synced.plans.created).toEqual(["free", "pro"])
    await billing.customers.createCustomer({ payload: { id: "user-42", email: "ada@example.com" } })
    const check = await billing.entitlements.check({ payload: { customer: "user-42", feature: "tokens", value: 1200 } })
    expect(check).toMatchObject({ allowed: false, code: "limit_exceeded", limit: 1000 })
    const track = await billing.entitlements.track({ payload: { customer: "user-42", feature: "tokens" } })
    expect(track).toMatchObject({ allowed: true, usage: 1 })
    const listed = await billing.customers.listCustomers()
    expect(listed.data.map((c) => c.externalId)).toEqual(["user-42"])

    const notFound = await billing.customers.getCustomer({ path: { id: "nobody" } }).catch((e: unknown) => e)
    expect(notFound).toBeInstanceOf(BillingApiError)
    expect(notFound).toMatchObject({ status: 404, code: "customer_not_found" })
    const invalid = await billing.entitlements
      .check({ payload: { customer: "user-42", feature: "" } })
      .catch((e: unknown) => e)
    // Refused before sending, as the service would refuse it.
    expect(invalid).toMatchObject({
      status: 0,
      code: "invalid_request",
      details: [{ path: "feature", message: "must not be empty" }]
    })
    // Refused by the service: a pack naming a credit system that does not exist.
    const refused = await billing.catalog
      .sync({
        payload: {
          features: [],
          creditPacks: [{ slug: "p", name: "P", credits: 1, price: 1, currency: "NGN", creditSystem: "nope" }],
          plans: []
        }
      })
      .catch((e: unknown) => e)
    expect(refused).toMatchObject({
      status: 400,
      code: "invalid_request",
      details: [{ path: "creditPacks[0].creditSystem", message: "unknown credit system 'nope'" }]
    })
    const unauthorized = await createBillingClient({ baseUrl: server.baseUrl, apiKey: "sk_test_wrong" })
      .customers.listCustomers()
      .catch((e: unknown) => e)
    expect(unauthorized).toMatchObject({ status: 401, code: "unauthorized" })
    const offline = await createBillingClient({ baseUrl: "http://127.0.0.1:9" })
      .system.health()
      .catch((e: unknown) => e)
    expect(offline).toMatchObject({ status: 0, code: "network_error" })
  })

  test("the Effect client: the same, failing with the contract's error classes", async () => {
    const result = await Effect.runPromise(
      Effect.gen(function* () {
        const client = yield* makeClient(server.baseUrl, { apiKey })
        const pack = yield* client.payments
          .purchaseAddon({ payload: { customer: "user-42", pack: "nope" } })
          .pipe(Effect.flip)
        const ready = yield* client.system.ready()
        return { pack, ready }
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )
    expect(result.pack).toMatchObject({ _tag: "NotFound", code: "pack_not_found" })
    expect(result.ready.status).toBe("ready")
  })
})
