/**
 * Shared by the hardening tests: an organization's whole stored state (for "nothing changed"), a world of
 * objects built through the API (customers, plans, usage, an invoice, entities, a saved card...), and the
 * service as a subprocess (crash, outage, log-redaction tests).
 */
import { SqlClient } from "@effect/sql"
import { expect } from "bun:test"
import { Effect } from "effect"
import { join, resolve } from "node:path"
import pg from "pg"
import { runCli } from "../support/cli.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import type { TestServer } from "../support/harness.ts"

export const ROOT = resolve(import.meta.dir, "../..")
export const BUN = join(ROOT, "node_modules/.bin/bun")

// ---------------------------------------------------------------------------------------------------------------
// An organization's stored state
// ---------------------------------------------------------------------------------------------------------------

const stringify = (value: unknown) => JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))

/**
 * Every row of every table that has an `organization_id` column, for one organization, plus its own row: a table
 * name → its rows as sorted JSON strings. Two equal snapshots mean the organization's data did not change.
 */
export const orgState = (server: TestServer, organizationId: string) =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const tables = yield* sql.onDialectOrElse({
        pg: () =>
          sql<{ tableName: string }>`SELECT table_name FROM information_schema.columns
          WHERE column_name = 'organization_id' AND table_schema = current_schema() ORDER BY table_name`,
        orElse: () =>
          sql<{ tableName: string }>`SELECT m.name AS table_name FROM sqlite_master m
          JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND p.name = 'organization_id' ORDER BY m.name`
      })
      const state: Record<string, ReadonlyArray<string>> = {}
      state.organizations = (yield* sql`SELECT * FROM organizations WHERE id = ${organizationId}`).map(stringify)
      for (const { tableName } of tables) {
        const rows = yield* sql`SELECT * FROM ${sql(tableName)} WHERE organization_id = ${organizationId}`
        state[tableName] = rows.map(stringify).sort()
      }
      return state
    }).pipe(Effect.orDie)
  )

// ---------------------------------------------------------------------------------------------------------------
// A world of objects, built through the API
// ---------------------------------------------------------------------------------------------------------------

/** A catalog whose every slug starts with `p`, so two organizations' catalogs can be told apart. */
export const worldCatalog = (p: string) => ({
  features: [
    { slug: `${p}tokens`, name: "Tokens", type: "metered", unit: "token" },
    { slug: `${p}seats`, name: "Seats", type: "metered", meterType: "non_consumable" },
    { slug: `${p}images`, name: "Images", type: "metered" },
    { slug: `${p}sso`, name: "SSO", type: "boolean" }
  ],
  creditSystems: [{ slug: `${p}credits`, name: "Credits", features: [{ feature: `${p}images`, creditCost: 1 }] }],
  creditPacks: [
    { slug: `${p}small`, name: "Small pack", credits: 100, price: 50000, currency: "NGN", creditSystem: `${p}credits` }
  ],
  plans: [
    {
      slug: `${p}free`,
      name: "Free",
      autoEnable: true,
      currency: "NGN",
      features: [
        { slug: `${p}tokens`, limit: 100, overage: "charge", overagePrice: 2 },
        { slug: `${p}seats`, limit: 5 },
        { slug: `${p}sso` }
      ]
    },
    {
      slug: `${p}basic`,
      name: "Basic",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "paid",
      features: [{ slug: `${p}images`, limit: 50 }]
    }
  ],
  coupons: [{ slug: `${p}off`, name: "Ten off", percentOff: 10, duration: "forever" }]
})

export interface World {
  readonly org: { readonly id: string; readonly slug: string; readonly apiKey: string }
  readonly prefix: string
  readonly customers: ReadonlyArray<{ readonly id: string; readonly externalId: string; readonly email: string }>
  /** Present when built with payments. */
  readonly subscriptions: { readonly free: string; readonly active?: string; readonly pending?: string }
  readonly invoice?: { readonly id: string; readonly number: string }
  /** With `payments`: the invoice paid with the saved card, then 1 of it refunded (its credit note). */
  readonly creditNote?: string
  readonly paymentMethod?: string
  readonly pendingReference?: string
  readonly entity: string
  readonly idempotencyKey: string
  /** Two webhook endpoints (one to delete in tests), never delivered to (no worker runs), and an event. */
  readonly webhookEndpoints: readonly [string, string]
  readonly eventId: string
  readonly catalog: {
    readonly featureIds: Record<string, string>
    readonly planIds: Record<string, string>
    readonly packId: string
    readonly creditSystemId: string
  }
}

export const getJson = async (server: TestServer, apiKey: string, path: string) => {
  const response = await server.fetch(path, { apiKey })
  return { status: response.status, body: (await response.json()) as any }
}

/** What a customer's browser does on the simulated provider's hosted page. */
export const completeHostedPage = async (server: TestServer, url: string) => {
  const response = await server.fetch(new URL(url).pathname, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "outcome=pay&card=ok"
  })
  expect(response.status).toBe(200)
}

/**
 * An organization with a catalog (`p`-prefixed slugs), two customers on the free plan, usage with billed overage,
 * an invoice, more unbilled usage, an entity, spend cap and feature config; with `payments`, also a paid plan
 * paid through the simulated provider (a saved card), credits bought with it, and a second customer's pending
 * subscription with an open checkout.
 */
export const buildWorld = async (
  server: TestServer,
  options: { readonly prefix: string; readonly payments: boolean }
): Promise<World> => {
  const p = options.prefix
  const org = await server.createOrg()
  const { apiKey } = org
  await syncCatalog(server, apiKey, worldCatalog(p))
  const call = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const result = await post(server, apiKey, path, body, headers)
    expect({ path, status: result.status, body: result.body }).toMatchObject({ status: 200 })
    return result.body
  }
  const unique = crypto.randomUUID().slice(0, 8)
  const customers = []
  for (const n of [1, 2]) {
    const externalId = `${p}cust-${n}-${unique}`
    const email = `${p}person-${n}-${unique}@example.com`
    const created = await call("/v1/customers", { id: externalId, email, name: `${p}Person ${n}` })
    customers.push({ id: created.id as string, externalId, email })
  }
  const [c1, c2] = customers as [World["customers"][number], World["customers"][number]]

  // 150 tokens on a limit of 100: 50 in overage at 2 each, billed.
  const idempotencyKey = `${p}idem-${unique}`
  await call(
    "/v1/track",
    { customer: c1.externalId, feature: `${p}tokens`, value: 150 },
    { "idempotency-key": idempotencyKey }
  )
  const generated = await call("/v1/billing/invoice", { customer: c1.externalId })
  const invoice = { id: generated.invoice.id as string, number: generated.invoice.number as string }
  expect(generated.invoice.total).toBe(100)
  // Unbilled overage left for /v1/billing/usage.
  await call("/v1/track", { customer: c1.externalId, feature: `${p}tokens`, value: 5 })
  await call("/v1/track", { customer: c2.externalId, feature: `${p}tokens`, value: 7 })
  const entity = `${p}seat-${unique}`
  await call("/v1/entities", { customer: c1.externalId, feature: `${p}seats`, entity, name: "A seat" })
  await call("/v1/customers/overage-limit", {
    customer: c1.externalId,
    maxOverageAmount: 5000,
    onLimitReached: "notify"
  })
  await call("/v1/customers/feature-config", {
    customer: c1.externalId,
    feature: `${p}tokens`,
    overage: "charge",
    maxOverageUnits: 500
  })

  let active: string | undefined
  let pending: string | undefined
  let paymentMethod: string | undefined
  let pendingReference: string | undefined
  let creditNote: string | undefined
  if (options.payments) {
    const attached = await call("/v1/attach", { customer: c1.externalId, product: `${p}basic` })
    expect(attached.subscription.status).toBe("pending")
    await completeHostedPage(server, attached.checkoutUrl)
    active = attached.subscription.id
    const wallet = await getJson(server, apiKey, `/v1/wallet?customer=${encodeURIComponent(c1.externalId)}`)
    paymentMethod = wallet.body.paymentMethods[0].id
    expect(paymentMethod).toBeString()
    // Paid at once with the saved card.
    const bought = await call("/v1/addon", { customer: c1.externalId, pack: `${p}small` })
    expect(bought.requiresCheckout).toBe(false)
    // A second customer's paid plan waits on a checkout.
    const waiting = await call("/v1/attach", { customer: c2.externalId, product: `${p}basic` })
    expect(waiting.subscription.status).toBe("pending")
    pending = waiting.subscription.id
    pendingReference = new URL(waiting.checkoutUrl).pathname.split("/").pop()!
    expect((await call(`/v1/billing/invoice/${invoice.id}/pay`, {})).paid).toBe(true)
    const refunded = await call(`/v1/billing/invoices/${invoice.id}/refund`, { amount: 1, reason: "a test refund" })
    creditNote = refunded.creditNotes[0].id
  }

  const webhookEndpoints: Array<string> = []
  for (const n of [1, 2]) {
    const endpoint = await call("/v1/webhook-endpoints", {
      url: `https://example.com/${p}hooks-${n}`,
      description: `${p}endpoint ${n}`
    })
    webhookEndpoints.push(endpoint.id)
  }
  const events = await getJson(
    server,
    apiKey,
    `/v1/events?type=customer.created&customer=${encodeURIComponent(c1.externalId)}`
  )
  const eventId = events.body.data[0].id as string

  const subs = await getJson(server, apiKey, `/v1/subscriptions?customer=${encodeURIComponent(c1.externalId)}`)
  const freeSub = subs.body.subscriptions.find((s: any) => s.plan === `${p}free`)
  const planIds: Record<string, string> = { [`${p}free`]: freeSub.planId }
  if (active !== undefined) planIds[`${p}basic`] = subs.body.subscriptions.find((s: any) => s.id === active).planId
  const customer = await getJson(server, apiKey, `/v1/customers/${encodeURIComponent(c1.externalId)}`)
  const featureIds: Record<string, string> = {}
  for (const config of customer.body.billing.featureConfigs) featureIds[config.feature.slug] = config.feature.id
  const history = await getJson(
    server,
    apiKey,
    `/v1/customers/${encodeURIComponent(c1.externalId)}/usage/history?groupBy=feature&range=7d&feature=${p}seats`
  )
  for (const b of history.body.breakdown) featureIds[b.feature.slug] = b.feature.id
  const packs = await getJson(server, apiKey, "/v1/credit-packs")
  const pack = packs.body.data.find((x: any) => x.slug === `${p}small`)

  return {
    org,
    prefix: p,
    customers,
    subscriptions: { free: freeSub.id, ...(active ? { active } : {}), ...(pending ? { pending } : {}) },
    invoice,
    ...(paymentMethod ? { paymentMethod } : {}),
    ...(pendingReference ? { pendingReference } : {}),
    ...(creditNote ? { creditNote } : {}),
    entity,
    idempotencyKey,
    webhookEndpoints: [webhookEndpoints[0]!, webhookEndpoints[1]!],
    eventId,
    catalog: { featureIds, planIds, packId: pack.id, creditSystemId: pack.creditSystemId }
  }
}

/** What the organization itself reads through the API: equal before and after means nothing it can see changed. */
export const apiView = async (server: TestServer, world: World) => {
  const key = world.org.apiKey
  const paths = [
    "/v1/customers?limit=100",
    "/v1/credit-packs",
    "/v1/credit-systems",
    "/v1/subscriptions",
    "/v1/billing/invoices",
    "/v1/billing/usage"
  ]
  for (const c of world.customers) {
    const ref = encodeURIComponent(c.externalId)
    paths.push(
      `/v1/customers/${ref}`,
      `/v1/subscriptions?customer=${ref}`,
      `/v1/wallet?customer=${ref}`,
      `/v1/customers/${ref}/usage/history?groupBy=feature&range=7d`
    )
  }
  const view: Record<string, unknown> = {}
  for (const path of paths) view[path] = await getJson(server, key, path)
  for (const c of world.customers) {
    for (const feature of ["tokens", "seats", "images"]) {
      view[`check ${c.externalId} ${feature}`] = await post(server, key, "/v1/check", {
        customer: c.externalId,
        feature: `${world.prefix}${feature}`,
        value: 0
      })
    }
  }
  return view
}

// ---------------------------------------------------------------------------------------------------------------
// The service as a subprocess
// ---------------------------------------------------------------------------------------------------------------

/** A TCP port nobody listens on right now. */
export const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

export interface Service {
  readonly baseUrl: string
  readonly process: Bun.Subprocess<"ignore", "pipe", "pipe">
  /** Everything the process wrote so far, stdout and stderr. */
  readonly output: () => string
  readonly kill: (signal?: NodeJS.Signals) => Promise<void>
}

/** Runs `bun src/main.ts` with `env` (over a clean copy of this process's) and waits until `/health` answers. */
export const startService = async (env: Record<string, string>): Promise<Service> => {
  const port = freePort()
  const base: Record<string, string | undefined> = { ...process.env }
  delete base.DATABASE_URL
  const proc = Bun.spawn([BUN, "src/main.ts"], {
    cwd: ROOT,
    env: { ...base, APP_ENV: "sandbox", RENEWALS_INTERVAL_SECONDS: "0", ...env, PORT: String(port) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  const chunks: Array<string> = []
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) chunks.push(decoder.decode(chunk, { stream: true }))
  }
  const drained = Promise.all([drain(proc.stdout), drain(proc.stderr)])
  const baseUrl = `http://127.0.0.1:${port}`
  const service: Service = {
    baseUrl,
    process: proc,
    output: () => chunks.join(""),
    kill: async (signal = "SIGTERM") => {
      proc.kill(signal)
      await proc.exited
      await drained
    }
  }
  // Bounded: 150 × 100 ms. A service that never comes up fails the test with its output.
  for (let i = 0; i < 150; i++) {
    if (proc.exitCode !== null) break
    const up = await fetch(`${baseUrl}/health`).then(
      (r) => r.ok,
      () => false
    )
    if (up) return service
    await Bun.sleep(100)
  }
  await service.kill("SIGKILL")
  throw new Error(`the service did not start:\n${service.output()}`)
}

/** Runs the management CLI (in this process) with `env`; its `--json` output. */
export const cli = async (env: Record<string, string>, ...args: Array<string>) => {
  const base: Record<string, string | undefined> = { ...process.env }
  delete base.DATABASE_URL
  const result = await runCli({ ...base, APP_ENV: "sandbox", ...env }, ...args)
  if (result.code !== 0) throw new Error(`cli ${args.join(" ")} failed: ${result.stderr}`)
  return result.stdout
}

// ---------------------------------------------------------------------------------------------------------------
// Scratch PostgreSQL databases
// ---------------------------------------------------------------------------------------------------------------

/** Creates a database named `<prefix>_<random>` on DATABASE_URL's server; `drop` removes it (and its sessions). */
export const scratchDatabase = async (serverUrl: string, prefix: string) => {
  const name = `${prefix}_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
  const adminUrl = new URL(serverUrl)
  adminUrl.pathname = "/postgres"
  const admin = new pg.Client({ connectionString: adminUrl.toString() })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl.toString() })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    }
  }
}
