import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runCli } from "../support/cli.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { startServer, uniqueSlug } from "../support/harness.ts"

describe("cli dashboard", () => {
  let dir: string
  let env: Record<string, string | undefined>
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "dashboard-cli-"))
    // The CLI and the service share the database and its encryption key (the test configuration's), as in production.
    env = {
      ...process.env,
      DATA_DIR: join(dir, "data"),
      APP_ENV: "sandbox",
      PUBLIC_URL: "http://billing.test:8080",
      ENCRYPTION_KEY: "0".repeat(64)
    }
    delete env.DATABASE_URL
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test("prints a one-time link that signs in once, within 10 minutes", async () => {
    const slug = uniqueSlug("dash")
    expect((await runCli(env, "org", "create", slug)).code).toBe(0)
    const printed = await runCli(env, "dashboard", slug, "--json")
    expect(printed.code).toBe(0)
    const { url, organization, expiresInSeconds } = JSON.parse(printed.stdout)
    expect(organization).toBe(slug)
    expect(expiresInSeconds).toBe(600)
    expect(url).toMatch(/^http:\/\/billing\.test:8080\/dashboard\/link\/org_[0-9a-z]+\.[A-Za-z0-9_-]{43}$/)
    const text = await runCli(env, "dashboard", slug)
    expect(text.stdout).toContain("/dashboard/link/")
    expect((await runCli(env, "dashboard", "no-such-org")).code).toBe(1)
    expect((await runCli(env, "dashboard")).code).toBe(2)

    // The service over the same database redeems it once; a link older than 10 minutes is refused.
    const clock = makeShiftedClock()
    const server = await startServer({ dataDir: join(dir, "data") }, { clock: clock.clock })
    try {
      const redeem = (token: string) =>
        server.fetch("/dashboard/link", {
          method: "POST",
          headers: { origin: server.baseUrl },
          body: JSON.stringify({ token })
        })
      const token = new URL(url).pathname.split("/").at(-1)!
      const first = await redeem(token)
      expect(first.status).toBe(200)
      expect(first.headers.get("set-cookie")).toMatch(
        /^billing_dashboard=org_.+; Path=\/dashboard; HttpOnly; SameSite=Strict; Max-Age=43200$/
      )
      expect((await redeem(token)).status).toBe(401)
      const later = JSON.parse((await runCli(env, "dashboard", slug, "--json")).stdout).url as string
      clock.advance(10 * 60_000 + 1_000)
      const late = await redeem(new URL(later).pathname.split("/").at(-1)!)
      expect(late.status).toBe(401)
      expect(await late.json()).toMatchObject({ success: false, code: "unauthorized" })
    } finally {
      await server.close()
    }
  }, 30_000)

  test("sample-data fills an organization through the API, with a key it revokes after", async () => {
    const slug = uniqueSlug("sample")
    const created = JSON.parse((await runCli(env, "org", "create", slug, "--json")).stdout)
    const filled = await runCli(env, "sample-data", slug, "--customers", "4", "--events", "24", "--json")
    expect(filled.code).toBe(0)
    expect(JSON.parse(filled.stdout)).toMatchObject({ organization: slug, customers: 4, paid: 1, tracked: 24 })
    const refused = await runCli(env, "sample-data", slug, "--events", "-1")
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("--events must be an integer")
    const keys = JSON.parse((await runCli(env, "key", "list", slug, "--json")).stdout).keys as Array<any>
    expect(keys.filter((k) => k.revokedAt === null)).toHaveLength(1)
    const server = await startServer({ dataDir: join(dir, "data") })
    try {
      const list = (await (await server.fetch("/v1/customers?limit=10", { apiKey: created.apiKey })).json()) as any
      expect(list.total).toBe(4)
      const subs = (await (await server.fetch("/v1/subscriptions", { apiKey: created.apiKey })).json()) as any
      expect(subs.subscriptions.filter((s: any) => s.plan === "pro" && s.status === "active")).toHaveLength(1)
    } finally {
      await server.close()
    }
  }, 30_000)
})
