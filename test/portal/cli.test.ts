import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { BUN, ROOT } from "../hardening/support.ts"
import { runCli } from "../support/cli.ts"
import { startServer, uniqueSlug } from "../support/harness.ts"

describe("cli portal", () => {
  let dir: string
  let env: Record<string, string | undefined>
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "portal-cli-"))
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

  test("prints a customer's one-time portal link, which the service redeems once", async () => {
    const slug = uniqueSlug("portal")
    const created = JSON.parse((await runCli(env, "org", "create", slug, "--json")).stdout)
    const server = await startServer({ dataDir: join(dir, "data") })
    try {
      const customer = await server.fetch("/v1/customers", {
        method: "POST",
        apiKey: created.apiKey,
        body: JSON.stringify({ id: "ada", email: "ada@example.com" })
      })
      expect(customer.status).toBe(200)
      const printed = await runCli(env, "portal", slug, "ada", "--return-url", "https://app.example/", "--json")
      expect(printed.code).toBe(0)
      const out = JSON.parse(printed.stdout)
      expect(out).toEqual({
        organization: slug,
        customer: expect.stringMatching(/^cus_/),
        url: expect.stringMatching(/^http:\/\/billing\.test:8080\/portal\/link\/org_[0-9a-z]+\.[A-Za-z0-9_-]{43}$/),
        expiresAt: expect.any(String)
      })
      expect((await runCli(env, "portal", slug, "ada")).stdout).toContain("/portal/link/")
      expect((await runCli(env, "portal", slug, "nobody")).code).toBe(1)
      expect((await runCli(env, "portal", "no-such-org", "ada")).code).toBe(1)
      expect((await runCli(env, "portal", slug, "ada", "--return-url", "javascript:alert(1)")).code).toBe(1)
      expect((await runCli(env, "portal", slug)).code).toBe(2)

      const redeem = () =>
        server.fetch("/portal/link", {
          method: "POST",
          headers: { origin: server.baseUrl },
          body: JSON.stringify({ token: new URL(out.url).pathname.split("/").at(-1) })
        })
      const first = await redeem()
      expect(first.status).toBe(200)
      const cookie = first.headers.get("set-cookie")!.split(";")[0]!
      const page = await (await server.fetch("/portal", { headers: { cookie } })).text()
      expect(page).toContain(`data-return-url="https://app.example/"`)
      expect((await redeem()).status).toBe(401)
    } finally {
      await server.close()
    }
  }, 30_000)

  test("as a process, as vendors run it: prints the link and exits; an unknown customer exits 1", async () => {
    const slug = uniqueSlug("portal-proc")
    const created = JSON.parse((await runCli(env, "org", "create", slug, "--json")).stdout)
    const server = await startServer({ dataDir: join(dir, "data") })
    try {
      const customer = await server.fetch("/v1/customers", {
        method: "POST",
        apiKey: created.apiKey,
        body: JSON.stringify({ id: "grace", email: "grace@example.com" })
      })
      expect(customer.status).toBe(200)
      const run = async (...args: ReadonlyArray<string>) => {
        const proc = Bun.spawn([BUN, "src/cli.ts", ...args], { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" })
        const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
        return { stdout, code }
      }
      const printed = await run("portal", slug, "grace", "--json")
      expect(printed.code).toBe(0)
      const url = new URL(JSON.parse(printed.stdout).url)
      // The printed link opens a session on the running service.
      const redeemed = await server.fetch("/portal/link", {
        method: "POST",
        headers: { origin: server.baseUrl },
        body: JSON.stringify({ token: url.pathname.split("/").at(-1) })
      })
      expect(redeemed.status).toBe(200)
      expect((await run("portal", slug, "nobody")).code).toBe(1)
    } finally {
      await server.close()
    }
  }, 60_000)
})
