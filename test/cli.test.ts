import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runCli } from "./support/cli.ts"
import { startServer, type TestServer, uniqueSlug } from "./support/harness.ts"

/**
 * The CLI's contract with a person or a script: boolean flags are flags, unknown flags are usage errors (exit 2),
 * refusals exit 1, and with --json every error is one `{error, code, message}` object on stderr, stdout empty.
 */
describe("cli", () => {
  let dir: string
  let env: Record<string, string | undefined>
  let server: TestServer
  let org: string
  let key: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "cli-"))
    // The CLI and a service share one SQLite directory and encryption key, as in production.
    env = { DATA_DIR: join(dir, "data"), APP_ENV: "sandbox", ENCRYPTION_KEY: "0".repeat(64) }
    const created = await runCli(env, "org", "create", (org = uniqueSlug("cli")), "--json")
    expect(created.code).toBe(0)
    key = JSON.parse(created.stdout).apiKey
    server = await startServer({ dataDir: join(dir, "data") })
    const catalog = join(dir, "catalog.json")
    writeFileSync(
      catalog,
      JSON.stringify({
        features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
        creditSystems: [{ slug: "ai-credits", name: "AI credits", features: [{ feature: "tokens", creditCost: 1 }] }],
        plans: []
      })
    )
    expect((await runCli(env, "sync", catalog, "--org", org)).code).toBe(0)
    const customer = await server.fetch("/v1/customers", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ id: "user-1", email: "user-1@example.com" })
    })
    expect(customer.status).toBe(200)
  })
  afterAll(async () => {
    await server?.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const cli = (...args: Array<string>) => runCli(env, ...args)
  const jsonError = (result: { stdout: string; stderr: string }) => {
    expect(result.stdout).toBe("")
    return JSON.parse(result.stderr)
  }

  test("--bonus is a flag: it takes no value and leaves --json alone, in any order", async () => {
    const bonus = await cli("credits", "grant", org, "user-1", "ai-credits", "5", "--bonus", "--json")
    expect(bonus.stderr).toBe("")
    expect(bonus.code).toBe(0)
    expect(JSON.parse(bonus.stdout)).toMatchObject({ creditSystem: "ai-credits", bonusBalance: 5, addonBalance: 0 })
    const before = await cli("credits", "grant", "--json", org, "--bonus", "user-1", "ai-credits", "2")
    expect(JSON.parse(before.stdout)).toMatchObject({ bonusBalance: 7, addonBalance: 0 })
    const purchased = await cli("credits", "grant", org, "user-1", "ai-credits", "3")
    expect(purchased.code).toBe(0)
    expect(purchased.stdout).toContain("bonus 7, purchased 3")
    const withValue = await cli("credits", "grant", org, "user-1", "ai-credits", "3", "--bonus=yes", "--json")
    expect(withValue.code).toBe(2)
    expect(jsonError(withValue)).toEqual({ error: "Usage Error", code: "usage", message: "--bonus takes no value" })
  })

  test("unknown flags, and flags of another command, exit 2 with usage", async () => {
    const unknown = await cli("org", "list", "--verbose")
    expect(unknown.code).toBe(2)
    expect(unknown.stdout).toBe("")
    expect(unknown.stderr).toContain("unknown option '--verbose'")
    expect(unknown.stderr).toContain("Usage:")
    const short = await cli("org", "list", "-v")
    expect(short.code).toBe(2)
    const other = await cli("org", "list", "--bonus", "--json")
    expect(other.code).toBe(2)
    expect(jsonError(other)).toMatchObject({ code: "usage", message: "org list takes no option --bonus" })
    const missing = await cli("sync", "--org")
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("--org needs a value")
    expect((await cli("nonsense", "--json")).code).toBe(2)
  })

  test("with --json every refusal is {error, code, message} on stderr; exit 1", async () => {
    const noCustomer = await cli("credits", "grant", org, "nobody", "ai-credits", "5", "--json")
    expect(noCustomer.code).toBe(1)
    expect(jsonError(noCustomer)).toEqual({
      error: "Not Found",
      code: "customer_not_found",
      message: "No customer matches 'nobody'"
    })
    const noOrg = await cli("provider", "list", "no-such-org", "--json")
    expect(noOrg.code).toBe(1)
    expect(jsonError(noOrg)).toEqual({
      error: "Not Found",
      code: "organization_not_found",
      message: "No organization 'no-such-org'"
    })
    const stripe = await cli("provider", "set", org, "stripe", "--secret-key", "sk_test_x", "--json")
    expect(stripe.code).toBe(1)
    expect(jsonError(stripe)).toMatchObject({ error: "Bad Request", code: "invalid_request" })
    const noFile = await cli("sync", join(dir, "missing.json"), "--org", org, "--json")
    expect(noFile.code).toBe(1)
    expect(jsonError(noFile)).toMatchObject({ error: "Bad Request", code: "invalid_request" })
    const amount = await cli("credits", "grant", org, "user-1", "ai-credits", "lots", "--json")
    expect(amount.code).toBe(1)
    expect(jsonError(amount).details).toEqual([{ path: "amount", message: "must be a non-negative decimal number" }])
    // Without --json: text on stderr, the same exit codes.
    const text = await cli("credits", "grant", org, "nobody", "ai-credits", "5")
    expect(text.code).toBe(1)
    expect(text.stdout).toBe("")
    expect(text.stderr).toBe("error: No customer matches 'nobody'\n")
  })

  test("a feature slug out of the documented format is refused by the schema", async () => {
    const file = join(dir, "bad-slug.json")
    writeFileSync(
      file,
      JSON.stringify({
        features: [
          { slug: "Bad Slug!", name: "Bad", type: "metered" },
          { slug: "-dash", name: "Dash", type: "metered" },
          { slug: "x".repeat(65), name: "Long", type: "metered" },
          { slug: "ok_1.v2-x", name: "Fine", type: "metered" }
        ],
        plans: []
      })
    )
    const bad = await cli("sync", file, "--org", org, "--json")
    expect(bad.code).toBe(1)
    const format = "must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
    expect(jsonError(bad).details).toEqual([
      { path: "features[0].slug", message: format },
      { path: "features[1].slug", message: format },
      { path: "features[2].slug", message: format }
    ])
  })

  test("reading commands refuse a database that does not exist; only org create makes one", async () => {
    const typo = join(dir, "dta")
    for (const args of [["org", "list"], ["key", "list", org], ["out-of-range"], ["sync", "x.json"]]) {
      const result = await runCli({ ...env, DATA_DIR: typo }, ...args, "--json")
      expect({ args, code: result.code }).toEqual({ args, code: 1 })
      const body = jsonError(result)
      expect(body.code).toBe("database_not_found")
      expect(body.message).toContain(join(typo, "billing.db"))
    }
    const text = await runCli({ ...env, DATA_DIR: typo }, "org", "list")
    expect(text.stderr).toContain(`no database at ${join(typo, "billing.db")}`)
    expect(existsSync(typo)).toBe(false)
    const created = await runCli({ ...env, DATA_DIR: typo }, "org", "create", "fresh", "--json")
    expect(created.code).toBe(0)
    expect(existsSync(join(typo, "billing.db"))).toBe(true)
    expect((await runCli({ ...env, DATA_DIR: typo }, "org", "list")).code).toBe(0)
  })
})
