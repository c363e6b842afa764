import { expect } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { post, syncCatalog } from "../support/catalog.ts"
import type { TestServer } from "../support/harness.ts"

/** Markup in a customer's name: it must come back as data and never be rendered. */
export const HOSTILE = `<img src=x onerror="alert(1)">Ada & "Co"`

export const portalCatalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered", unit: "token" },
    { slug: "support", name: "Priority support", type: "boolean" }
  ],
  creditSystems: [{ slug: "credits", name: "AI credits", features: [{ feature: "tokens", creditCost: 1 }] }],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      planGroup: "main",
      portal: true,
      features: [{ slug: "tokens", limit: 1000, reset: "monthly" }]
    },
    {
      slug: "pro",
      name: "Pro",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "main",
      portal: true,
      features: [
        { slug: "tokens", limit: 5000, reset: "monthly" },
        { slug: "support", enabled: true }
      ]
    },
    {
      slug: "team",
      name: "Team",
      price: 2000000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "main",
      features: [{ slug: "tokens", limit: 50000, reset: "monthly" }]
    }
  ]
}

export interface Org {
  readonly id: string
  readonly apiKey: string
}

export const seedOrg = async (
  server: TestServer,
  org: Org,
  customers: ReadonlyArray<{ id: string; name: string }>,
  catalog: Record<string, unknown> = portalCatalog
) => {
  await syncCatalog(server, org.apiKey, catalog)
  for (const c of customers) {
    const created = await post(server, org.apiKey, "/v1/customers", {
      id: c.id,
      email: `${c.id}@example.com`,
      name: c.name
    })
    expect(created.status).toBe(200)
  }
}

/**
 * A customer's card, saved through the simulated provider's setup page (what their browser does): its test card
 * 4242 (`ok`), or 0002 (`declining`), a second card of the same customer.
 */
export const saveCard = async (server: TestServer, org: Org, customer: string, card: "ok" | "declining" = "ok") => {
  const setup = await post(server, org.apiKey, "/v1/wallet/setup", { customer })
  expect(setup.status).toBe(200)
  const done = await server.fetch(new URL(setup.body.url).pathname, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: `outcome=pay&card=${card}`
  })
  expect(done.status).toBe(200)
  const wallet = (await (await server.fetch(`/v1/wallet?customer=${customer}`, { apiKey: org.apiKey })).json()) as any
  return wallet.paymentMethods as Array<{ id: string; isDefault: boolean }>
}

export interface Portal {
  readonly cookie: string
  readonly setCookie: string
  readonly csrf: string
  readonly get: (path: string) => Promise<Response>
  readonly post: (path: string, body?: unknown, headers?: Record<string, string>) => Promise<Response>
}

/** The vendor creates a session; the customer's browser opens the link and the page. */
export const openPortal = async (
  server: TestServer,
  org: Org,
  customer: string,
  returnUrl?: string
): Promise<Portal> => {
  const created = await post(server, org.apiKey, "/v1/portal/sessions", {
    customer,
    ...(returnUrl === undefined ? {} : { returnUrl })
  })
  expect(created.status).toBe(200)
  const token = new URL(created.body.url).pathname.slice("/portal/link/".length)
  const redeemed = await server.fetch("/portal/link", {
    method: "POST",
    headers: { origin: server.baseUrl },
    body: JSON.stringify({ token })
  })
  expect(redeemed.status).toBe(200)
  const setCookie = redeemed.headers.get("set-cookie")!
  const cookie = setCookie.split(";")[0]!
  const page = await (await server.fetch("/portal", { headers: { cookie } })).text()
  const csrf = /name="csrf-token" content="([^"]+)"/.exec(page)![1]!
  return {
    cookie,
    setCookie,
    csrf,
    get: (path) => server.fetch(path, { headers: { cookie } }),
    post: (path, body = {}, headers = {}) =>
      server.fetch(path, {
        method: "POST",
        headers: { cookie, origin: server.baseUrl, "x-csrf-token": csrf, ...headers },
        body: JSON.stringify(body)
      })
  }
}

export const auditOf = (server: TestServer, organizationId: string) =>
  server.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ action: string; objectId: string; customerId: string; outcome: string }>`
        SELECT action, object_id, customer_id, outcome FROM portal_audit
        WHERE organization_id = ${organizationId} ORDER BY id`.pipe(Effect.orDie)
    )
  )
