import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { syncCatalog } from "./support/catalog.ts"
import { startServer, type TestServer } from "./support/harness.ts"

/**
 * `POST /v1/check` and `/v1/track` take a fast path past HttpApi's router (src/http/fastPath.ts). The same requests
 * against a service with it and one without it (BILLING_FAST_PATH=0) must get the same answers, byte for byte once
 * instants are set aside.
 */
const withoutFastPath = async () => {
  process.env.BILLING_FAST_PATH = "0"
  try {
    const server = await startServer({ dataDir: ":memory:" })
    // The handler is built on the first request; make it while the switch is set.
    await server.fetch("/health")
    return server
  } finally {
    delete process.env.BILLING_FAST_PATH
  }
}

const catalog = {
  features: [{ slug: "calls", name: "Calls", type: "metered" }],
  plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 3, overage: "block" }] }]
}

type Req = { path: string; body?: string; headers?: Record<string, string>; auth?: "key" | "none" | "bad" }

const requests: ReadonlyArray<Req> = [
  { path: "/v1/track", body: JSON.stringify({ customer: "c", feature: "calls", value: 2 }) },
  { path: "/v1/check", body: JSON.stringify({ customer: "c", feature: "calls", value: 2 }) },
  { path: "/v1/check", body: JSON.stringify({ customer: "c", feature: "calls", sendEvent: true }), headers: { "idempotency-key": "k1" } },
  { path: "/v1/check", body: JSON.stringify({ customer: "c", feature: "calls", sendEvent: true }), headers: { "idempotency-key": "k1" } },
  { path: "/v1/track", body: JSON.stringify({ customer: "c", feature: "calls", value: 5 }), headers: { "idempotency-key": "k1" } },
  { path: "/v1/track", body: JSON.stringify({ customer: "c", feature: "calls" }) },
  { path: "/v1/track", body: JSON.stringify({ customer: "ghost", feature: "calls" }) },
  { path: "/v1/track", body: JSON.stringify({ customer: "c", feature: "nope" }) },
  { path: "/v1/track", body: JSON.stringify({ customer: "", feature: 3, value: -1 }) },
  { path: "/v1/track", body: "{\"customer\": " },
  { path: "/v1/track", body: "customer=c", headers: { "content-type": "text/plain" } },
  { path: "/v1/check", body: JSON.stringify({ customer: "c", feature: "calls" }), auth: "none" },
  { path: "/v1/check", body: JSON.stringify({ customer: "c", feature: "calls" }), auth: "bad" },
  { path: "/v1/track", body: JSON.stringify({ customer: "c", feature: "calls", value: 1.0000001 }) }
]

/** Instants and generated ids differ between two runs; everything else must not. */
const normalise = (text: string) =>
  text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "<instant>").replace(/"requestId":"[^"]*"/g, "")

describe("the check/track fast path", () => {
  let fast: TestServer
  let slow: TestServer
  const keys: Record<string, string> = {}
  beforeAll(async () => {
    fast = await startServer({ dataDir: ":memory:" })
    slow = await withoutFastPath()
    for (const [name, server] of [["fast", fast], ["slow", slow]] as const) {
      const org = await server.createOrg()
      keys[name] = org.apiKey
      await syncCatalog(server, org.apiKey, catalog)
      await server.fetch("/v1/customers", { method: "POST", apiKey: org.apiKey, body: JSON.stringify({ id: "c", email: "c@example.com" }) })
    }
  })
  afterAll(async () => {
    await fast.close()
    await slow.close()
  })

  test("answers exactly as HttpApi does", async () => {
    for (const req of requests) {
      const answers = []
      for (const [name, server] of [["fast", fast], ["slow", slow]] as const) {
        const apiKey = req.auth === "none" ? undefined : req.auth === "bad" ? "sk_test_wrong" : keys[name]!
        const response = await server.fetch(req.path, {
          method: "POST",
          ...(apiKey === undefined ? {} : { apiKey }),
          ...(req.body === undefined ? {} : { body: req.body }),
          ...(req.headers === undefined ? {} : { headers: req.headers })
        })
        answers.push({ status: response.status, type: response.headers.get("content-type"), body: normalise(await response.text()) })
      }
      expect({ req, answer: answers[0] }).toEqual({ req, answer: answers[1] })
    }
  })
})
