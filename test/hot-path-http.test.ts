/**
 * `POST /v1/check`, `/v1/track` and `/v1/track/batch` are answered in front of HttpApi (src/http/hotPath.ts) when the
 * request is authenticated and well formed, and by HttpApi otherwise. The same requests, in the same order, against a
 * service with that path and one without it must get the same answers, byte for byte once instants are set aside; and
 * the well-formed ones must really have taken it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [
    { slug: "calls", name: "Calls", type: "metered" },
    { slug: "sso", name: "SSO", type: "boolean" },
    { slug: "renders", name: "Renders", type: "metered" }
  ],
  // The most a credit may cost: one render is a whole balance's worth (docs/decisions.md "Numbers").
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "renders", creditCost: 1e12 }] }],
  plans: [
    {
      slug: "p",
      name: "P",
      autoEnable: true,
      features: [{ slug: "calls", limit: 3, overage: "block" }, { slug: "sso" }, { slug: "credits", limit: null }]
    }
  ]
}

interface Req {
  readonly path: string
  readonly body?: string
  readonly headers?: Record<string, string>
  readonly auth?: "key" | "none" | "bad"
  /** The `Authorization` header for the organization's key, when not `Bearer <key>`. */
  readonly authorization?: (key: string) => string
  /** Whether the path in front of HttpApi answers it (else HttpApi does). */
  readonly hot: boolean
}

const body = (value: unknown) => JSON.stringify(value)

const requests: ReadonlyArray<Req> = [
  { path: "/v1/track", body: body({ customer: "c", feature: "calls", value: 2 }), hot: true },
  { path: "/v1/check", body: body({ customer: "c", feature: "calls", value: 2 }), hot: true },
  { path: "/v1/check", body: body({ customer: "c", feature: "sso" }), hot: true },
  {
    path: "/v1/check",
    body: body({ customer: "c", feature: "calls", sendEvent: true }),
    headers: { "idempotency-key": "k1" },
    hot: true
  },
  {
    path: "/v1/check",
    body: body({ customer: "c", feature: "calls", sendEvent: true }),
    headers: { "idempotency-key": "k1" },
    hot: true
  },
  // The same key with another request: 409 from the engine.
  {
    path: "/v1/track",
    body: body({ customer: "c", feature: "calls", value: 5 }),
    headers: { "idempotency-key": "k1" },
    hot: true
  },
  { path: "/v1/track", body: body({ customer: "c", feature: "calls" }), hot: true },
  { path: "/v1/track", body: body({ customer: "c", feature: "calls" }), hot: true },
  { path: "/v1/track", body: body({ customer: "ghost", feature: "calls" }), hot: true },
  {
    path: "/v1/track",
    body: body({ customer: "new", feature: "calls", customerData: { email: "new@example.com" } }),
    hot: true
  },
  { path: "/v1/check", body: body({ customer: "new", feature: "calls", value: 0 }), hot: true },
  { path: "/v1/track", body: body({ customer: "c", feature: "nope" }), hot: true },
  { path: "/v1/track", body: body({ customer: "c", feature: "calls", entity: "seat-1" }), hot: true },
  // Numbers outside their range (decisions.md §1) are the schema's refusals: HttpApi renders them.
  { path: "/v1/track", body: body({ customer: "c", feature: "calls", value: 1.0000001 }), hot: false },
  { path: "/v1/track", body: `{"customer":"c","feature":"calls","value":9000000001}`, hot: false },
  { path: "/v1/check", body: `{"customer":"c","feature":"calls","value":1e308}`, hot: false },
  { path: "/v1/check", body: `{"customer":"c","feature":"calls","value":9007199254740993}`, hot: false },
  {
    path: "/v1/check",
    body: `{"customer":"c","feature":"calls","value":0.123456789012345678901234567890}`,
    hot: false
  },
  { path: "/v1/check", body: `{"customer":"c","feature":"calls","value":-0}`, hot: true },
  { path: "/v1/check", body: `{"customer":"c","feature":"calls","value":9000000000}`, hot: true },
  // In range, but past a bound only the engine knows: the cost of one request, the usage of a window. Its 400.
  { path: "/v1/check", body: body({ customer: "c", feature: "renders", value: 2 }), hot: true },
  ...Array.from({ length: 9 }, () => ({
    path: "/v1/track",
    body: body({ customer: "c", feature: "renders", value: 1 }),
    hot: true
  })),
  { path: "/v1/track", body: body({ customer: "c", feature: "renders", value: 0.000001 }), hot: true },
  {
    path: "/v1/track",
    body: body({ customer: "c", feature: "renders", value: 0.000001 }),
    headers: { "idempotency-key": "k9" },
    hot: true
  },
  { path: "/v1/track", body: body({ customer: "c", feature: "calls", metadata: { run: 1 } }), hot: true },
  { path: "/v1/check", body: "{}", hot: false },
  { path: "/v1/track", body: body({ customer: "", feature: 3, value: -1 }), hot: false },
  { path: "/v1/track", body: '{"customer": ', hot: false },
  { path: "/v1/track", body: `{"customer":"c","feature":"calls","x":${"[".repeat(70)}${"]".repeat(70)}}`, hot: false },
  { path: "/v1/track", body: "customer=c", headers: { "content-type": "text/plain" }, hot: false },
  {
    path: "/v1/track",
    body: body({ customer: "c", feature: "calls" }),
    headers: { "idempotency-key": "" },
    hot: false
  },
  { path: "/v1/check", body: body({ customer: "c", feature: "calls" }), auth: "none", hot: false },
  { path: "/v1/check", body: body({ customer: "c", feature: "calls" }), auth: "bad", hot: false },
  { path: "/v1/check/", body: body({ customer: "c", feature: "calls" }), hot: false },
  // The bearer scheme in any case, with one or more spaces, is the key; any other spelling is a 401 from HttpApi.
  ...[(k: string) => `bearer ${k}`, (k: string) => `BEARER    ${k}`].map((authorization) => ({
    path: "/v1/check",
    body: body({ customer: "c", feature: "sso" }),
    authorization,
    hot: true
  })),
  ...[
    (k: string) => `Bear10 ${k}`,
    (k: string) => `Bearer${k}`,
    (k: string) => `Bearer\t${k}`,
    (k: string) => `Basic ${k}`,
    (k: string) => k,
    (k: string) => `Bearer ${k} ${k}`,
    (k: string) => `Bearer ${k},`
  ].map((authorization) => ({
    path: "/v1/track",
    body: body({ customer: "c", feature: "sso" }),
    authorization,
    hot: false
  })),
  // Batches: every item's answer as HttpApi encodes it, in the shapes the fast decoder takes and those it leaves to
  // the schema (customer data, metadata, a key the schema drops), and the bodies the schema refuses.
  ...[
    [
      { customer: "c", feature: "sso" },
      { customer: "c", feature: "calls", value: 0 }
    ],
    [
      { customer: "c", feature: "renders", value: 0.000001, entity: "seat-2" },
      { customer: "c", feature: "renders", value: 2 },
      { customer: "ghost", feature: "calls" },
      { customer: "c", feature: "nope" },
      { customer: "c", feature: "calls", value: 5 },
      { customer: "c", feature: "calls", timestamp: "2020-01-01T00:00:00Z" }
    ],
    [
      { customer: "c", feature: "renders", value: 0.000001, idempotencyKey: "b1" },
      { customer: "c", feature: "renders", value: 0.000001, idempotencyKey: "b1" },
      { customer: "c", feature: "renders", value: 0.000002, idempotencyKey: "b1" }
    ],
    [{ customer: "batch-new", feature: "calls", customerData: { email: "batch-new@example.com" } }],
    [{ customer: "c", feature: "renders", value: 0.000001, metadata: { run: 2 }, note: "dropped" }],
    // Items that fail the item schema, answered in their places (decisions.md §12).
    [{ customer: "c", feature: "calls", value: -1 }],
    [
      { customer: "c", feature: "calls" },
      { value: -5 },
      { customer: "c", feature: "calls", value: 1e13 },
      { customer: "c", feature: "calls", customerData: { email: "not an email" } },
      { customer: "c", feature: "calls" }
    ]
  ].map((events) => ({ path: "/v1/track/batch", body: body({ events }), hot: true })),
  { path: "/v1/track/batch", body: body({ events: [] }), hot: false },
  { path: "/v1/track/batch", body: body({ events: [{ customer: "c", feature: "calls" }, 5] }), hot: false },
  {
    path: "/v1/track/batch",
    body: body({ events: Array.from({ length: 1001 }, () => ({ customer: "c", feature: "sso" })) }),
    hot: false
  },
  { path: "/v1/track/batch", body: body({ events: [{ customer: "c", feature: "sso" }] }), auth: "bad", hot: false }
]

/** Instants and generated ids differ between two services; nothing else may. */
const normalise = (text: string) =>
  text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "<instant>").replace(/\b(cus|evt|sub)_[0-9a-z]+/g, "<$1>")

for (const database of databases()) {
  describe(`check, track and track/batch in front of HttpApi on ${database.name}`, () => {
    let hot: TestServer
    let plain: TestServer
    const keys = new Map<TestServer, string>()
    beforeAll(async () => {
      hot = await startServer(database.config)
      plain = await startServer(database.config, { hotPath: false })
      for (const server of [hot, plain]) {
        const org = await server.createOrg()
        keys.set(server, org.apiKey)
        await syncCatalog(server, org.apiKey, catalog)
        const created = await server.fetch("/v1/customers", {
          method: "POST",
          apiKey: org.apiKey,
          body: body({ id: "c", email: "c@example.com" })
        })
        expect(created.status).toBe(200)
      }
    })
    afterAll(async () => {
      await hot.close()
      await plain.close()
    })

    test("answers exactly as HttpApi does, and takes only the well-formed, authenticated requests", async () => {
      expect(plain.app.hotPathAnswers()).toBe(0)
      for (const req of requests) {
        const before = hot.app.hotPathAnswers()
        const answers = []
        for (const server of [hot, plain]) {
          const apiKey = req.auth === "none" ? undefined : req.auth === "bad" ? "sk_test_wrong" : keys.get(server)!
          const headers = {
            ...req.headers,
            ...(req.authorization === undefined ? {} : { authorization: req.authorization(keys.get(server)!) })
          }
          const response = await server.fetch(req.path, {
            method: "POST",
            ...(apiKey === undefined || req.authorization !== undefined ? {} : { apiKey }),
            ...(req.body === undefined ? {} : { body: req.body }),
            headers
          })
          answers.push({
            status: response.status,
            type: response.headers.get("content-type"),
            body: normalise(await response.text())
          })
        }
        expect({ req, answer: answers[0] }).toEqual({ req, answer: answers[1] })
        expect({ req, hot: hot.app.hotPathAnswers() - before }).toEqual({ req, hot: req.hot ? 1 : 0 })
      }
      expect(plain.app.hotPathAnswers()).toBe(0)
    })
  })
}

/**
 * Issue 37, item 3: one key is one credential however its header is spelt (the scheme's case, the spaces after it),
 * so the rate limit counts it once, on the direct endpoint and on HttpApi's routes alike; a header in another form
 * carries no key on either path (HttpApi's decoder alone would take whatever follows its first 7 characters).
 */
for (const database of databases()) {
  describe(`the Authorization header on both request paths on ${database.name}`, () => {
    let server: TestServer
    let key: string
    beforeAll(async () => {
      server = await startServer({ ...database.config, rateLimitRps: 1 })
      key = (await server.createOrg()).apiKey
    })
    afterAll(() => server.close())

    const track = (authorization: string) =>
      server.fetch("/v1/track", {
        method: "POST",
        headers: { authorization },
        body: body({ customer: "c", feature: "calls" })
      })
    const list = (authorization: string) => server.fetch("/v1/customers", { headers: { authorization } })

    test("only `Bearer <key>` carries the key: other spellings are 401 on both paths, and use no bucket", async () => {
      const statuses = []
      for (let i = 10; i < 30; i++) {
        statuses.push((await track(`Bear${i} ${key}`)).status, (await list(`Bear${i} ${key}`)).status)
      }
      statuses.push((await track(`Bearer${key}`)).status, (await list(`Token ${key}`)).status)
      expect(statuses).toEqual(statuses.map(() => 401))
      const refused = await list(`Bear10 ${key}`)
      expect(await refused.json()).toMatchObject({ success: false, code: "unauthorized" })
      // The key's own bucket is untouched: its burst of 2 is still there.
      expect((await list(`Bearer ${key}`)).status).toBe(200)
    })

    test("every spelling of one key counts against one bucket, on the direct endpoint and HttpApi alike", async () => {
      const other = (await server.createOrg()).apiKey
      const spellings = Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0 ? `Bearer${" ".repeat(i + 1)}${other}` : `${i % 3 === 0 ? "BEARER" : "bearer"} ${other}`
      )
      const statuses = []
      for (const [i, spelling] of spellings.entries()) {
        statuses.push((await (i % 4 < 2 ? track(spelling) : list(spelling))).status)
      }
      expect(statuses).toEqual([200, 200, ...Array.from({ length: 18 }, () => 429)])
    })
  })
}
