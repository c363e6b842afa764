import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { gunzipSync } from "node:zlib"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/** The dashboard's routes without a browser: who gets in, what is refused, what the pages are made of. */
for (const database of databases()) {
  describe(`dashboard routes on ${database.name}`, () => {
    let server: TestServer
    let org: { id: string; apiKey: string }
    let cookie: string
    let csrf: string
    beforeAll(async () => {
      server = await startServer(database.config)
      org = await server.createOrg()
      const signed = await server.fetch("/dashboard/sign-in", {
        method: "POST",
        headers: { origin: server.baseUrl },
        body: JSON.stringify({ key: org.apiKey })
      })
      expect(signed.status).toBe(200)
      cookie = signed.headers.get("set-cookie")!.split(";")[0]!
      const page = await (await server.fetch("/dashboard", { headers: { cookie } })).text()
      csrf = /name="csrf-token" content="([^"]+)"/.exec(page)![1]!
    })
    afterAll(() => server.close())

    test("without a session: pages go to sign-in, the JSON routes answer 401 with the error body", async () => {
      const page = await server.fetch("/dashboard/customers", { redirect: "manual" })
      expect(page.status).toBe(303)
      expect(page.headers.get("location")).toBe("/dashboard/sign-in")
      const api = await server.fetch("/dashboard/api/overview")
      expect(api.status).toBe(401)
      expect(await api.json()).toMatchObject({ success: false, error: "Unauthorized", code: "unauthorized" })
      // A forged or foreign cookie is no session.
      const forged = await server.fetch("/dashboard/api/overview", {
        headers: { cookie: `billing_dashboard=${org.id}.not-a-session` }
      })
      expect(forged.status).toBe(401)
      // A bad key signs nobody in, and says nothing about why.
      const bad = await server.fetch("/dashboard/sign-in", {
        method: "POST",
        headers: { origin: server.baseUrl },
        body: JSON.stringify({ key: "sk_test_nope" })
      })
      expect(bad.status).toBe(401)
      expect(bad.headers.get("set-cookie")).toBeNull()
    })

    test("sign-in from another origin is refused", async () => {
      const answer = await server.fetch("/dashboard/sign-in", {
        method: "POST",
        headers: { origin: "https://evil.example" },
        body: JSON.stringify({ key: org.apiKey })
      })
      expect(answer.status).toBe(403)
      expect(answer.headers.get("set-cookie")).toBeNull()
    })

    test("only the /v1 routes a page needs are reachable through a session", async () => {
      const get = (path: string) => server.fetch(`/dashboard/api${path}`, { headers: { cookie } })
      expect((await get("/v1/customers?limit=1")).status).toBe(200)
      expect((await get("/v1/billing/usage?customer=x")).status).toBe(404)
      const sync = await server.fetch("/dashboard/api/v1/sync", {
        method: "POST",
        headers: { cookie, origin: server.baseUrl, "x-csrf-token": csrf },
        body: JSON.stringify({ features: [] })
      })
      expect(sync.status).toBe(404)
      // A session is not a bearer key: /v1 itself still wants one.
      expect((await server.fetch("/v1/customers", { headers: { cookie } })).status).toBe(401)
    })

    test("odd paths are 404s in the error body; keys are listed without their hashes", async () => {
      const get = (path: string) => server.fetch(`/dashboard/api${path}`, { headers: { cookie } })
      const malformed = await get("/customers/%E0%A4%A/balances")
      expect(malformed.status).toBe(404)
      expect(await malformed.json()).toMatchObject({ success: false, code: "customer_not_found" })
      expect((await get("/customers/nobody/entities")).status).toBe(404)
      expect((await get("/nothing-here")).status).toBe(404)
      const keys = await (await get("/keys")).text()
      expect(keys).toContain(org.apiKey.slice(0, 12))
      expect(keys).not.toContain(org.apiKey)
      expect(keys.toLowerCase()).not.toContain("hash")
    })

    test("invalid input to an action is a 400 with the error body, and is logged", async () => {
      const answer = await server.fetch("/dashboard/api/credits/grant", {
        method: "POST",
        headers: { cookie, origin: server.baseUrl, "x-csrf-token": csrf },
        body: JSON.stringify({ customer: "nobody", creditSystem: "x", amount: -1 })
      })
      expect(answer.status).toBe(400)
      expect(await answer.json()).toMatchObject({ success: false, code: "invalid_request" })
      const unknown = await server.fetch("/dashboard/api/credits/grant", {
        method: "POST",
        headers: { cookie, origin: server.baseUrl, "x-csrf-token": csrf },
        body: JSON.stringify({ customer: "nobody", creditSystem: "x", amount: 5 })
      })
      expect(unknown.status).toBe(404)
      expect(await unknown.json()).toMatchObject({ success: false, code: "customer_not_found" })
      const audit = await server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ action: string; outcome: string }>`SELECT action, outcome FROM dashboard_audit
            WHERE organization_id = ${org.id} ORDER BY id`.pipe(Effect.orDie)
        )
      )
      expect(audit).toEqual([
        { action: "session.sign_in", outcome: "ok" },
        { action: "credits.grant", outcome: "refused 400" },
        { action: "credits.grant", outcome: "refused 404" }
      ])
    })

    test("pages carry a strict policy; the script is the service's own, under 100 KB compressed", async () => {
      const page = await server.fetch("/dashboard", { headers: { cookie } })
      const csp = page.headers.get("content-security-policy")!
      expect(csp).toContain("default-src 'self'")
      expect(csp).toContain("script-src 'self'")
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).not.toContain("unsafe")
      const html = await page.text()
      expect(html).not.toMatch(/<script(?![^>]*src="\/dashboard\/assets\/app\.js")/)
      expect(html).not.toMatch(/https?:\/\//)
      // As sent (Bun's fetch would otherwise undo the gzip).
      const script = await server.fetch("/dashboard/assets/app.js", {
        headers: { "accept-encoding": "gzip" },
        decompress: false
      } as RequestInit)
      expect(script.headers.get("content-encoding")).toBe("gzip")
      const compressed = new Uint8Array(await script.arrayBuffer())
      expect(compressed.length).toBeLessThan(100 * 1024)
      const source = new TextDecoder().decode(gunzipSync(compressed))
      expect(source.includes("u-legend")).toBe(true) // uPlot, bundled in
      expect(/\bhttps?:\/\/(?!www\.w3\.org)/.exec(source)?.[0]).toBeUndefined()
      const css = await server.fetch("/dashboard/assets/app.css")
      expect(await css.text()).toContain(".uplot")
    })
  })
}
