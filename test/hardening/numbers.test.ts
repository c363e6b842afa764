/**
 * Numbers have a range (decisions.md §1, docs/decisions.md "Numbers"). For every numeric field of every route of the
 * served OpenAPI document — request bodies at any depth and query parameters, found in the document so that a new
 * field is covered without being listed here — the edges 0, -0, max, max + 1, 1e308, 2^53 + 1 and a value with 30
 * decimals are sent, then random values in and out of range (fast-check): each answer is a 400 naming the field and
 * its bound, or a success whose stored value is exactly the number sent (never "-0", never rounded); never a 5xx.
 */
import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, FiberRef, HashMap, HashSet, Logger, LogLevel } from "effect"
import fc from "fast-check"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { decimalPlaces } from "../../src/api/numbers.ts"
import { format, parseDecimal } from "../../src/domain/money.ts"
import { fromMicro } from "../../src/domain/quantity.ts"
import { InvoicesRepo } from "../../src/billing/InvoicesRepo.ts"
import { rateUnbilled } from "../../src/billing/lines.ts"
import { type CreditKind, Credits } from "../../src/credits/Credits.ts"
import { formatPath } from "../../src/boundary/issues.ts"
import { findOutOfRange, reportOutOfRange } from "../../src/platform/db/outOfRange.ts"
import { syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { cli, startService } from "./support.ts"

type Node = Record<string, any>
interface Document {
  paths: Record<string, Record<string, Node>>
  components: { schemas: Record<string, Node> }
}
type Path = ReadonlyArray<string | number>

const deref = (doc: Document, node: Node | undefined): Node => {
  if (node === undefined) return {}
  const ref = node.$ref ?? (Array.isArray(node.allOf) && node.allOf.length === 1 ? node.allOf[0].$ref : undefined)
  if (ref !== undefined) {
    const { $ref: _, allOf: __, ...rest } = node
    return { ...deref(doc, doc.components.schemas[String(ref).split("/").pop()!]), ...rest }
  }
  return node
}

/** The schema without its `null` alternative. */
const nonNull = (doc: Document, node: Node): Node => {
  const n = deref(doc, node)
  if (!Array.isArray(n.anyOf)) return n
  const rest = n.anyOf.map((m: Node) => deref(doc, m)).filter((m: Node) => m.type !== "null")
  return rest.length === 1 ? { ...rest[0], ...(n.description ? { outerDescription: n.description } : {}) } : n
}

/** Every numeric position of a body schema (arrays at index 0), whether a base request sets it or not. */
const numericFields = (doc: Document, schema: Node, path: Path = []): Array<{ path: Path; schema: Node }> => {
  const node = nonNull(doc, schema)
  if (node.type === "number" || node.type === "integer") return [{ path, schema: node }]
  if (node.type === "array") return numericFields(doc, node.items ?? {}, [...path, 0])
  if (node.type === "object" && node.properties !== undefined) {
    return Object.entries(node.properties as Record<string, Node>).flatMap(([key, s]) =>
      numericFields(doc, s, [...path, key])
    )
  }
  return []
}

const getAt = (value: unknown, path: Path): unknown =>
  path.reduce<unknown>((v, key) => (v === null || v === undefined ? undefined : (v as any)[key]), value)

const setAt = (value: unknown, path: Path, replacement: unknown): unknown => {
  if (path.length === 0) return replacement
  const [head, ...rest] = path
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, replacement) : v))
  return { ...(value as object), [head as string]: setAt((value as any)[head as string], rest, replacement) }
}

/** A JSON literal written as is: `-0`, `9007199254740993` and 30 decimals do not survive JSON.stringify. */
class Raw {
  constructor(readonly text: string) {}
}
const encode = (value: unknown): string => {
  if (value instanceof Raw) return value.text
  if (Array.isArray(value)) return `[${value.map(encode).join(",")}]`
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${encode(v)}`)
      .join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

/** A field's rule, from the document alone. */
interface Rule {
  readonly min?: number
  readonly exclusiveMin?: number
  readonly max: number
  readonly integer: boolean
  readonly decimals: number
}
const ruleOf = (node: Node): Rule => {
  const text = `${node.description ?? ""} ${node.outerDescription ?? ""}`
  const decimals = /at most (\d+) decimal places/.exec(text)
  expect({
    node,
    bounded: typeof node.maximum === "number" && (node.minimum !== undefined || node.exclusiveMinimum !== undefined)
  }).toMatchObject({ bounded: true })
  return {
    ...(node.minimum === undefined ? {} : { min: node.minimum }),
    ...(node.exclusiveMinimum === undefined ? {} : { exclusiveMin: node.exclusiveMinimum }),
    max: node.maximum,
    integer: node.type === "integer",
    decimals: node.type === "integer" ? 0 : decimals === null ? Infinity : Number(decimals[1])
  }
}
const admits = (rule: Rule, v: number) =>
  Number.isFinite(v) &&
  (rule.min === undefined || v >= rule.min) &&
  (rule.exclusiveMin === undefined || v > rule.exclusiveMin) &&
  v <= rule.max &&
  (!rule.integer || Number.isInteger(v)) &&
  decimalPlaces(v) <= rule.decimals

/** The decimal a value is, exactly: what was sent (as JSON reads it) and what was stored must be the same text. */
const exact = (value: unknown): string => {
  if (typeof value === "number" && Object.is(value, -0)) return "-0 (stored as negative zero)"
  if (typeof value === "string" && value.trim().startsWith("-0")) return `${value} (stored as negative zero)`
  const parsed = parseDecimal(typeof value === "string" ? value.trim() : (value as number))
  if (parsed._tag === "None") return `not a decimal: ${String(value)}`
  return format(parsed.value)
}
const sentExactly = (text: string) => format((parseDecimal(Number(text)) as any).value)

const edges = (rule: Rule): ReadonlyArray<string> => [
  "0",
  "-0",
  String(rule.max),
  String(rule.max + 1),
  "1e308",
  "9007199254740993",
  "0.123456789012345678901234567890"
]

/** Values in and out of a rule: whole or with 1–9 decimals, near 0, near the bound, past it, negative. */
const valueFor = (rule: Rule): fc.Arbitrary<string> => {
  const whole = fc.oneof(
    fc.integer({ min: 0, max: Math.min(rule.max, 2 ** 31 - 1) }),
    fc.integer({ min: 0, max: 1000 }).map((n) => rule.max - n),
    fc.integer({ min: 1, max: 1000 }).map((n) => rule.max + n),
    fc.integer({ min: -1000, max: -1 })
  )
  const fraction = fc.oneof(
    fc.constant(""),
    fc
      .integer({ min: 1, max: 6 })
      .chain((d) => fc.stringMatching(new RegExp(`^[0-9]{${d}}$`)))
      .map((f) => `.${f}`),
    fc
      .integer({ min: 7, max: 9 })
      .chain((d) => fc.stringMatching(new RegExp(`^[0-9]{${d - 1}}[1-9]$`)))
      .map((f) => `.${f}`)
  )
  return fc.tuple(whole, fraction).map(([w, f]) => `${w}${f}`)
}

for (const database of databases()) {
  describe(`numbers on ${database.name}`, () => {
    let server: TestServer
    let doc: Document
    let apiKey: string
    let orgId: string
    let endpointId = ""
    let sequence = 0

    const catalog = {
      defaultProvider: "simulated",
      features: [
        { slug: "units", name: "Units", type: "metered", unit: "unit" },
        { slug: "renders", name: "Renders", type: "metered" }
      ],
      creditSystems: [{ slug: "fz-credits", name: "Credits", features: [{ feature: "renders", creditCost: 2 }] }],
      creditPacks: [
        { slug: "fz-pack", name: "Pack", credits: 1, price: 1, currency: "NGN", creditSystem: "fz-credits" }
      ],
      // The first item of every list has every number (the document's array fields are walked at index 0).
      plans: [
        {
          slug: "fz-plan",
          name: "Every number",
          price: 1000,
          currency: "NGN",
          interval: "monthly",
          trialDays: 0,
          features: [
            {
              slug: "units",
              limit: 10,
              trialLimit: 1,
              usageModel: "usage_based",
              ratingModel: "graduated",
              pricePerUnit: 1,
              billingUnits: 1,
              tiers: [
                { upTo: 5, unitPrice: 1, flatFee: 0 },
                { upTo: null, unitPrice: 2, flatFee: 1 }
              ],
              overage: "charge",
              overagePrice: 1,
              maxOverageUnits: 5,
              creditCost: 1
            }
          ]
        },
        // Every customer gets unlimited units, so every accepted value of check and track is drawn and stored.
        { slug: "open", name: "Open", autoEnable: true, currency: "NGN", features: [{ slug: "units", limit: null }] }
      ],
      taxRates: [{ slug: "fz-vat", name: "VAT", percentage: 7.5, country: "NG" }],
      coupons: [
        {
          slug: "fz-coupon",
          name: "Off",
          percentOff: 10,
          duration: "repeating",
          durationInCycles: 3,
          maxRedemptions: 5
        }
      ],
      promotionCodes: [{ code: "FZ", coupon: "fz-coupon", maxRedemptions: 5 }]
    }
    /** A coupon has a percentage or an amount off, never both: the amount's cases get a catalog with the amount. */
    const amountCatalog = {
      ...catalog,
      coupons: [
        { slug: "fz-coupon", name: "Off", amountOff: 100, currency: "NGN", duration: "repeating", durationInCycles: 3 }
      ]
    }

    /** A valid request per route with numeric fields; each case changes one number in it. */
    const bases = (
      path: Path = []
    ): Record<string, { body?: unknown; query?: Record<string, string>; path?: Record<string, string> }> => ({
      "POST /v1/sync": { body: path[0] === "coupons" && path[2] === "amountOff" ? amountCatalog : catalog },
      // A new customer each time (customerData), so no window fills up across cases.
      "POST /v1/check": {
        body: { customer: `n-${++sequence}`, feature: "units", value: 1, sendEvent: true, customerData: {} }
      },
      "POST /v1/track": { body: { customer: `n-${++sequence}`, feature: "units", value: 1, customerData: {} } },
      "POST /v1/track/batch": {
        body: { events: [{ customer: `n-${++sequence}`, feature: "units", value: 1, customerData: {} }] }
      },
      "POST /v1/customers/overage-limit": { body: { customer: "c", maxOverageAmount: 100 } },
      "POST /v1/customers/feature-config": {
        body: { customer: "c", feature: "units", overage: "charge", maxOverageUnits: 10 }
      },
      "POST /v1/addon": { body: { customer: "c", pack: "fz-pack", quantity: 1 } },
      "GET /v1/customers": { query: { limit: "10", offset: "0" } },
      "GET /v1/webhook-endpoints": { query: { limit: "10" } },
      "GET /v1/webhook-endpoints/{id}/deliveries": { path: { id: endpointId }, query: { limit: "10" } },
      "GET /v1/events": { query: { limit: "10" } },
      // An invoice that does not exist: an admitted amount reaches the handler (404), only the schema refuses (400).
      "POST /v1/billing/invoices/{id}/refund": { path: { id: "inv_none" }, body: { amount: 1 } }
    })

    const rows = (query: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<any>, unknown>) =>
      server.run(Effect.flatMap(SqlClient.SqlClient, query).pipe(Effect.orDie))

    /**
     * What the service stored for the field after an accepted request (`undefined`: nothing to read, e.g. not drawn),
     * or the echo of a query parameter. A route or field without a reader fails the test: a new numeric field needs
     * one.
     */
    const stored = async (route: string, path: Path, body: any, answer: any): Promise<unknown> => {
      switch (route) {
        case "POST /v1/sync": {
          const [kind, , field, ...rest] = path as [string, number, string, ...Array<string | number>]
          if (kind === "creditSystems") {
            const [row] = await rows(
              (sql) => sql`SELECT features FROM credit_systems WHERE organization_id = ${orgId} AND slug = 'fz-credits'`
            )
            return getAt(JSON.parse(row.features), [0, ...rest])
          }
          if (kind === "taxRates") {
            const [row] = await rows(
              (sql) => sql`SELECT percentage FROM tax_rates WHERE organization_id = ${orgId} AND slug = 'fz-vat'`
            )
            return row[field]
          }
          if (kind === "coupons") {
            const [row] = await rows(
              (sql) => sql`SELECT percent_off, amount_off, duration_in_cycles, max_redemptions FROM coupons
                WHERE organization_id = ${orgId} AND slug = 'fz-coupon'`
            )
            return row[field]
          }
          if (kind === "promotionCodes") {
            const [row] = await rows(
              (sql) =>
                sql`SELECT max_redemptions FROM promotion_codes WHERE organization_id = ${orgId} AND code_key = 'fz'`
            )
            return row[field]
          }
          if (kind === "creditPacks") {
            const [row] = await rows(
              (sql) =>
                sql`SELECT credits, price FROM credit_packs WHERE organization_id = ${orgId} AND slug = 'fz-pack'`
            )
            return row[field]
          }
          const [row] = await rows(
            (sql) =>
              sql`SELECT price, trial_days, features FROM plans WHERE organization_id = ${orgId} AND slug = 'fz-plan'`
          )
          if (field === "features") return getAt(JSON.parse(row.features), rest)
          return row[field]
        }
        case "POST /v1/check":
        case "POST /v1/track":
        case "POST /v1/track/batch": {
          const customer = route === "POST /v1/track/batch" ? body.events[0].customer : body.customer
          const [event] = await rows(
            (sql) => sql`SELECT e.value FROM usage_events e JOIN customers c
              ON c.organization_id = e.organization_id AND c.id = e.customer_id
            WHERE e.organization_id = ${orgId} AND c.external_id = ${customer}`
          )
          return event === undefined ? undefined : format(fromMicro(event.value))
        }
        case "POST /v1/customers/overage-limit": {
          const [row] = await rows(
            (sql) =>
              sql`SELECT overage_max_amount FROM customers WHERE organization_id = ${orgId} AND external_id = 'c'`
          )
          return row.overageMaxAmount
        }
        case "POST /v1/customers/feature-config": {
          const [row] = await rows(
            (sql) => sql`SELECT max_overage_units FROM customer_feature_configs WHERE organization_id = ${orgId}`
          )
          return format(fromMicro(row.maxOverageUnits))
        }
        case "POST /v1/addon": {
          const reference = new URL(answer.checkoutUrl).pathname.split("/").pop()
          const [row] = await rows(
            (sql) => sql`SELECT quantity FROM checkouts WHERE organization_id = ${orgId} AND reference = ${reference}`
          )
          return row.quantity
        }
        case "GET /v1/customers":
          return answer[path[0] as string]
        // Pages of outbound events answer no `limit` to read back; their page sizes are held in test/events.
        case "GET /v1/webhook-endpoints":
        case "GET /v1/webhook-endpoints/{id}/deliveries":
        case "GET /v1/events":
          return undefined
      }
      throw new Error(`no read-back for ${route} ${formatPath(path)}: add one (and a base request) to this test`)
    }

    /** Every numeric field of every route: body positions and query parameters, each with its rule. */
    const fields = () =>
      Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods).flatMap(([method, operation]) => {
          const route = `${method.toUpperCase()} ${path}`
          const body = operation.requestBody?.content?.["application/json"]?.schema
          const inBody =
            body === undefined ? [] : numericFields(doc, body).map((f) => ({ route, in: "body" as const, ...f }))
          const inQuery = (operation.parameters ?? [])
            .filter((p: Node) => p.in === "query" && ["number", "integer"].includes(deref(doc, p.schema).type))
            .map((p: Node) => ({ route, in: "query" as const, path: [p.name] as Path, schema: deref(doc, p.schema) }))
          return [...inBody, ...inQuery]
        })
      )

    /** Sends `text` as the field's value in its route's base request; checks the answer and what was stored. */
    const attempt = async (field: ReturnType<typeof fields>[number], text: string) => {
      const base = bases(field.path)[field.route]
      expect({ route: field.route, base: base !== undefined }).toEqual({ route: field.route, base: true })
      const [method, path] = field.route.split(" ") as [string, string]
      const rule = ruleOf(field.schema)
      const where = `${field.route} ${formatPath(field.path)} = ${text}`
      let url = path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(base!.path?.[name] ?? ""))
      let body: string | undefined
      if (field.in === "query") {
        url += `?${new URLSearchParams({ ...base!.query, [field.path[0] as string]: text })}`
      } else {
        expect({ where, inBase: getAt(base!.body, field.path) !== undefined }).toEqual({ where, inBase: true })
        body = encode(setAt(base!.body, field.path, new Raw(text)))
      }
      const response = await server.fetch(url, { method, apiKey, ...(body === undefined ? {} : { body }) })
      const sent = (await response.json()) as any
      // A batch answers an item that fails its schema in the item's place (decisions.md §12): that item's 400 body,
      // naming the field from the item.
      const inBatch = field.route === "POST /v1/track/batch" && response.status === 200
      const answer = inBatch ? sent.results[0] : sent
      const status = inBatch && answer?.success === false ? 400 : response.status
      const fieldPath = formatPath(inBatch ? field.path.slice(2) : field.path)
      const result = { where, status }
      expect(result.status).toBeLessThan(500)
      if (!admits(rule, Number(text))) {
        expect({ ...result, code: answer.code }).toEqual({ ...result, status: 400, code: "invalid_request" })
        const message = (answer.details as Array<{ path: string; message: string }>).find(
          (d) => d.path === fieldPath
        )?.message
        const named =
          /^must (be at most|be at least|be greater than|be an integer|have at most \d+ decimal places)/.test(
            message ?? ""
          )
        expect({ where, message, named }).toEqual({ where, message, named: true })
        // The bound itself is in the message when it is the bound that was passed.
        if (Number(text) > rule.max)
          expect({ where, message }).toEqual({ where, message: `must be at most ${rule.max}` })
        return "refused" as const
      }
      // An admitted value can still pass a bound of what is stored once added to it (earlier runs bought packs of the
      // same balance): then a 400 naming the field and that bound, with nothing changed.
      const details: Array<{ path: string; message: string }> = Array.isArray(answer?.details) ? answer.details : []
      const cumulative = details.find(
        (d) => d.path === fieldPath && /\(the most one (balance holds|window counts)\)/.test(d.message)
      )
      if (status === 400 && answer.code === "invalid_request" && cumulative !== undefined) {
        return "refused" as const
      }
      if (field.route === "POST /v1/billing/invoices/{id}/refund") {
        expect({ ...result, code: answer.code }).toEqual({ ...result, status: 404, code: "invoice_not_found" })
        return "accepted" as const
      }
      expect({ ...result, answer: status < 300 ? "" : answer }).toEqual({ ...result, status: 200, answer: "" })
      const value = await stored(field.route, field.path, body === undefined ? undefined : JSON.parse(body), sent)
      if (value !== undefined) expect({ where, stored: exact(value) }).toEqual({ where, stored: sentExactly(text) })
      return "accepted" as const
    }

    beforeAll(async () => {
      server = await startServer(database.config)
      const org = await server.createOrg()
      apiKey = org.apiKey
      orgId = org.id
      await syncCatalog(server, apiKey, catalog)
      const created = await server.fetch("/v1/customers", {
        method: "POST",
        apiKey,
        body: JSON.stringify({ id: "c", email: "c@example.com" })
      })
      expect(created.status).toBe(200)
      const endpoint = await server.fetch("/v1/webhook-endpoints", {
        method: "POST",
        apiKey,
        body: JSON.stringify({ url: "https://example.com/hooks" })
      })
      endpointId = ((await endpoint.json()) as any).id
      doc = (await (await server.fetch("/openapi.json")).json()) as Document
    }, 60_000)
    afterAll(() => server.close())

    test("every numeric field of every route declares its range in the document", () => {
      const all = fields()
      // Today: sync's 15, check and track's value, the two caps, the pack quantity, the customer list's page.
      expect(all.length).toBeGreaterThanOrEqual(22)
      for (const field of all) {
        const rule = ruleOf(field.schema)
        expect({
          field: `${field.route} ${formatPath(field.path)}`,
          finite: Number.isFinite(rule.max) && rule.decimals <= 6
        }).toMatchObject({ finite: true })
      }
    })

    test("the edges: 0, -0, max, max + 1, 1e308, 2^53 + 1, 30 decimals", async () => {
      const outcomes: Record<string, number> = { accepted: 0, refused: 0 }
      for (const field of fields()) {
        for (const text of edges(ruleOf(field.schema))) outcomes[await attempt(field, text)]!++
      }
      expect(outcomes.accepted).toBeGreaterThan(40)
      expect(outcomes.refused).toBeGreaterThan(80)
    }, 60_000)

    test("random values in and out of range: a 400 naming the field, or stored exactly", async () => {
      const all = fields()
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...all).chain((field) => valueFor(ruleOf(field.schema)).map((text) => ({ field, text }))),
          async ({ field, text }) => {
            await attempt(field, text)
          }
        ),
        { numRuns: 60 }
      )
    }, 60_000)
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Sums and products past a bound, and values stored before the bounds
// ---------------------------------------------------------------------------------------------------------------

const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as any })

for (const database of databases()) {
  describe(`bounds of sums, products and stored values on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const org = async (catalog: Record<string, unknown>) => {
      const created = await server.createOrg()
      await syncCatalog(server, created.apiKey, catalog)
      const send = (path: string, body?: unknown, method = body === undefined ? "GET" : "POST") =>
        server
          .fetch(path, {
            method,
            apiKey: created.apiKey,
            ...(body === undefined ? {} : { body: JSON.stringify(body) })
          })
          .then(json)
      return { ...created, send }
    }
    const sql = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
      server.run(Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.orDie))

    test("the limits of several subscriptions add up exactly, past one plan's bound too", async () => {
      const { send } = await org({
        features: [{ slug: "tok", name: "Tokens", type: "metered" }],
        plans: [
          { slug: "a", name: "A", isAddon: true, features: [{ slug: "tok", limit: 0.1 }] },
          { slug: "b", name: "B", isAddon: true, features: [{ slug: "tok", limit: 0.2 }] },
          { slug: "big1", name: "Big 1", isAddon: true, features: [{ slug: "tok", limit: 1e12 }] },
          { slug: "big2", name: "Big 2", isAddon: true, features: [{ slug: "tok", limit: 1e12 }] }
        ]
      })
      for (const product of ["a", "b"])
        expect((await send("/v1/attach", { customer: "x", product, customerData: {} })).status).toBe(200)
      // 0.1 + 0.2 is 0.3, not 0.30000000000000004 (which would have rounded up to 0.300001 of allowance).
      expect((await send("/v1/check", { customer: "x", feature: "tok", value: 0.3 })).body).toMatchObject({
        allowed: true,
        limit: 0.3,
        balance: 0.3
      })
      expect((await send("/v1/track", { customer: "x", feature: "tok", value: 0.3 })).body).toMatchObject({
        allowed: true,
        balance: 0
      })
      expect((await send("/v1/track", { customer: "x", feature: "tok", value: 0.000001 })).body).toMatchObject({
        allowed: false,
        code: "limit_exceeded"
      })

      for (const product of ["big1", "big2"])
        expect((await send("/v1/attach", { customer: "y", product, customerData: {} })).status).toBe(200)
      expect((await send("/v1/track", { customer: "y", feature: "tok", value: 9e9 })).body).toMatchObject({
        allowed: true,
        limit: 2e12,
        balance: 2e12 - 9e9
      })
    })

    test("value × creditCost is at most 1e12 credits; a window counts at most 9e12", async () => {
      const { send } = await org({
        features: [{ slug: "gen", name: "Generations", type: "metered" }],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 1e12 }] }],
        plans: [{ slug: "open", name: "Open", autoEnable: true, features: [{ slug: "cr", limit: null }] }]
      })
      const ask = (path: string, value: number) =>
        send(path, { customer: "x", feature: "gen", value, customerData: {} })
      expect((await ask("/v1/check", 1)).body).toMatchObject({ allowed: true })
      const tooDear = await ask("/v1/check", 1.000001)
      expect(tooDear).toMatchObject({ status: 400, body: { code: "invalid_request", details: [{ path: "value" }] } })
      expect(tooDear.body.details[0].message).toContain("1000001000000 credits")
      expect(tooDear.body.details[0].message).toContain("at most 1000000000000 credits")
      for (let i = 1; i <= 9; i++)
        expect((await ask("/v1/track", 1)).body).toMatchObject({ allowed: true, usage: i * 1e12 })
      // The window holds 9e12 credits now: one more micro-credit would pass what it counts. Refused, nothing recorded.
      for (const path of ["/v1/track", "/v1/check"]) {
        const past = await ask(path, 0.000001)
        expect(past).toMatchObject({ status: 400, body: { code: "invalid_request", details: [{ path: "value" }] } })
        expect(past.body.details[0].message).toContain("usage of this reset window past 9000000000000 credits")
      }
      expect((await ask("/v1/check", 0)).body).toMatchObject({ allowed: true, usage: 9e12 })
    })

    test("value × creditCost is drawn exactly past 2^53 micro-units: balance, event and answer agree", async () => {
      const { id, send } = await org({
        features: [{ slug: "gen", name: "Generations", type: "metered" }],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 3333333333.333333 }] }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "cr", limit: 1e12 }] }]
      })
      expect(
        (await send("/v1/track", { customer: "x", feature: "gen", value: 3, customerData: {} })).body
      ).toMatchObject({ allowed: true, usage: 9999999999.999999 })
      const [balance] = await sql(
        (s) => s`SELECT CAST(used AS TEXT) AS used FROM balances WHERE organization_id = ${id}`
      )
      const [event] = await sql(
        (s) => s`SELECT CAST(cost AS TEXT) AS cost, CAST(from_plan AS TEXT) AS from_plan
        FROM usage_events WHERE organization_id = ${id}`
      )
      // 9,999,999,999.999999 credits: a double holds 10,000,000,000 or 9,999,999,999.999998, never this.
      expect({ used: balance!.used, cost: event!.cost, fromPlan: event!.fromPlan }).toEqual({
        used: "9999999999999999",
        cost: "9999999999999999",
        fromPlan: "9999999999999999"
      })
    })

    test("a grant or a purchase that would overfill a balance is a 400, before any payment", async () => {
      const { id, send } = await org({
        defaultProvider: "simulated",
        features: [{ slug: "gen", name: "Generations", type: "metered" }],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 1 }] }],
        creditPacks: [
          { slug: "huge", name: "Huge", credits: 1e12, price: 1, currency: "NGN", creditSystem: "cr" },
          { slug: "milli", name: "Milli", credits: 1e9, price: 1, currency: "NGN", creditSystem: "cr" }
        ],
        plans: []
      })
      expect((await send("/v1/customers", { id: "x", email: "x@example.com" })).status).toBe(200)
      // 1e9 × 1000 = 1e12: the bound itself fits; 1e12 × 2 does not, whatever the balance.
      expect((await send("/v1/addon", { customer: "x", pack: "milli", quantity: 1000 })).body).toMatchObject({
        requiresCheckout: true,
        credits: 1e12
      })
      const double = await send("/v1/addon", { customer: "x", pack: "huge", quantity: 2 })
      expect(double).toMatchObject({ status: 400, body: { code: "invalid_request", details: [{ path: "quantity" }] } })
      expect(double.body.details[0].message).toContain("past 1000000000000")

      const grant = (amount: number, kind: CreditKind = "addon") =>
        server.run(Effect.either(Effect.flatMap(Credits, (credits) => credits.grant(id, "x", "cr", amount, kind))))
      expect(await grant(1e12)).toMatchObject({ _tag: "Right", right: { addonBalance: 1e12 } })
      expect(await grant(0.000001)).toMatchObject({
        _tag: "Left",
        left: { _tag: "InvalidInput", issues: [{ path: "amount" }] }
      })
      expect(await grant(1e12 + 1, "bonus")).toMatchObject({
        _tag: "Left",
        left: { _tag: "InvalidInput", issues: [{ path: "amount" }] }
      })
      expect(await grant(1e12, "bonus")).toMatchObject({
        _tag: "Right",
        right: { bonusBalance: 1e12, addonBalance: 1e12 }
      })

      const checkouts = () => sql((s) => s`SELECT id FROM checkouts WHERE organization_id = ${id}`)
      const before = (await checkouts()).length
      const full = await send("/v1/addon", { customer: "x", pack: "milli", quantity: 1 })
      expect(full).toMatchObject({ status: 400, body: { code: "invalid_request", details: [{ path: "quantity" }] } })
      expect(full.body.message).toContain(
        "would bring the purchased credits of 'cr' to 1001000000000, past 1000000000000"
      )
      expect((await checkouts()).length).toBe(before)
      // Both balances at their bound are drawn as usual.
      expect((await send("/v1/track", { customer: "x", feature: "gen", value: 9e9 })).body).toMatchObject({
        allowed: true,
        code: "addon_credits_used"
      })
    })

    test("a 15-minute rollup past what a BIGINT holds is held at its maximum: never a 5xx, the events exact", async () => {
      const { id, apiKey, send } = await org({
        features: [
          { slug: "seats", name: "Seats", type: "metered", meterType: "non_consumable" },
          { slug: "tok", name: "Tokens", type: "metered" }
        ],
        plans: [
          {
            slug: "p",
            name: "P",
            autoEnable: true,
            features: [
              { slug: "seats", limit: null },
              { slug: "tok", limit: null }
            ]
          }
        ]
      })
      const INT64_MAX = "9223372036854775807"
      // Each path that writes a rollup: a non-consumable's event, the balance writer's step, an idempotent track.
      const tracks: Array<[string, Record<string, string>]> = [
        ["seats", {}],
        ["tok", {}],
        ["tok", { "idempotency-key": "k" }]
      ]
      for (const [feature, headers] of tracks) {
        expect((await send("/v1/track", { customer: "c", feature, value: 1, customerData: {} })).status).toBe(200)
        // 1,025 tracks of 9e9 in one quarter of an hour, at once.
        await sql(
          (s) => s`UPDATE usage_rollups SET value = ${"9223372036854775000"}
          WHERE organization_id = ${id} AND value < ${"9000000000000000000"}`
        )
        const r = await server.fetch("/v1/track", {
          method: "POST",
          apiKey,
          headers,
          body: JSON.stringify({ customer: "c", feature, value: 9e9 })
        })
        expect({ feature, headers, status: r.status }).toEqual({ feature, headers, status: 200 })
      }
      const rollups = await sql(
        (s) => s`SELECT CAST(value AS TEXT) AS value FROM usage_rollups WHERE organization_id = ${id}`
      )
      expect(rollups.map((r: any) => r.value)).toEqual([INT64_MAX, INT64_MAX])
      const events = await sql(
        (s) => s`SELECT CAST(value AS TEXT) AS value FROM usage_events WHERE organization_id = ${id}`
      )
      expect(events.map((e: any) => e.value).sort()).toEqual([
        ...Array(3).fill("1000000"),
        ...Array(3).fill("9000000000000000")
      ])
      expect((await send("/v1/customers/c/usage/history?range=7d")).status).toBe(200)
    })

    test("the usage of an unbilled line adds up exactly past 2^63 micro-units (SQLite's SUM would fail there)", async () => {
      const { id } = await org({ features: [{ slug: "t", name: "T", type: "metered" }], plans: [] })
      // Ten events of the largest cost one request may have (1e12 credits): 1e19 micro-units in all.
      await sql((s) =>
        Effect.forEach(
          Array.from({ length: 10 }, (_, i) => i),
          (i) =>
            s`INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
            from_plan, from_bonus, from_addon, overage, billable, metadata, invoice_id, created_at, plan_id)
          VALUES (${id}, ${`evt_${i}`}, 'cus_x', 'feat_x', 'crs_x', NULL, 1000000, ${"1000000000000000000"}, 0, 0, 0, 0,
            1, '{}', NULL, ${1000 + i}, NULL)`,
          { discard: true }
        )
      )
      const events = await server.run(Effect.flatMap(InvoicesRepo, (repo) => repo.listUnbilled(id, "cus_x")))
      const nothing = { featuresById: new Map(), creditSystemsById: new Map(), plansById: new Map() }
      const [line] = rateUnbilled(nothing, events)[0]!.lines
      expect(format(line!.recorded)).toBe("10000000000000")
    })

    test("values stored before the bounds: reported (organization, table, row, field), read as their bound, never a 5xx", async () => {
      const { id, apiKey, send } = await org({
        defaultProvider: "simulated",
        features: [
          { slug: "t", name: "T", type: "metered" },
          { slug: "gen", name: "Gen", type: "metered" }
        ],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 1 }] }],
        creditPacks: [{ slug: "pk", name: "Pack", credits: 10, price: 100, currency: "NGN", creditSystem: "cr" }],
        plans: [
          {
            slug: "free",
            name: "Free",
            autoEnable: true,
            currency: "NGN",
            features: [
              { slug: "t", limit: 5, overage: "charge", overagePrice: 1 },
              { slug: "cr", limit: 10 }
            ]
          }
        ]
      })
      expect((await send("/v1/customers", { id: "c", email: "c@example.com" })).status).toBe(200)
      expect((await send("/v1/customers/overage-limit", { customer: "c", maxOverageAmount: 500 })).status).toBe(200)
      expect(
        (
          await send("/v1/customers/feature-config", {
            customer: "c",
            feature: "t",
            overage: "charge",
            maxOverageUnits: 5
          })
        ).status
      ).toBe(200)
      expect((await send("/v1/track", { customer: "c", feature: "gen", value: 1 })).status).toBe(200)
      const bought = await send("/v1/addon", { customer: "c", pack: "pk", quantity: 1 })
      expect(bought.body.requiresCheckout).toBe(true)
      const customerId = (await send("/v1/customers/c")).body.id as string

      // What the service accepted before numbers had bounds, written as it was stored then.
      const sqlite = database.name === "sqlite"
      await sql((s) =>
        Effect.gen(function* () {
          const [plan] = yield* s<any>`SELECT id, features FROM plans WHERE organization_id = ${id}`
          const features = JSON.parse(plan.features)
          features[0].limit = 1e100
          features[0].overagePrice = "1e+100"
          features[1].limit = 1e308
          yield* s`UPDATE plans SET features = ${JSON.stringify(features)}, trial_days = 99999999 WHERE organization_id = ${id}`
          yield* s`UPDATE credit_systems SET features = ${JSON.stringify([{ feature: "gen", creditCost: 1e100 }])} WHERE organization_id = ${id}`
          yield* s`UPDATE credit_packs SET credits = '1e+100', price = '1e+30' WHERE organization_id = ${id}`
          yield* s`UPDATE customers SET overage_max_amount = '1e+100' WHERE organization_id = ${id}`
          yield* s`UPDATE customer_feature_configs SET max_overage_units = 5000000000000000 WHERE organization_id = ${id}`
          // SQLite kept a purchase of 1e22 credits as a REAL; PostgreSQL a balance past the bound, in its BIGINT.
          yield* s.unsafe(
            `UPDATE balances SET addon = ${sqlite ? "1e22" : "9000000000000000000"} WHERE organization_id = '${id}'`
          )
          yield* s`UPDATE checkouts SET quantity = 2147483647 WHERE organization_id = ${id}`
          // As after a restart: the catalog is read again.
          yield* s`UPDATE organizations SET catalog_version = catalog_version + 1 WHERE id = ${id}`
        })
      )

      const found = (await server.run(findOutOfRange)).filter((f) => f.organizationId === id)
      expect(found.map((f) => `${f.table} ${f.field}`).sort()).toEqual([
        "balances addon",
        "checkouts quantity",
        "credit_packs credits",
        "credit_packs price",
        "credit_systems features[0].creditCost",
        "customer_feature_configs max_overage_units",
        "customers overage_max_amount",
        "plans features[0].limit",
        "plans features[0].overagePrice",
        "plans features[1].limit",
        "plans trial_days"
      ])
      expect(found.find((f) => f.table === "customers")).toMatchObject({
        id: customerId,
        value: "1e+100",
        bound: "more than 0 to 1000000000000, an integer"
      })

      // Migration 0010 reports this scan with one warning per row. (Its report alone: the whole migration would put
      // back its era's `commit_balances` on a database the other tests share.)
      const warnings: Array<Record<string, unknown>> = []
      // In place of the service's JSON logger (src/platform/logging.ts), at every level.
      const capture = Logger.make(({ annotations, logLevel, message }) => {
        if (logLevel._tag === "Warning")
          warnings.push({ message, ...Object.fromEntries(HashMap.toEntries(annotations)) })
      })
      await server.run(
        reportOutOfRange.pipe(
          Effect.locally(FiberRef.currentLoggers, HashSet.make(capture)),
          Effect.locally(FiberRef.currentMinimumLogLevel, LogLevel.All)
        )
      )
      const mine = warnings.filter((w) => w.organizationId === id)
      expect(mine).toHaveLength(found.length)
      expect(mine).toContainEqual(
        expect.objectContaining({
          message: ["stored value out of range"],
          table: "plans",
          field: "features[0].limit",
          value: "1e+100",
          bound: "0 to 1000000000000, at most 6 decimal places"
        })
      )

      // Every read still answers, with the bound in place of what cannot be computed with.
      const check = await send("/v1/check", { customer: "c", feature: "t", value: 1 })
      expect(check).toMatchObject({ status: 200, body: { allowed: true, limit: 1e12 } })
      expect((await send("/v1/track", { customer: "c", feature: "t", value: 9e9 })).body).toMatchObject({
        allowed: true,
        usage: 9e9
      })
      expect((await send("/v1/check", { customer: "c", feature: "gen", value: 1 })).body).toMatchObject({
        allowed: true,
        credits: { costPerUnit: 1e12, addonBalance: sqlite ? 1e12 : 9e12 }
      })
      const customer = await send("/v1/customers/c")
      expect(customer).toMatchObject({
        status: 200,
        body: { billing: { overageLimit: { maxOverageAmount: 1e12 }, featureConfigs: [{ maxOverageUnits: 1e9 }] } }
      })
      expect((await send("/v1/credit-packs")).body.data).toMatchObject([{ credits: 1e12, price: 1e12 }])
      expect((await send("/v1/credit-systems")).body.creditSystems).toMatchObject([
        { features: [{ creditCost: 1e12 }] }
      ])
      for (const path of [
        "/v1/customers",
        "/v1/subscriptions?customer=c",
        "/v1/billing/usage",
        "/v1/customers/c/usage/history",
        "/v1/wallet?customer=c"
      ]) {
        expect({ path, status: (await send(path)).status }).toEqual({ path, status: 200 })
      }
      // A purchase or a grant into a balance already past its bound is refused, not stored further past it.
      expect((await send("/v1/addon", { customer: "c", pack: "pk", quantity: 1 })).status).toBe(400)
      const attach = await server.fetch("/v1/attach", {
        method: "POST",
        apiKey,
        body: JSON.stringify({ customer: "d", product: "free", customerData: {} })
      })
      expect(attach.status).toBe(200)
      // 99,999,999 trial days (past what a date can hold) are read as 3,650.
      const trialEndsAt = Date.parse(((await attach.json()) as any).subscription.trialEndsAt)
      expect(Math.round((trialEndsAt - Date.now()) / 86_400_000)).toBe(3650)

      // The vendor's next sync of the catalog puts the catalog's numbers back within their bounds.
      await syncCatalog(server, apiKey, {
        defaultProvider: "simulated",
        features: [
          { slug: "t", name: "T", type: "metered" },
          { slug: "gen", name: "Gen", type: "metered" }
        ],
        creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 1 }] }],
        creditPacks: [{ slug: "pk", name: "Pack", credits: 10, price: 100, currency: "NGN", creditSystem: "cr" }],
        plans: [
          {
            slug: "free",
            name: "Free",
            autoEnable: true,
            currency: "NGN",
            features: [
              { slug: "t", limit: 5 },
              { slug: "cr", limit: 10 }
            ]
          }
        ]
      })
      const after = (await server.run(findOutOfRange)).filter((f) => f.organizationId === id).map((f) => f.table)
      expect([...new Set(after)].sort()).toEqual(["balances", "checkouts", "customer_feature_configs", "customers"])
    })
  })
}

describe("start-up after an upgrade: migration 0010 logs every stored value out of range and the service starts", () => {
  let dir: string
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test("one JSON warning per offending row, then the service answers", async () => {
    dir = mkdtempSync(join(tmpdir(), "billing-numbers-"))
    const env = { DATA_DIR: join(dir, "data"), ENCRYPTION_KEY: "1".repeat(64) }
    const created = JSON.parse(await cli(env, "org", "create", "acme", "--json"))
    // As a database upgraded from before the bounds: a limit of 1e100 stored, and 0010 not applied yet.
    const db = new Database(join(dir, "data", "billing.db"))
    const plan = JSON.stringify([
      {
        slug: "t",
        enabled: true,
        limit: 1e100,
        trialLimit: null,
        reset: "monthly",
        usageModel: "included",
        ratingModel: "package",
        pricePerUnit: null,
        billingUnits: 1,
        tiers: null,
        overage: "block",
        overagePrice: null,
        maxOverageUnits: null,
        creditCost: null
      }
    ])
    db.run(
      `INSERT INTO features (organization_id, id, slug, name, type, meter_type, unit, created_at, updated_at)
      VALUES (?, 'feat_1', 't', 'T', 'metered', 'consumable', NULL, 0, 0)`,
      [created.organization.id]
    )
    db.run(
      `INSERT INTO plans (organization_id, id, slug, name, description, price, currency, interval, billing_type, auto_enable,
        is_addon, plan_group, trial_days, provider, metadata, features, created_at, updated_at)
      VALUES (?, 'plan_1', 'free', 'Free', NULL, '0', '', '', 'recurring', 1, 0, NULL, NULL, NULL, '{}', ?, 0, 0)`,
      [created.organization.id, plan]
    )
    db.run(`UPDATE organizations SET catalog_version = catalog_version + 1 WHERE id = ?`, [created.organization.id])
    // The Migrator runs only migrations above the highest applied one: forget 0010 and every later one, and undo what
    // the later ones made (a later migration that creates something must be undone here too, and what one drops made
    // again).
    db.run(`DELETE FROM effect_sql_migrations WHERE migration_id >= 10`)
    db.run(`DROP TABLE payment_reversals`)
    db.run(`CREATE INDEX usage_events_customer ON usage_events (organization_id, customer_id, created_at)`)
    for (const table of [
      "outbound_events",
      "webhook_endpoints",
      "webhook_deliveries",
      "webhook_attempts",
      "dashboard_sessions",
      "dashboard_links",
      "dashboard_audit",
      "context_versions",
      "encryption_key_check",
      "credit_balances",
      "credit_balance_ledger",
      "billing_profiles",
      "customer_billing_details",
      "tax_rates",
      "coupons",
      "promotion_codes",
      "customer_discounts",
      "subscription_discounts",
      "portal_links",
      "portal_sessions",
      "portal_audit"
    ])
      db.run(`DROP TABLE ${table}`)
    for (const table of ["customers", "subscriptions", "customer_feature_configs"])
      for (const event of ["inserted", "updated", "deleted"]) db.run(`DROP TRIGGER ${table}_context_${event}`)
    db.run(`DROP INDEX subscriptions_pending_expiry`)
    for (const column of [
      "scheduled_plan_id",
      "scheduled_at",
      "pending_plan_id",
      "pending_invoice_id",
      "pending_expires_at",
      "reset_anchor"
    ])
      db.run(`ALTER TABLE subscriptions DROP COLUMN ${column}`)
    db.run(`ALTER TABLE invoices DROP COLUMN credit_applied`)
    for (const column of ["discount", "tax", "tax_note"]) db.run(`ALTER TABLE invoices DROP COLUMN ${column}`)
    for (const table of ["credit_notes", "credit_note_sequences"]) db.run(`DROP TABLE ${table}`)
    db.run(`ALTER TABLE plans DROP COLUMN portal`)
    db.run(`DROP INDEX payments_invoice`)
    for (const column of ["invoice_quote", "invoice_id"]) db.run(`ALTER TABLE payments DROP COLUMN ${column}`)
    db.close()

    const service = await startService({ ...env, LOG_LEVEL: "warn" })
    try {
      const check = await fetch(`${service.baseUrl}/v1/check`, {
        method: "POST",
        headers: { authorization: `Bearer ${created.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ customer: "c", feature: "t", customerData: {} })
      })
      expect({ status: check.status, body: await check.json() }).toMatchObject({
        status: 200,
        body: { allowed: true, limit: 1e12 }
      })
    } finally {
      await service.kill()
    }
    const warnings = service
      .output()
      .split("\n")
      .filter((line) => line.includes("stored value out of range"))
      .map((line) => JSON.parse(line))
    expect(warnings).toEqual([
      expect.objectContaining({
        logLevel: "WARN",
        annotations: expect.objectContaining({
          organizationId: created.organization.id,
          table: "plans",
          id: "plan_1",
          field: "features[0].limit",
          value: "1e+100"
        })
      })
    ])
    expect(JSON.parse(await cli(env, "out-of-range", "--json")).outOfRange).toMatchObject([
      { table: "plans", field: "features[0].limit" }
    ])
  }, 60_000)
})
