import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post } from "../../src/events/transport.ts"
import { startServer, type TestServer } from "../support/harness.ts"
import { json } from "./support.ts"

/**
 * What an attempt connects to and how it ends (decisions.md §11): on live only https to public addresses, checked on
 * the address the connection uses (a name resolving to a private address is refused at connect time, not only at
 * creation); redirects are answers, not followed; a deadline for the whole exchange; the answer's body truncated.
 */
const never = new AbortController().signal
const attempt = (url: string, publicOnly: boolean, timeoutMs = 2_000) =>
  post({ url, headers: { "content-type": "application/json" }, body: "{}", timeoutMs, publicOnly, signal: never })

describe("the delivery transport", () => {
  let hits = 0
  const local = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (request) => {
      hits++
      const path = new URL(request.url).pathname
      if (path === "/redirect") return new Response(null, { status: 302, headers: { location: "/elsewhere" } })
      if (path === "/long") return new Response("x".repeat(5_000))
      if (path === "/slow") return new Promise<Response>(() => undefined)
      return new Response("ok")
    }
  })
  afterAll(() => local.stop(true))
  const base = `http://127.0.0.1:${local.port}`

  test("live: https only, and never a private, loopback or IPv4-mapped address, however it is named", async () => {
    expect((await attempt(`${base}/`, true)).error).toContain("https only")
    for (const url of [
      `https://127.0.0.1:${local.port}/`,
      "https://10.1.2.3/",
      "https://169.254.169.254/latest/meta-data",
      "https://[::1]/",
      "https://[::ffff:127.0.0.1]/",
      "https://[::ffff:7f00:1]/"
    ]) {
      const outcome = await attempt(url, true)
      expect({ url, status: outcome.status, error: outcome.error }).toEqual({
        url,
        status: null,
        error: "refused: not a public address"
      })
    }
    // A name is checked on what the connection resolves it to: localhost is 127.0.0.1 (or ::1). The refusal names
    // no address, and a name that does not resolve reads the same: nothing maps the deployment's own network.
    for (const url of [`https://localhost:${local.port}/`, "https://vm/", "https://no-such-host.invalid/"]) {
      const named = await attempt(url, true)
      expect({ url, status: named.status, error: named.error }).toEqual({
        url,
        status: null,
        error: "refused: not a public address"
      })
    }
    expect(hits).toBe(0)
  })

  test("sandbox: any http(s) URL; a redirect is an answer, not followed; a deadline; the body truncated", async () => {
    expect(await attempt(`${base}/`, false)).toMatchObject({ status: 200, body: "ok" })
    const before = hits
    const redirected = await attempt(`${base}/redirect`, false)
    expect(redirected.status).toBe(302)
    expect(hits).toBe(before + 1)
    const long = await attempt(`${base}/long`, false)
    expect(long.body.length).toBe(1_024)
    const slow = await attempt(`${base}/slow`, false, 200)
    expect(slow).toMatchObject({ status: null, error: "no complete answer within 200 ms" })
    const refused = await attempt("http://127.0.0.1:1/", false)
    expect(refused.status).toBeNull()
    expect(refused.error).toBeString()
  })
})

describe("endpoints on a live deployment", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:", appEnv: "live" })
  })
  afterAll(() => server.close())

  test("an http URL or a private address is refused with 400 naming url; a public https URL is taken", async () => {
    const org = await server.createOrg()
    for (const url of [
      "http://example.com/hooks",
      "https://10.0.0.1/hooks",
      "https://[::ffff:127.0.0.1]/x",
      "https://localhost/x",
      // A trailing dot is the DNS root: the same names. RFC 6761's .localhost, the hosts file's loopback names, a
      // single label (an internal name), the private-use suffixes.
      "https://localhost./x",
      "https://LOCALHOST./x",
      "https://foo.localhost./x",
      "https://ip6-localhost/x",
      "https://ip6-loopback/x",
      "https://vm/x",
      "https://printer.local/x",
      "https://db.internal/x",
      "https://127.0.0.1./x"
    ]) {
      const answer = await json(server, org.apiKey, "/v1/webhook-endpoints", { body: { url } })
      expect({ url, status: answer.status, code: answer.body.code, path: answer.body.details?.[0]?.path }).toEqual({
        url,
        status: 400,
        code: "invalid_request",
        path: "url"
      })
    }
    const ok = await json(server, org.apiKey, "/v1/webhook-endpoints", { body: { url: "https://example.com/hooks" } })
    expect(ok.status).toBe(200)
    const moved = await json(server, org.apiKey, `/v1/webhook-endpoints/${ok.body.id}`, {
      body: { url: "http://example.com/hooks" }
    })
    expect(moved).toMatchObject({ status: 400, body: { code: "invalid_request" } })
  })
})
