import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { createHmac, randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cli, freePort, type Service, startService } from "./support.ts"

/**
 * Log redaction (issue 6): the service at LOG_LEVEL=debug, as it runs in production (a subprocess on its own
 * SQLite data directory), is given keys, provider secrets, signed and forged webhooks, a failing provider and a
 * failing database; everything it writes (stdout and stderr) is searched for every one of those secrets and for
 * SQL. Provider secrets are also shown to be encrypted at rest.
 */
describe("logs never contain keys, secrets, signatures or SQL", () => {
  let dir: string
  let service: Service
  let output = ""
  const tag = randomBytes(6).toString("hex")
  const secrets = {
    encryptionKey: randomBytes(32).toString("hex"),
    paystack: `sk_live_PAYSTACKSECRET${tag}`,
    stripe: `sk_test_STRIPESECRET${tag}`,
    stripeWebhook: `whsec_STRIPEWEBHOOK${tag}`,
    wrongKey: `sk_test_WRONGKEYWRONGKEY${tag}xxxxxxxx`
  }
  const sent: Array<string> = [] // signatures and keys sent during the run
  let apiKey = ""
  const statuses: Record<string, number> = {}

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "billing-redaction-"))
    const env = { DATA_DIR: join(dir, "data"), ENCRYPTION_KEY: secrets.encryptionKey }
    const created = JSON.parse(await cli(env, "org", "create", "acme", "--json"))
    apiKey = created.apiKey
    // A provider that refuses connections: every call to it fails (and must not log the key it carried).
    const deadProvider = `http://127.0.0.1:${freePort()}`
    await cli(env, "provider", "set", "acme", "paystack", "--secret-key", secrets.paystack, "--base-url", deadProvider)
    await cli(
      env,
      "provider",
      "set",
      "acme",
      "stripe",
      "--secret-key",
      secrets.stripe,
      "--webhook-secret",
      secrets.stripeWebhook,
      "--base-url",
      deadProvider
    )

    service = await startService({ ...env, LOG_LEVEL: "debug" })
    const call = async (name: string, path: string, init: RequestInit & { key?: string } = {}) => {
      const headers = new Headers(init.headers)
      if (init.key !== undefined) headers.set("authorization", `Bearer ${init.key}`)
      if (init.body !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json")
      const response = await fetch(service.baseUrl + path, { ...init, headers })
      await response.arrayBuffer()
      statuses[name] = response.status
    }
    const json = (body: unknown) => JSON.stringify(body)

    await call("sync", "/v1/sync", {
      method: "POST",
      key: apiKey,
      body: json({
        features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
        plans: [
          { slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 10 }] },
          {
            slug: "pro",
            name: "Pro",
            price: 100000,
            currency: "NGN",
            interval: "monthly",
            planGroup: "paid",
            provider: "paystack",
            features: []
          }
        ]
      })
    })
    await call("customer", "/v1/customers", {
      method: "POST",
      key: apiKey,
      body: json({ id: "ada", email: "ada@example.com" })
    })
    await call("track", "/v1/track", {
      method: "POST",
      key: apiKey,
      headers: { "idempotency-key": `idem-${tag}` },
      body: json({ customer: "ada", feature: "tokens", value: 3 })
    })
    await call("wrong key", "/v1/customers", { key: secrets.wrongKey })
    await call("bad body", "/v1/customers", { method: "POST", key: apiKey, body: '{"email": ' })
    // The provider's API is down: a 502, after a call that carried the Paystack secret.
    await call("attach", "/v1/attach", { method: "POST", key: apiKey, body: json({ customer: "ada", product: "pro" }) })

    // Webhooks: correctly signed (Paystack, Stripe, simulated) and forged.
    const paystackBody = json({
      event: "charge.success",
      data: { id: 1, reference: "nope-1", amount: 100, currency: "NGN", status: "success" }
    })
    const paystackSignature = createHmac("sha512", secrets.paystack).update(paystackBody).digest("hex")
    sent.push(paystackSignature)
    await call("paystack webhook", "/webhooks/acme/paystack", {
      method: "POST",
      body: paystackBody,
      headers: { "x-paystack-signature": paystackSignature }
    })
    const forged = createHmac("sha512", "not-the-secret").update(paystackBody).digest("hex")
    sent.push(forged)
    await call("forged webhook", "/webhooks/acme/paystack", {
      method: "POST",
      body: paystackBody,
      headers: { "x-paystack-signature": forged }
    })
    const stripeBody = json({ id: `evt_${tag}`, type: "customer.created", data: { object: { id: "cus_x" } } })
    const t = Math.floor(Date.now() / 1000)
    const stripeSignature = createHmac("sha256", secrets.stripeWebhook).update(`${t}.${stripeBody}`).digest("hex")
    sent.push(stripeSignature)
    await call("stripe webhook", "/webhooks/acme/stripe", {
      method: "POST",
      body: stripeBody,
      headers: { "stripe-signature": `t=${t},v1=${stripeSignature}` }
    })
    const simulatedSecret = createHmac("sha256", Buffer.from(secrets.encryptionKey, "hex"))
      .update("simulated-webhooks")
      .digest("hex")
    sent.push(simulatedSecret)
    const simulatedBody = json({
      id: `sim_${tag}`,
      type: "payment.succeeded",
      data: { reference: "nope", amount: 1, currency: "NGN", metadata: {} }
    })
    const simulatedSignature = createHmac("sha256", simulatedSecret).update(simulatedBody).digest("hex")
    sent.push(simulatedSignature)
    await call("simulated webhook", "/webhooks/sandbox/simulated", {
      method: "POST",
      body: simulatedBody,
      headers: { "x-simulated-signature": simulatedSignature }
    })

    // The database fails under a request: a table disappears (from another connection to the same file).
    const db = new Database(join(dir, "data", "billing.db"))
    db.run("DROP TABLE invoices")
    db.close()
    await call("broken database", "/v1/billing/invoices", { key: apiKey })

    await service.kill("SIGTERM")
    output = service.output()
  }, 60_000)

  afterAll(async () => {
    if (service !== undefined && service.process.exitCode === null) await service.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  })

  test("every request was made, answered as expected, and logged", () => {
    expect(statuses).toEqual({
      sync: 200,
      customer: 200,
      track: 200,
      "wrong key": 401,
      "bad body": 400,
      attach: 502,
      "paystack webhook": 200,
      "forged webhook": 401,
      "stripe webhook": 200,
      "simulated webhook": 200,
      "broken database": 500
    })
    // Debug logging was on and wrote one line per request, plus the failure.
    const lines = output.split("\n").filter((l) => l.startsWith("{"))
    const requests = lines
      .map((l) => JSON.parse(l))
      .filter((l) => l.message === "request" && l.annotations.path !== "/health")
    expect(requests.length).toBe(Object.keys(statuses).length)
    expect(output).toContain("unexpected failure")
  })

  test("no key, secret or signature appears in the output", () => {
    const needles: Record<string, string> = { ...secrets, apiKey, apiKeyBody: apiKey.slice("sk_test_".length) }
    sent.forEach((s, i) => (needles[`signature ${i}`] = s))
    const found = Object.entries(needles)
      .filter(([, value]) => output.includes(value))
      .map(([name]) => name)
    expect(found).toEqual([])
  })

  test("no SQL appears in the output", () => {
    expect(output).not.toMatch(/\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE TABLE|DROP TABLE)\b/i)
    expect(output).not.toMatch(/no such table|sqlite_master|organization_id|invoice_id/)
  })

  test("provider secrets are encrypted at rest", () => {
    const db = new Database(join(dir, "data", "billing.db"), { readonly: true })
    const rows = db.query("SELECT provider, secret_key, webhook_secret FROM provider_accounts").all() as Array<any>
    db.close()
    expect(rows.map((r) => r.provider).sort()).toEqual(["paystack", "stripe"])
    for (const row of rows) {
      expect(row.secret_key).toStartWith("v1:")
      if (row.webhook_secret !== null) expect(row.webhook_secret).toStartWith("v1:")
    }
    // Nowhere in the database's files, in any form the secrets were given.
    for (const file of readdirSync(join(dir, "data"))) {
      const bytes = readFileSync(join(dir, "data", file)).toString("latin1")
      for (const secret of [secrets.paystack, secrets.stripe, secrets.stripeWebhook, apiKey]) {
        expect(`${file}: ${bytes.includes(secret)}`).toBe(`${file}: false`)
      }
    }
  })
})
