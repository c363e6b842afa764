import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { startServer, type TestServer } from "./support/harness.ts"

/** Every failure a caller can provoke answers the spec's error body with decisions.md §10's status. */
describe("the error model", () => {
  let server: TestServer
  let apiKey: string
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:" })
    apiKey = (await server.createOrg()).apiKey
  })
  afterAll(() => server.close())

  const expectError = async (response: Response, status: number, code: string) => {
    expect(response.status).toBe(status)
    expect(response.headers.get("content-type")).toContain("application/json")
    const body = (await response.json()) as Record<string, unknown>
    expect(body).toMatchObject({ success: false, code })
    expect(body.error).toBeString()
    expect(body.message).toBeString()
    expect(Object.keys(body).filter((k) => !["success", "error", "code", "message", "details"].includes(k))).toEqual([])
    return body
  }

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    server.fetch(path, { method: "POST", apiKey, body, headers })

  test("schema violations list every invalid field with its path", async () => {
    const body = await expectError(
      await post("/v1/customers", JSON.stringify({ email: "not-an-email", name: 7, metadata: "x" })),
      400,
      "invalid_request"
    )
    const details = body.details as Array<{ path: string; message: string }>
    expect(details.map((d) => d.path).sort()).toEqual(["email", "metadata", "name"])
    expect(details.find((d) => d.path === "email")?.message).toContain("email")
  })

  test("a missing required field is named", async () => {
    const body = await expectError(await post("/v1/customers", "{}"), 400, "invalid_request")
    expect(body.details).toEqual([{ path: "email", message: "is missing" }])
  })

  test("malformed JSON is 400", async () => {
    await expectError(await post("/v1/customers", '{"email": '), 400, "invalid_request")
  })

  test("a body that is not JSON is 400", async () => {
    await expectError(
      await post("/v1/customers", "email=a@b.co", { "content-type": "application/x-www-form-urlencoded" }),
      400,
      "invalid_request"
    )
    await expectError(await post("/v1/customers", "[1,2]"), 400, "invalid_request")
  })

  test("unknown routes and methods are 404 not_found", async () => {
    await expectError(await server.fetch("/v1/nothing-here", { apiKey }), 404, "not_found")
    await expectError(await server.fetch("/elsewhere"), 404, "not_found")
    await expectError(await server.fetch("/v1/customers", { method: "DELETE", apiKey }), 404, "not_found")
  })

  test("a body over 1 MiB is 413 payload_too_large", async () => {
    const big = JSON.stringify({ email: "a@b.co", metadata: { blob: "x".repeat(1024 * 1024) } })
    await expectError(await post("/v1/customers", big), 413, "payload_too_large")
  })

  test("responses carry a request id, echoing a well-formed one", async () => {
    const response = await server.fetch("/health", { headers: { "x-request-id": "abc-123" } })
    expect(response.headers.get("x-request-id")).toBe("abc-123")
    const generated = await server.fetch("/health", { headers: { "x-request-id": "bad id with spaces" } })
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
  })

  test("an unexpected failure is 500 with no stack, SQL or internals in the body", async () => {
    const scratch = await startServer({ dataDir: ":memory:" })
    try {
      const key = (await scratch.createOrg()).apiKey
      await scratch.app.runtime.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("DROP TABLE customers"))
      )
      const response = await scratch.fetch("/v1/customers", { apiKey: key })
      const text = await response.clone().text()
      await expectError(response, 500, "internal_error")
      expect(text).not.toMatch(/customers|SELECT|sqlite|at \w+ \(|\.ts:/i)
    } finally {
      await scratch.close()
    }
  })

  test("health and readiness need no key", async () => {
    expect(await (await server.fetch("/health")).json()).toEqual({ status: "ok" })
    expect(await (await server.fetch("/ready")).json()).toEqual({ status: "ready", database: "sqlite" })
  })
})

describe("chunked bodies", () => {
  test("a chunked body over 1 MiB is 413 too, and a small one is served", async () => {
    const server = await startServer({ dataDir: ":memory:" })
    try {
      const { apiKey } = await server.createOrg()
      const stream = (text: string) =>
        new ReadableStream({
          start(controller) {
            for (let i = 0; i < text.length; i += 65536)
              controller.enqueue(new TextEncoder().encode(text.slice(i, i + 65536)))
            controller.close()
          }
        })
      const big = JSON.stringify({ email: "a@b.co", metadata: { blob: "x".repeat(1024 * 1024) } })
      const tooLarge = await server.fetch("/v1/customers", { method: "POST", apiKey, body: stream(big) })
      expect(tooLarge.status).toBe(413)
      expect(await tooLarge.json()).toMatchObject({ code: "payload_too_large" })
      const small = await server.fetch("/v1/customers", {
        method: "POST",
        apiKey,
        body: stream(JSON.stringify({ email: "a@b.co" }))
      })
      expect(small.status).toBe(200)
    } finally {
      await server.close()
    }
  })
})
