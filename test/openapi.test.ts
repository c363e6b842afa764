import { OpenApi } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { BillingApi } from "../src/api/Api.ts"
import { errorCodes, errorStatus } from "../src/api/errors.ts"
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
  let key: string
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    key = (await server.createOrg()).apiKey
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

  test("requests: no field with a default is required by a generator; no generated titles", () => {
    const text = JSON.stringify(doc)
    expect(text).not.toMatch(/"title":"(maxLength|minLength|maxItems|pattern)\(/)
    const schemas = (doc as unknown as { components: { schemas: Record<string, unknown> } }).components.schemas
    const withDefault: Array<string> = []
    const seen = new Set<unknown>()
    const walk = (node: unknown, at: string): void => {
      if (typeof node !== "object" || node === null || seen.has(node)) return
      seen.add(node)
      const record = node as Record<string, unknown>
      if ("default" in record && at.includes(".properties.")) withDefault.push(at)
      if (typeof record.$ref === "string") walk(schemas[record.$ref.replace("#/components/schemas/", "")], record.$ref)
      for (const [key, value] of Object.entries(record)) walk(value, `${at}.${key}`)
    }
    for (const [path, methods] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(methods)) {
        const o = op as { requestBody?: unknown; parameters?: Array<{ schema?: unknown }> }
        walk(o.requestBody, `${method} ${path}`)
        for (const p of o.parameters ?? [])
          if (p.schema !== undefined && "default" in (p.schema as object)) withDefault.push(path)
      }
    expect(withDefault).toEqual([])
    // The default is still documented.
    expect((schemas.SyncFeature as any).properties.meterType.description).toContain('Default: `"consumable"`')
  })

  test("errors: the body the service sends, each status's codes as an enum; summaries; a server", async () => {
    const full = doc as unknown as {
      servers: Array<{ url: string }>
      components: { schemas: Record<string, any> }
      paths: Record<string, Record<string, { summary?: string; responses: Record<string, any> }>>
    }
    expect(full.servers.length).toBeGreaterThan(0)
    expect(JSON.stringify(doc)).not.toContain("HttpApiDecodeError")
    for (const [tag, [status]] of Object.entries(errorStatus)) {
      const schema = full.components.schemas[`Error${status}`]
      if (schema === undefined) continue
      expect(schema.properties.code.enum).toEqual([...errorCodes[tag as keyof typeof errorCodes]])
    }
    for (const [path, methods] of Object.entries(full.paths))
      for (const [method, op] of Object.entries(methods)) {
        expect({ route: `${method} ${path}`, summary: typeof op.summary }).toEqual({
          route: `${method} ${path}`,
          summary: "string"
        })
        for (const [status, response] of Object.entries(op.responses))
          if (Number(status) >= 400)
            expect(response.content["application/json"].schema).toEqual({ $ref: `#/components/schemas/Error${status}` })
      }
    expect(Object.keys(full.paths["/health"]!.get!.responses).sort()).toEqual(["200", "400", "500", "503"])
    // What the service sends on a 400 is what the document says.
    const response = await server.fetch("/v1/customers", { method: "POST", apiKey: "sk_test_x", body: "{}" })
    const body = (await response.json()) as Record<string, unknown>
    expect(Object.keys(body).sort()).toEqual(
      Object.keys(full.components.schemas[`Error${response.status}`].properties)
        .filter((k) => k !== "details")
        .sort()
    )
    expect(full.components.schemas[`Error${response.status}`].properties.code.enum).toContain(body.code)
    const bad = await server.fetch("/v1/check", { method: "POST", apiKey: key, body: JSON.stringify({ customer: "" }) })
    expect(bad.status).toBe(400)
    const badBody = (await bad.json()) as Record<string, unknown>
    expect(Object.keys(badBody).sort()).toEqual(Object.keys(full.components.schemas.Error400.properties).sort())
    expect(full.components.schemas.Error400.properties.code.enum).toContain(badBody.code)
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
    // Scalar's web fonts (fonts.scalar.com) are off, and the browser is told to load nothing from another host.
    expect(html).toContain('"withDefaultFonts":false')
    const csp = response.headers.get("content-security-policy") ?? ""
    const directives = csp.split(";").map((d) => d.trim().split(/\s+/))
    for (const name of ["default-src", "script-src", "style-src", "font-src", "img-src", "connect-src"]) {
      const sources = directives.find((d) => d[0] === name)?.slice(1)
      expect({ name, sources }).toEqual({ name, sources: expect.any(Array) })
      for (const source of sources!)
        expect(["'self'", "'unsafe-inline'", "'unsafe-eval'", "data:", "blob:"]).toContain(source)
    }
  })
})
