import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import fc from "fast-check"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { buildWorld, orgState, type World } from "./support.ts"

/**
 * Hostile input (issue 6), property-based: for every route of the served OpenAPI document, invalid bodies, query
 * strings and path values — wrong types, missing fields, huge and negative numbers, NaN-like strings, deep nesting,
 * unicode, duplicate keys, bodies over 1 MiB — are answered with a 4xx in the spec's error body, never a 5xx, and
 * the organization's stored rows are the same afterwards. The invalid values are derived from the document's
 * schemas, so a new route or field is fuzzed without being listed here; `BASES` gives valid bodies that name the
 * organization's real objects, so each broken field is checked with everything else valid.
 */

const RUNS = 40

// ---------------------------------------------------------------------------------------------------------------
// JSON with what JSON.stringify cannot write: raw literals (1e999, deep nesting) and duplicate keys
// ---------------------------------------------------------------------------------------------------------------

class Raw {
  constructor(readonly text: string) {}
  toString() {
    return this.text.length > 60 ? `Raw(${this.text.slice(0, 30)}…${this.text.length})` : `Raw(${this.text})`
  }
}
class Dup {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

const encode = (value: unknown): string => {
  if (value instanceof Raw) return value.text
  if (value instanceof Dup) return `{${value.entries.map(([k, v]) => `${JSON.stringify(k)}:${encode(v)}`).join(",")}}`
  if (Array.isArray(value)) return `[${value.map(encode).join(",")}]`
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${encode(v)}`)
      .join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

// ---------------------------------------------------------------------------------------------------------------
// The document's schemas
// ---------------------------------------------------------------------------------------------------------------

type Node = Record<string, any>
interface Document {
  paths: Record<string, Record<string, Node>>
  components: { schemas: Record<string, Node> }
}

const refName = (node: Node | undefined): string | undefined => (node?.$ref ?? node?.allOf?.[0]?.$ref)?.split("/").pop()

const deref = (doc: Document, node: Node | undefined): Node => {
  if (node === undefined) return {}
  if (node.$ref !== undefined) return deref(doc, doc.components.schemas[refName(node)!])
  if (Array.isArray(node.allOf) && node.allOf.length === 1) {
    const { allOf, ...rest } = node
    return { ...deref(doc, allOf[0]), ...rest }
  }
  return node
}

/** The schema without its `null` alternative, and whether null is allowed. */
const nonNull = (doc: Document, node: Node): { node: Node; nullable: boolean } => {
  const n = deref(doc, node)
  if (!Array.isArray(n.anyOf)) return { node: n, nullable: false }
  const members: Array<Node> = n.anyOf.map((m: Node) => deref(doc, m))
  const nullable = members.some((m) => m.type === "null")
  const rest = members.filter((m) => m.type !== "null")
  return { node: rest.length === 1 ? rest[0]! : { anyOf: rest }, nullable }
}

const deepNesting = fc.integer({ min: 65, max: 4000 }).map((d) => new Raw("[".repeat(d) + "]".repeat(d)))
const junk = [
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  deepNesting
]
const nanLike = fc.constantFrom(
  "NaN",
  "Infinity",
  "-Infinity",
  "1e999",
  "0x10",
  "1_000",
  "",
  " 1",
  "１",
  "+1",
  "∞",
  "1,5",
  "12abc"
)
const unicode = (min: number, max: number) => fc.string({ unit: "grapheme", minLength: min, maxLength: max })
const hex = (minLength: number, maxLength: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength, maxLength })

/** Values that break one property, by its name, beyond what the document says (service-side rules). */
const EXTRA_INVALID: Record<string, fc.Arbitrary<unknown>> = {
  // decisions: more than 6 decimals or above 9,000,000,000 is a 400.
  value: fc.constantFrom(9_000_000_001, 1e15, 1.0000001, 0.1234567)
}

/**
 * Values that a field with schema `node` must refuse: wrong JSON types, out-of-range and NaN-like numbers, empty,
 * too long, off-pattern and off-enum strings, deep nesting. Undefined for a field that takes anything.
 */
const invalidFor = (doc: Document, raw: Node, field?: string): fc.Arbitrary<unknown> | undefined => {
  const name = refName(raw)
  const { node, nullable } = nonNull(doc, raw)
  const nul = nullable ? [] : [fc.constant(null)]
  const extra = field !== undefined && EXTRA_INVALID[field] !== undefined ? [EXTRA_INVALID[field]!] : []
  switch (node.type) {
    case "string": {
      const options: Array<fc.Arbitrary<unknown>> = [
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.boolean(),
        ...junk,
        ...nul
      ]
      if ((node.minLength ?? 0) >= 1) options.push(fc.constant(""))
      if (node.maxLength !== undefined) options.push(unicode(node.maxLength + 1, node.maxLength + 40))
      // Text that is not storable: U+0000 (PostgreSQL refuses it) and unpaired surrogates (not Unicode).
      options.push(fc.constantFrom("a\u0000b", "\u0000", "\ud800", "x\udfff", "fz@example.com\u0000"))
      if (Array.isArray(node.enum)) {
        options.push(
          unicode(0, 20).filter((s) => !node.enum.includes(s)),
          fc.constantFrom(...node.enum.map((e: string) => `${e.toUpperCase()} `))
        )
      }
      if (node.pattern !== undefined) {
        const pattern = new RegExp(node.pattern)
        options.push(unicode(0, 40).filter((s) => !pattern.test(s)))
      }
      if (name === "Url") {
        options.push(
          fc.constantFrom(
            "not a url",
            "javascript:alert(1)",
            "ftp://example.com/",
            "//example.com/x",
            "data:text/html,x"
          )
        )
      }
      if (name === "Email") {
        options.push(
          fc.constantFrom("plainaddress", "a@b", "@example.com", "a b@example.com", "ａ＠ｂ．ｃｏ", "a@b.c\u0000")
        )
      }
      return fc.oneof(...options, ...extra)
    }
    case "number":
    case "integer": {
      const options: Array<fc.Arbitrary<unknown>> = [
        nanLike,
        fc.boolean(),
        ...junk,
        ...nul,
        fc.constantFrom(new Raw("1e999"), new Raw("-1e999"), new Raw("-1e400"))
      ]
      if (node.minimum !== undefined) {
        options.push(fc.integer({ min: -(2 ** 31), max: Math.ceil(node.minimum) - 1 }), fc.constant(node.minimum - 0.5))
      }
      if (node.exclusiveMinimum !== undefined) {
        options.push(fc.integer({ min: -(2 ** 31), max: Math.floor(node.exclusiveMinimum) }))
      }
      if (node.maximum !== undefined) {
        const above = Math.floor(node.maximum) + 1
        options.push(
          above < 2 ** 31
            ? fc.integer({ min: above, max: 2 ** 31 })
            : fc.constantFrom(above, node.maximum * 10, 2 ** 53 + 2, 1e308)
        )
      }
      // The scale rule of src/api/numbers.ts, which only the description can state.
      if (String(node.description ?? "").includes("at most 6 decimal places")) {
        options.push(fc.constantFrom(0.1234567, 1.0000001, 1e-7))
      }
      if (node.type === "integer") {
        options.push(
          fc.integer({ min: 1, max: 1_000_000 }).map((n) => n + 0.5),
          fc.constant(2 ** 53 + 2)
        )
      }
      return fc.oneof(...options, ...extra)
    }
    case "boolean":
      return fc.oneof(fc.constantFrom("true", "false", 1, 0, "yes"), ...junk, ...nul, ...extra)
    case "object":
      return fc.oneof(
        unicode(0, 10),
        fc.integer(),
        fc.array(fc.integer(), { maxLength: 3 }),
        fc.boolean(),
        deepNesting,
        ...nul
      )
    case "array":
      return fc.oneof(
        unicode(0, 10),
        fc.integer(),
        fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2 }),
        fc.boolean(),
        ...nul
      )
    default:
      return undefined
  }
}

type Path = ReadonlyArray<string | number>

/** Every position in `value` (a valid body) with the schema that applies there. */
const positions = (
  doc: Document,
  schema: Node,
  value: unknown,
  path: Path = []
): Array<{ path: Path; schema: Node }> => {
  const here = [{ path, schema }]
  const node = nonNull(doc, schema).node
  if (Array.isArray(value) && node.type === "array" && value.length > 0) {
    return [...here, ...positions(doc, node.items, value[0], [...path, 0])]
  }
  if (value !== null && typeof value === "object" && !Array.isArray(value) && node.properties !== undefined) {
    return [
      ...here,
      ...Object.entries(value as Record<string, unknown>).flatMap(([key, v]) =>
        node.properties[key] === undefined ? [] : positions(doc, node.properties[key], v, [...path, key])
      )
    ]
  }
  return here
}

/** The required fields present in `value`, wherever an object with a `required` list is. */
const requiredPaths = (doc: Document, positionsList: ReadonlyArray<{ path: Path; schema: Node }>) =>
  positionsList.flatMap(({ path, schema }) => {
    const node = nonNull(doc, schema).node
    return Array.isArray(node.required) ? node.required.map((key: string) => [...path, key] as Path) : []
  })

const setAt = (value: unknown, path: Path, replacement: unknown): unknown => {
  if (path.length === 0) return replacement
  const [head, ...rest] = path
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, replacement) : v))
  return { ...(value as object), [head as string]: setAt((value as any)[head as string], rest, replacement) }
}

const deleteAt = (value: unknown, path: Path): unknown => {
  const [head, ...rest] = path
  if (rest.length === 0) {
    const { [head as string]: _, ...kept } = value as Record<string, unknown>
    return kept
  }
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? deleteAt(v, rest) : v))
  return { ...(value as object), [head as string]: deleteAt((value as any)[head as string], rest) }
}

/** A valid value for a schema, for routes without a hand-written base. */
const validFor = (doc: Document, raw: Node): unknown => {
  const name = refName(raw)
  const node = nonNull(doc, raw).node
  if (name === "Email") return "fuzz@example.com"
  if (name === "Url") return "https://example.com/back"
  if (Array.isArray(node.enum)) return node.enum[0]
  switch (node.type) {
    case "string":
      return "x".repeat(Math.max(1, node.minLength ?? 1))
    case "number":
    case "integer":
      return node.minimum ?? (node.exclusiveMinimum !== undefined ? node.exclusiveMinimum + 1 : 1)
    case "boolean":
      return false
    case "array":
      return []
    case "object":
      return Object.fromEntries((node.required ?? []).map((k: string) => [k, validFor(doc, node.properties[k])]))
    default:
      return null
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Valid requests naming the organization's real objects; each case breaks one thing in them
// ---------------------------------------------------------------------------------------------------------------

const fuzzCatalog = {
  defaultProvider: "simulated",
  features: [{ slug: "fz-feature", name: "Fuzz", type: "metered", meterType: "consumable", unit: "u" }],
  creditSystems: [
    { slug: "fz-credits", name: "Fuzz credits", description: "d", features: [{ feature: "fz-feature", creditCost: 2 }] }
  ],
  creditPacks: [
    {
      slug: "fz-pack",
      name: "Pack",
      description: "d",
      credits: 10,
      price: 100,
      currency: "NGN",
      creditSystem: "fz-credits",
      provider: "simulated",
      metadata: {},
      isActive: true
    }
  ],
  plans: [
    {
      slug: "fz-plan",
      name: "Plan",
      description: "d",
      price: 1000,
      currency: "NGN",
      interval: "monthly",
      billingType: "recurring",
      autoEnable: false,
      isAddon: false,
      planGroup: "fz",
      trialDays: 0,
      provider: "simulated",
      metadata: {},
      features: [
        {
          slug: "fz-feature",
          enabled: true,
          limit: 10,
          trialLimit: 1,
          reset: "monthly",
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
    }
  ]
}

interface Valid {
  readonly path: Record<string, string>
  readonly query?: Record<string, string>
  readonly body?: unknown
}

const basesFor = (w: World): Record<string, Valid> => {
  const c1 = w.customers[0]!.externalId
  const p = w.prefix
  const back = "https://example.com/back"
  return {
    "POST /v1/customers/{id}/discount": { path: { id: c1 }, body: { coupon: `${p}off` } },
    "DELETE /v1/customers/{id}/discount": { path: { id: c1 } },
    "POST /v1/customers": {
      path: {},
      body: { id: "fz-new", email: "fz-new@example.com", name: "New", metadata: { a: 1 } }
    },
    "GET /v1/customers": {
      path: {},
      query: { limit: "10", offset: "0", search: "fz", email: "a@b.co", externalId: "x" }
    },
    "GET /v1/customers/{id}": { path: { id: c1 } },
    "POST /v1/customers/overage-limit": {
      path: {},
      body: { customer: c1, maxOverageAmount: 100, onLimitReached: "block" }
    },
    "POST /v1/customers/feature-config": {
      path: {},
      body: { customer: c1, feature: `${p}tokens`, overage: "charge", maxOverageUnits: 10 }
    },
    "POST /v1/check": {
      path: {},
      body: {
        customer: c1,
        feature: `${p}tokens`,
        value: 1,
        sendEvent: true,
        customerData: { email: "cd@example.com", name: "N", metadata: {} },
        entity: "e"
      }
    },
    "POST /v1/track": {
      path: {},
      body: {
        customer: c1,
        feature: `${p}tokens`,
        value: 1,
        customerData: { email: "cd@example.com" },
        metadata: { k: "v" }
      }
    },
    "POST /v1/sync": { path: {}, body: fuzzCatalog },
    "POST /v1/entities": {
      path: {},
      body: {
        customer: c1,
        feature: `${p}seats`,
        entity: "fz-seat",
        name: "Seat",
        email: "seat@example.com",
        metadata: {}
      }
    },
    "POST /v1/entities/remove": { path: {}, body: { customer: c1, feature: `${p}seats`, entity: w.entity } },
    "POST /v1/attach": {
      path: {},
      body: {
        customer: c1,
        product: `${p}basic`,
        customerData: { email: "cd@example.com" },
        callbackUrl: back,
        coupon: `${p}off`
      }
    },
    "POST /v1/attach/preview": {
      path: {},
      body: { customer: c1, product: `${p}basic`, when: "now", prorate: true, coupon: `${p}off` }
    },
    "GET /v1/subscriptions": { path: {}, query: { customer: c1 } },
    "POST /v1/subscriptions/{id}/checkout": { path: { id: w.subscriptions.pending! }, body: { callbackUrl: back } },
    "POST /v1/subscriptions/{id}/cancel": { path: { id: w.subscriptions.active! } },
    "POST /v1/subscriptions/{id}/cancel-change": { path: { id: w.subscriptions.active! } },
    "POST /v1/subscriptions/{id}/resume": { path: { id: w.subscriptions.active! } },
    "POST /v1/billing/invoice": { path: {}, body: { customer: c1 } },
    "GET /v1/billing/invoices": { path: {}, query: { customer: c1 } },
    "GET /v1/billing/usage": { path: {}, query: { customer: c1 } },
    "POST /v1/billing/invoice/{id}/pay": { path: { id: w.invoice!.id }, body: { callbackUrl: back } },
    "GET /v1/billing/invoices/{id}/pdf": { path: { id: w.invoice!.id } },
    "POST /v1/billing/invoices/{id}/refund": { path: { id: w.invoice!.id }, body: { amount: 1, reason: "r" } },
    "GET /v1/billing/credit-notes": { path: {}, query: { invoice: w.invoice!.id } },
    "GET /v1/billing/credit-notes/{id}/pdf": { path: { id: w.creditNote ?? "cn_none" } },
    "POST /v1/addon": {
      path: {},
      body: { customer: c1, pack: `${p}small`, quantity: 1, currency: "NGN", metadata: {}, callbackUrl: back }
    },
    "POST /v1/wallet/setup": { path: {}, body: { customer: c1, callbackUrl: back, provider: "simulated" } },
    "POST /v1/wallet/remove": { path: {}, body: { customer: c1, id: w.paymentMethod! } },
    "POST /v1/wallet/default": { path: {}, body: { customer: c1, id: w.paymentMethod! } },
    "GET /v1/wallet": { path: {}, query: { customer: c1 } },
    "POST /v1/portal/sessions": { path: {}, body: { customer: c1, returnUrl: back } },
    "POST /v1/webhook-endpoints": {
      path: {},
      body: { url: "https://example.com/fz-hooks", events: ["invoice.paid", "customer.created"], description: "fz" }
    },
    "GET /v1/webhook-endpoints": { path: {}, query: { limit: "10", startingAfter: "whe_zzzzzzzzzz" } },
    "GET /v1/webhook-endpoints/{id}": { path: { id: w.webhookEndpoints[0] } },
    "POST /v1/webhook-endpoints/{id}": {
      path: { id: w.webhookEndpoints[0] },
      body: { url: "https://example.com/fz-moved", events: null, enabled: true, description: null }
    },
    "DELETE /v1/webhook-endpoints/{id}": { path: { id: w.webhookEndpoints[1] } },
    "POST /v1/webhook-endpoints/{id}/rotate-secret": { path: { id: w.webhookEndpoints[0] } },
    "GET /v1/webhook-endpoints/{id}/deliveries": { path: { id: w.webhookEndpoints[0] }, query: { limit: "5" } },
    "GET /v1/events": {
      path: {},
      query: { limit: "5", type: "customer.created", customer: c1, startingAfter: "msg_zzzzzzzzzz" }
    },
    "GET /v1/events/{id}": { path: { id: w.eventId } },
    "POST /v1/events/{id}/resend": { path: { id: w.eventId }, body: { endpoint: w.webhookEndpoints[0] } },
    "GET /v1/customers/{id}/usage/history": {
      path: { id: c1 },
      query: {
        range: "custom",
        granularity: "week",
        feature: `${p}tokens`,
        groupBy: "feature",
        timezone: "Africa/Lagos",
        from: "2025-01-01",
        to: "2025-02-01"
      }
    }
  }
}

/** Query values a parameter must refuse: by its schema, and a few by name (calendar dates, zones). */
const invalidParam = (doc: Document, param: Node): fc.Arbitrary<string | ReadonlyArray<string>> => {
  const schema = deref(doc, param.schema)
  const options: Array<fc.Arbitrary<string | ReadonlyArray<string>>> = [
    // A repeated parameter is an array, never a valid single value.
    fc.tuple(fc.constant("1"), unicode(1, 8)).map(([a, b]) => [a, b] as const),
    fc.constantFrom("a\u0000", "\u0000")
  ]
  if (String(schema.description ?? "").includes("decoded into a number")) {
    options.push(fc.constantFrom("NaN", "Infinity", "1e999", "abc", "1.5", "-1", " ", "", "１", "2e400", "-0.5", "1_0"))
  }
  if ((schema.minLength ?? 0) >= 1) options.push(fc.constant(""))
  if (schema.maxLength !== undefined) options.push(unicode(schema.maxLength + 1, schema.maxLength + 40))
  if (Array.isArray(schema.enum)) options.push(unicode(0, 12).filter((s) => !schema.enum.includes(s)))
  if (schema.pattern !== undefined) {
    const pattern = new RegExp(schema.pattern)
    options.push(unicode(0, 20).filter((s) => !pattern.test(s)))
  }
  if (param.name === "from" || param.name === "to")
    options.push(fc.constantFrom("2024-02-30", "0000-00-00", "2024-13-01", "1969-12-31"))
  if (param.name === "timezone") {
    options.push(
      unicode(1, 30).filter((s) => {
        try {
          new Intl.DateTimeFormat("en", { timeZone: s })
          return false
        } catch {
          return true
        }
      }),
      fc.constantFrom("+05:30", "UTC+1", "Mars/Olympus")
    )
  }
  return fc.oneof(...options)
}

const queryString = (params: Record<string, string | ReadonlyArray<string>>) => {
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) for (const one of typeof v === "string" ? [v] : v) search.append(k, one)
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

const fill = (template: string, values: Record<string, string>) =>
  template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? "x"))

/** Path values that name nothing: random unicode, traversal, encodings, very long. */
const hostilePathValue = fc.oneof(
  // A "." or ".." segment (also as %2E) is resolved away by the client's URL parser, so it never reaches the service:
  // the random ones exclude them (a generated "." once made `/v1/events/.` the list route's 200).
  unicode(1, 40).filter((v) => v !== "." && v !== ".."),
  fc.constantFrom(
    "...",
    "..%2F",
    "%",
    "%2F",
    "a/b",
    "null",
    "undefined",
    "0",
    "-1",
    "NaN",
    "' OR 1=1 --",
    "\u0000",
    " ",
    "😀",
    "ℌ𝔢𝔩𝔩𝔬"
  ),
  fc.integer({ min: 300, max: 6000 }).map((n) => "x".repeat(n))
)

// ---------------------------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------------------------

/** A 4xx whose body is exactly the spec's error body; throws (for fast-check) otherwise. */
const expectErrorBody = async (response: Response, context: string) => {
  const text = await response.text()
  const fail = (why: string) => {
    throw new Error(`${context}: ${why}: ${response.status} ${text.slice(0, 400)}`)
  }
  if (response.status < 400 || response.status > 499) fail("not a 4xx")
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    fail("body is not JSON")
  }
  if (
    body.success !== false ||
    typeof body.error !== "string" ||
    typeof body.code !== "string" ||
    typeof body.message !== "string"
  ) {
    fail("not the error body")
  }
  const extra = Object.keys(body).filter((k) => !["success", "error", "code", "message", "details"].includes(k))
  if (extra.length > 0) fail(`extra fields ${extra.join(",")}`)
  if (body.details !== undefined && !Array.isArray(body.details)) fail("details is not a list")
}

const routesOf = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      route: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      operation
    }))
  )

for (const database of databases()) {
  describe(`hostile input on ${database.name}`, () => {
    let server: TestServer
    let world: World
    let doc: Document
    beforeAll(async () => {
      server = await startServer(database.config)
      world = await buildWorld(server, { prefix: "h-", payments: true })
      // Provider accounts of its own, so webhook signature checks of every kind run (after the world's payments).
      await server.run(
        Effect.flatMap(ProviderAccounts, (accounts) =>
          Effect.all([
            accounts.set(world.org.id, "paystack", {
              secretKey: "sk_test_hostile",
              webhookSecret: null,
              baseUrl: "http://127.0.0.1:9"
            }),
            accounts.set(world.org.id, "stripe", {
              secretKey: "sk_test_hostile",
              webhookSecret: "whsec_hostile",
              baseUrl: "http://127.0.0.1:9"
            })
          ])
        )
      )
      doc = (await (await server.fetch("/openapi.json")).json()) as Document
    }, 60_000)
    afterAll(() => server.close())

    const send = (method: string, path: string, body?: string | Uint8Array, headers: Record<string, string> = {}) =>
      server.fetch(path, {
        method,
        ...(path.startsWith("/v1/") ? { apiKey: world.org.apiKey } : {}),
        ...(body === undefined ? {} : { body }),
        headers
      })

    /** Runs `check` and shows the organization's rows did not change. */
    const unchanged = async (check: () => Promise<void>) => {
      const before = await orgState(server, world.org.id)
      await check()
      expect(await orgState(server, world.org.id)).toEqual(before)
    }

    const apiRoutes = () => routesOf(doc).filter((r) => r.path.startsWith("/v1/"))

    test("the walk covers the document", () => {
      const bases = basesFor(world)
      const routes = routesOf(doc).map((r) => r.route)
      expect(routes.length).toBeGreaterThan(20)
      // Hand-written bases that no longer match a route are stale.
      expect(Object.keys(bases).filter((r) => !routes.includes(r))).toEqual([])
    })

    test("every hand-written base request is valid (so each case breaks exactly what it says)", async () => {
      // On a twin organization: the bases are real requests and would change the fuzzed one.
      const twin = await buildWorld(server, { prefix: "h-", payments: true })
      const bases = basesFor(twin)
      for (const { route, method, path } of apiRoutes()) {
        const valid = bases[route]
        if (valid === undefined) continue
        const target = fill(path, valid.path) + queryString(valid.query ?? {})
        // With a field no schema names: unknown fields are ignored, as the document says (decisions.md §1).
        const body =
          typeof valid.body === "object" && valid.body !== null && !Array.isArray(valid.body)
            ? { ...valid.body, sdkOnlyField: { sent: "by another client" } }
            : valid.body
        const response = await server.fetch(target, {
          method,
          apiKey: twin.org.apiKey,
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        const text = await response.text()
        expect({ route, status: response.status, text: response.status < 300 ? "" : text }).toEqual({
          route,
          status: 200,
          text: ""
        })
      }
    }, 60_000)

    test("invalid bodies: 4xx in the error body, nothing changed", async () => {
      const bases = basesFor(world)
      for (const { route, method, path, operation } of apiRoutes()) {
        const schema = operation.requestBody?.content?.["application/json"]?.schema
        if (schema === undefined) continue
        const valid = bases[route] ?? { path: {}, body: validFor(doc, schema) }
        const url = fill(path, valid.path) + queryString(valid.query ?? {})
        const all = positions(doc, schema, valid.body)
        const broken = all.flatMap(({ path: at, schema: s }) => {
          const invalid = invalidFor(
            doc,
            s,
            typeof at[at.length - 1] === "string" ? (at[at.length - 1] as string) : undefined
          )
          return invalid === undefined
            ? []
            : [invalid.map((v) => ({ why: `${at.join(".")} broken`, body: encode(setAt(valid.body, at, v)) }))]
        })
        const missing = requiredPaths(doc, all).map((at) =>
          fc.constant({ why: `${at.join(".")} missing`, body: encode(deleteAt(valid.body, at)) })
        )
        const topLevel = Object.keys((valid.body ?? {}) as object)
        const top = nonNull(doc, schema).node
        const duplicated = topLevel.flatMap((key) => {
          const invalid = invalidFor(doc, top.properties?.[key] ?? {}, key)
          return invalid === undefined
            ? []
            : [
                invalid.map((v) => ({
                  why: `${key} duplicated, the last invalid`,
                  body: encode(new Dup([...Object.entries(valid.body as object), [key, v]]))
                }))
              ]
        })
        const notAnObject = fc
          .oneof(
            fc.jsonValue({ maxDepth: 3 }).filter((v) => v === null || typeof v !== "object" || Array.isArray(v)),
            deepNesting,
            fc.constantFrom(
              new Raw("{"),
              new Raw('{"a":}'),
              new Raw("{'a':1}"),
              new Raw('{"a":1,}'),
              new Raw("NaN"),
              new Raw("\u0000")
            )
          )
          .map((v) => ({ why: "not an object", body: encode(v) }))
        const cases = fc.oneof(...broken, ...missing, ...duplicated, notAnObject)
        await unchanged(async () => {
          await fc.assert(
            fc.asyncProperty(cases, async ({ why, body }) => {
              await expectErrorBody(await send(method, url, body), `${route} (${why}) ${body.slice(0, 200)}`)
            }),
            { numRuns: RUNS }
          )
          // Fixed cases: over 1 MiB (declared and chunked), not JSON, invalid UTF-8 in broken JSON.
          const big = `{"customer":"${"x".repeat(1024 * 1024)}"}`
          const tooLarge = await send(method, url, big)
          expect(tooLarge.status).toBe(413)
          await expectErrorBody(tooLarge, `${route} over 1 MiB`)
          const chunked = new ReadableStream({
            start(controller) {
              for (let i = 0; i < big.length; i += 65536)
                controller.enqueue(new TextEncoder().encode(big.slice(i, i + 65536)))
              controller.close()
            }
          })
          const tooLargeChunked = await server.fetch(url, { method, apiKey: world.org.apiKey, body: chunked })
          expect(tooLargeChunked.status).toBe(413)
          await expectErrorBody(tooLargeChunked, `${route} chunked over 1 MiB`)
          await expectErrorBody(
            await send(method, url, "customer=x", { "content-type": "text/plain" }),
            `${route} text/plain`
          )
          await expectErrorBody(
            await send(method, url, new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x7d])),
            `${route} invalid UTF-8`
          )
        })
      }
    }, 120_000)

    test("invalid query strings: 4xx in the error body, nothing changed", async () => {
      const bases = basesFor(world)
      await unchanged(async () => {
        for (const { route, method, path, operation } of apiRoutes()) {
          const params = (operation.parameters ?? []).filter((p: Node) => p.in === "query") as Array<Node>
          if (params.length === 0) continue
          const valid = bases[route]
          expect({ route, base: valid !== undefined }).toEqual({ route, base: true })
          const url = fill(path, valid!.path)
          const one = fc
            .constantFrom(...params)
            .chain((param) => invalidParam(doc, param).map((value) => ({ ...valid!.query, [param.name]: value })))
          const required = params
            .filter((p) => p.required)
            .map((p) => {
              const { [p.name]: _, ...rest } = valid!.query ?? {}
              return fc.constant(rest as Record<string, string>)
            })
          // Raw percent-encoding garbage in a parameter that must parse (a number or one of a list).
          const strict = params.find((p) => ["limit", "offset", "range", "granularity", "groupBy"].includes(p.name))
          const mangled =
            strict === undefined
              ? []
              : [
                  fc
                    .constantFrom("%ZZ", "%", "%00", "%E0%A4%A", "%C0%AE", "%FF%FE")
                    .map((raw) => ({ raw: `${strict.name}=${raw}` }))
                ]
          await fc.assert(
            fc.asyncProperty(fc.oneof(one, ...required, ...mangled), async (query) => {
              const target =
                "raw" in query ? `${url}?${query.raw as string}` : url + queryString(query as Record<string, string>)
              await expectErrorBody(
                await send(method, target, method === "POST" ? "{}" : undefined),
                `${route} ${target.slice(0, 200)}`
              )
            }),
            { numRuns: RUNS }
          )
        }
      })
    }, 120_000)

    test("path values that name nothing: 4xx in the error body, nothing changed", async () => {
      const bases = basesFor(world)
      await unchanged(async () => {
        for (const { route, method, path } of apiRoutes()) {
          const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)
          if (names.length === 0) continue
          const valid = bases[route]!
          const body = valid.body === undefined ? undefined : JSON.stringify(valid.body)
          await fc.assert(
            fc.asyncProperty(fc.constantFrom(...names), hostilePathValue, async (name, value) => {
              const target = fill(path, { ...valid.path, [name]: value }) + queryString(valid.query ?? {})
              await expectErrorBody(await send(method, target, body), `${route} ${target.slice(0, 200)}`)
            }),
            { numRuns: RUNS }
          )
        }
      })
    }, 120_000)

    test("webhooks: unsigned, forged or garbage events are refused in the error body, nothing changed", async () => {
      const webhookRoutes = routesOf(doc).filter((r) => r.path.startsWith("/webhooks/"))
      expect(webhookRoutes.length).toBe(3)
      const org = fc.constantFrom(world.org.slug, world.org.id, "no-such-org", "sandbox")
      const provider = fc.oneof(fc.constantFrom("paystack", "stripe", "simulated"), unicode(1, 12))
      const body = fc.oneof(
        fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
        fc.constantFrom(
          JSON.stringify({
            event: "charge.success",
            data: { reference: world.pendingReference, amount: 1, currency: "NGN" }
          }),
          JSON.stringify({ id: "evt_1", type: "checkout.session.completed", data: { object: { id: "cs_1" } } }),
          JSON.stringify({
            id: "sim",
            type: "payment.succeeded",
            data: {
              reference: world.pendingReference,
              amount: 1,
              currency: "NGN",
              metadata: { organization_id: world.org.id }
            }
          })
        ),
        fc.uint8Array({ maxLength: 200 }),
        deepNesting.map((r) => r.text)
      )
      const signature = fc.oneof(
        fc.constant({}),
        hex(0, 200).map((s) => ({ "x-paystack-signature": s })),
        hex(64, 64).map((s) => ({ "x-simulated-signature": s })),
        fc
          .tuple(fc.integer({ min: 0, max: 2 ** 40 }), hex(0, 64))
          .map(([t, s]) => ({ "stripe-signature": `t=${t},v1=${s}` })),
        unicode(0, 40).map((s) => ({ "stripe-signature": s.replace(/[^\x20-\x7e]/g, "?") }))
      )
      await unchanged(async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom(...webhookRoutes),
            org,
            provider,
            body,
            signature,
            async (route, o, p, b, headers) => {
              const target = fill(route.path, { organizationId: o, provider: p })
              await expectErrorBody(
                await send("POST", target, b, { "content-type": "application/json", ...headers }),
                `${route.route} ${target} ${typeof b === "string" ? b.slice(0, 100) : "bytes"}`
              )
            }
          ),
          { numRuns: RUNS * 3 }
        )
      })
    }, 120_000)

    test("idempotency keys and oversized headers are refused in the error body", async () => {
      await unchanged(async () => {
        const body = JSON.stringify({
          customer: world.customers[0]!.externalId,
          feature: `${world.prefix}tokens`,
          value: 1
        })
        for (const route of ["/v1/track", "/v1/check"]) {
          for (const key of ["", "k".repeat(256)]) {
            await expectErrorBody(
              await send("POST", route, body, { "idempotency-key": key }),
              `${route} idempotency-key ${key.length}`
            )
          }
        }
        // Over our 8 KiB header limit (below Bun's 16 KiB): the error body, before anything runs.
        const bigHeader = await send("POST", "/v1/track", body, { "x-padding": "p".repeat(9000) })
        expect(bigHeader.status).toBe(400)
        await expectErrorBody(bigHeader, "9 KB header")
        const manyHeaders: Record<string, string> = {}
        for (let i = 0; i < 90; i++) manyHeaders[`x-h-${i}`] = "v".repeat(100)
        await expectErrorBody(await send("POST", "/v1/track", body, manyHeaders), "90 headers of 100 bytes")
      })
    })
  })
}
