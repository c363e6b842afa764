import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option } from "effect"
import { post, syncCatalog } from "./support/catalog.ts"
import { startServer, type TestServer } from "./support/harness.ts"

/**
 * One pipeline in production's configuration: with a rate limit and trace export on, check/track still take the
 * direct endpoint (derived from their HttpApi definition), the rate limit refuses every route alike, and the
 * traces arrive at the OTLP receiver with the request's span, sampled as configured.
 */
const catalog = {
  features: [{ slug: "api", name: "API", type: "metered" }],
  plans: [{ slug: "free", name: "Free", price: 0, autoEnable: true, features: [{ slug: "api", limit: 1000 }] }]
}

interface Receiver {
  readonly url: string
  readonly spanNames: () => Array<string>
  readonly stop: () => void
}

/** An OTLP/HTTP JSON receiver: collects the names of the spans it is sent. */
const startReceiver = (): Receiver => {
  const names: Array<string> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = (await request.json()) as {
        resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name: string }> }> }>
      }
      for (const r of body.resourceSpans ?? []) {
        for (const s of r.scopeSpans ?? []) for (const span of s.spans ?? []) names.push(span.name)
      }
      return new Response("{}", { headers: { "content-type": "application/json" } })
    }
  })
  return { url: `http://127.0.0.1:${server.port}`, spanNames: () => names, stop: () => server.stop(true) }
}

const waitFor = async (condition: () => boolean) => {
  for (let i = 0; i < 100 && !condition(); i++) await Bun.sleep(100)
}

describe("the pipeline with a rate limit and trace export", () => {
  let receiver: Receiver
  let server: TestServer
  beforeAll(async () => {
    receiver = startReceiver()
    server = await startServer({
      dataDir: ":memory:",
      rateLimitRps: 1,
      rateLimitBurst: 5,
      otlpEndpoint: Option.some(receiver.url),
      traceSampleRatio: 1
    })
  })
  afterAll(async () => {
    await server.close()
    receiver.stop()
  })

  test("check/track take the direct endpoint; the limit refuses them like any route; their spans are exported", async () => {
    const org = await server.createOrg()
    await syncCatalog(server, org.apiKey, catalog)
    const before = server.app.hotPathAnswers()
    const tracked = await post(server, org.apiKey, "/v1/track", {
      customer: "ada",
      feature: "api",
      customerData: { name: "Ada" }
    })
    expect(tracked.body).toMatchObject({ allowed: true, code: "tracked" })
    expect(server.app.hotPathAnswers()).toBe(before + 1)

    // The burst of 5 was: sync, track; three more, then refusals on check/track and on other routes alike.
    const answers = []
    for (let i = 0; i < 4; i++)
      answers.push(await post(server, org.apiKey, "/v1/check", { customer: "ada", feature: "api" }))
    const other = await server.fetch("/v1/customers", { apiKey: org.apiKey })
    expect(answers.slice(0, 3).map((a) => a.status)).toEqual([200, 200, 200])
    expect(answers[3]).toMatchObject({ status: 429, body: { code: "rate_limited" } })
    expect(other.status).toBe(429)
    expect(Number(other.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)

    await waitFor(() => receiver.spanNames().filter((n) => n === "http.server POST").length >= 2)
    const names = receiver.spanNames()
    expect(names.filter((n) => n === "http.server POST").length).toBeGreaterThanOrEqual(2)
    expect(names).toContain("sql.execute")
  }, 20_000)
})

describe("trace sampling", () => {
  let receiver: Receiver
  let server: TestServer
  beforeAll(async () => {
    receiver = startReceiver()
    server = await startServer({ dataDir: ":memory:", otlpEndpoint: Option.some(receiver.url), traceSampleRatio: 0 })
  })
  afterAll(async () => {
    await server.close()
    receiver.stop()
  })

  test("at ratio 0 nothing is exported, unless the caller's traceparent says sampled", async () => {
    const org = await server.createOrg()
    await syncCatalog(server, org.apiKey, catalog)
    for (let i = 0; i < 5; i++)
      await post(server, org.apiKey, "/v1/track", { customer: "bo", feature: "api", customerData: {} })
    await Bun.sleep(1500)
    expect(receiver.spanNames()).toEqual([])
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await post(server, org.apiKey, "/v1/track", { customer: "bo", feature: "api" }, { traceparent })
    await waitFor(() => receiver.spanNames().includes("http.server POST"))
    expect(receiver.spanNames()).toContain("http.server POST")
  }, 20_000)
})
