import { OpenApi } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { BillingApi } from "../src/api/Api.ts"
import { startServer, type TestServer } from "./support/harness.ts"

/** The 23 routes of interface-spec.md part 4, as "METHOD path" with path parameters in braces. */
const CONTRACT_ROUTES = [
  "POST /v1/billing/invoice/{id}/pay",
  "POST /v1/subscriptions/{id}/checkout",
  "POST /v1/track",
  "POST /v1/check",
  "POST /v1/sync",
  "POST /v1/customers/overage-limit",
  "POST /v1/addon",
  "POST /v1/entities",
  "POST /v1/entities/remove",
  "POST /v1/wallet/setup",
  "POST /v1/billing/invoice",
  "GET /v1/customers/{id}/usage/history",
  "GET /v1/customers",
  "GET /v1/customers/{id}",
  "GET /v1/billing/invoices",
  "GET /v1/billing/usage",
  "GET /v1/credit-packs",
  "GET /v1/credit-systems",
  "POST /v1/customers",
  "POST /v1/wallet/remove",
  "POST /webhooks/{organizationId}/{provider}",
  "POST /webhooks/{organizationId}",
  "POST /webhooks/sandbox/{provider}"
]

type Operation = { operationId: string; security?: Array<Record<string, unknown>> }
type Document = {
  paths: Record<string, Record<string, Operation>>
  components: { securitySchemes: Record<string, { type: string; scheme: string }> }
}

const routesOf = (doc: Document) =>
  Object.entries(doc.paths)
    .flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        route: `${method.toUpperCase()} ${path}`,
        operationId: op.operationId,
        security: (op.security ?? []).flatMap((s) => Object.keys(s))
      }))
    )
    .sort((a, b) => a.route.localeCompare(b.route))

describe("the OpenAPI document", () => {
  let server: TestServer
  let doc: Document
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    const response = await server.fetch("/openapi.json")
    expect(response.status).toBe(200)
    doc = (await response.json()) as Document
  })
  afterAll(() => server.close())

  test("lists every route of the contract", () => {
    const routes = routesOf(doc).map((r) => r.route)
    for (const route of CONTRACT_ROUTES) expect(routes).toContain(route)
    expect(CONTRACT_ROUTES.length).toBe(23)
  })

  test("bearer security on every /v1 route and none on webhooks or probes", () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" })
    for (const { route, security } of routesOf(doc)) {
      if (route.includes(" /v1/")) expect({ route, security }).toEqual({ route, security: ["bearerAuth"] })
      else expect({ route, security }).toEqual({ route, security: [] })
    }
  })

  test("the served document is the one derived from the contract", () => {
    expect(doc).toEqual(JSON.parse(JSON.stringify(OpenApi.fromApi(BillingApi))))
  })

  test("no request body schema claims additionalProperties: false: unknown fields are ignored (decisions.md §1)", () => {
    const schemas = (doc as unknown as { components: { schemas: Record<string, unknown> } }).components.schemas
    const strict: Array<string> = []
    const seen = new Set<unknown>()
    /** Every schema reachable from `node`, through $refs too. */
    const walk = (node: unknown, at: string): void => {
      if (typeof node !== "object" || node === null || seen.has(node)) return
      seen.add(node)
      if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${at}[${i}]`))
      const record = node as Record<string, unknown>
      if (record.additionalProperties === false) strict.push(at)
      const ref = record.$ref
      if (typeof ref === "string") walk(schemas[ref.replace("#/components/schemas/", "")], ref)
      for (const [key, value] of Object.entries(record)) walk(value, `${at}.${key}`)
    }
    let bodies = 0
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const body = (op as { requestBody?: unknown }).requestBody
        if (body === undefined) continue
        bodies++
        walk(body, `${method.toUpperCase()} ${path}`)
      }
    }
    expect(bodies).toBeGreaterThan(15)
    expect(strict).toEqual([])
    // Answers keep saying exactly what they hold.
    expect(JSON.stringify(schemas.EntitlementState)).toContain('"additionalProperties":false')
  })

  test("route table snapshot", () => {
    expect(routesOf(doc)).toMatchSnapshot()
  })

  test("the interactive reference is served without a key and needs nothing online", async () => {
    const response = await server.fetch("/docs")
    expect(response.status).toBe(200)
    const html = await response.text()
    expect(html).toContain("<html")
    // Assets are inlined: no script or stylesheet is loaded from another host.
    expect(html).not.toMatch(/<script[^>]+src=["']https?:/i)
    expect(html).not.toMatch(/<link[^>]+href=["']https?:/i)
  })
})
