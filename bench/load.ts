/**
 * A mixed workload against a running service on PostgreSQL: 70% `check`, 25% `track`, 5% other reads (a customer,
 * its subscriptions, a customer search, usage history), from N concurrent clients for S seconds. Prints throughput,
 * p50/p99 latency (overall and per kind) and errors, then checks the database: every balance against the sum of its
 * events, every usage rollup against its events, and this run's events against the acknowledged tracks.
 *
 *   API_KEY=sk_test_... DATABASE_URL=postgres://... bun bench/load.ts \
 *     [--url http://localhost:3000] [--connections 64] [--seconds 60] [--customers 200]
 *
 * DATABASE_URL must be the service's database (the consistency check reads it). The bench syncs a small catalog
 * (`load-calls` unlimited, `load-tokens` with a large limit, both never resetting, on an auto-enabled plan) into the
 * key's organization and creates its customers; run it against a sandbox organization of its own. Exit code 1 when
 * there were errors or inconsistencies.
 */
import { createHash, randomUUID } from "node:crypto"
import { parseArgs } from "node:util"
import pg from "pg"

const { values } = parseArgs({
  options: {
    url: { type: "string", default: process.env.BASE_URL ?? "http://localhost:3000" },
    connections: { type: "string", default: "64" },
    seconds: { type: "string", default: "60" },
    customers: { type: "string", default: "200" }
  }
})
const apiKey = process.env.API_KEY
const databaseUrl = process.env.DATABASE_URL
if (!apiKey || !databaseUrl) {
  console.error("Set API_KEY (a key of the organization to load) and DATABASE_URL (the service's PostgreSQL database).")
  process.exit(2)
}
const baseUrl = values.url!
const connections = Number(values.connections)
const seconds = Number(values.seconds)
const customerCount = Number(values.customers)
const run = randomUUID().slice(0, 8)
const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }

type Kind = "check" | "track" | "read"

const send = async (method: string, path: string, body?: unknown, extra: Record<string, string> = {}) => {
  const response = await fetch(baseUrl + path, {
    method,
    headers: { ...headers, ...extra },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, body: (await response.json()) as any }
}

const customer = (i: number) => `load-${i}`

const setup = async () => {
  const sync = await send("POST", "/v1/sync", {
    features: [
      { slug: "load-calls", name: "Load calls", type: "metered" },
      { slug: "load-tokens", name: "Load tokens", type: "metered", unit: "token" }
    ],
    plans: [
      {
        slug: "load-free",
        name: "Load",
        autoEnable: true,
        features: [
          { slug: "load-calls", limit: null, reset: "none" },
          { slug: "load-tokens", limit: 1_000_000_000, reset: "none" }
        ]
      }
    ]
  })
  if (sync.status !== 200) throw new Error(`sync failed: ${JSON.stringify(sync.body)}`)
  for (let i = 0; i < customerCount; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, customerCount - i) }, async (_, j) => {
        const created = await send("POST", "/v1/customers", {
          id: customer(i + j),
          email: `${customer(i + j)}@example.com`
        })
        if (created.status !== 200) throw new Error(`customer failed: ${JSON.stringify(created.body)}`)
      })
    )
  }
}

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

const latencies: Record<Kind, Array<number>> = { check: [], track: [], read: [] }
const errors: Record<Kind, number> = { check: 0, track: 0, read: 0 }
const errorSamples: Array<string> = []
let acknowledgedTracks = 0
let acknowledgedValue = 0

/** One operation of the mix. */
const operation = async (n: number) => {
  const r = Math.random()
  const i = Math.floor(Math.random() * customerCount)
  const feature = Math.random() < 0.5 ? "load-calls" : "load-tokens"
  const kind: Kind = r < 0.7 ? "check" : r < 0.95 ? "track" : "read"
  const started = performance.now()
  try {
    let ok = false
    if (kind === "check") {
      const answer = await send("POST", "/v1/check", { customer: customer(i), feature, value: 1 })
      ok = answer.status === 200 && answer.body.allowed === true
      if (!ok && errorSamples.length < 5)
        errorSamples.push(`check ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`)
    } else if (kind === "track") {
      const value = 1 + (n % 3)
      const answer = await send(
        "POST",
        "/v1/track",
        { customer: customer(i), feature, value, metadata: { run } },
        {
          "idempotency-key": `load-${run}-${n}`
        }
      )
      ok = answer.status === 200 && answer.body.allowed === true
      if (ok) {
        acknowledgedTracks++
        acknowledgedValue += value
      } else if (errorSamples.length < 5) {
        errorSamples.push(`track ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`)
      }
    } else {
      const ref = encodeURIComponent(customer(i))
      const path = [
        `/v1/customers/${ref}`,
        `/v1/subscriptions?customer=${ref}`,
        `/v1/customers?limit=10&search=load-${i % 10}`,
        `/v1/customers/${ref}/usage/history?range=7d&groupBy=feature`
      ][n % 4]!
      const answer = await send("GET", path)
      ok = answer.status === 200
      if (!ok && errorSamples.length < 5)
        errorSamples.push(`GET ${path} ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`)
    }
    latencies[kind].push(performance.now() - started)
    if (!ok) errors[kind]++
  } catch (e) {
    latencies[kind].push(performance.now() - started)
    errors[kind]++
    if (errorSamples.length < 5) errorSamples.push(`${kind}: ${String(e)}`)
  }
}

/** Every balance of the organization against its events, every rollup against its events, this run's events. */
const consistency = async () => {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  try {
    const keyHash = createHash("sha256").update(apiKey).digest("hex")
    const org = (
      await db.query<{ organization_id: string }>("SELECT organization_id FROM api_keys WHERE key_hash = $1", [keyHash])
    ).rows[0]?.organization_id
    if (org === undefined) throw new Error("API_KEY is not a key of DATABASE_URL's database")
    const balances = await db.query(
      `SELECT b.customer_id, b.subject_id, b.used::text AS used, b.overage::text AS overage,
              COALESCE(SUM(e.from_plan), 0)::text AS events_used, COALESCE(SUM(e.overage), 0)::text AS events_overage
         FROM balances b LEFT JOIN usage_events e
           ON e.organization_id = b.organization_id AND e.customer_id = b.customer_id AND e.subject_id = b.subject_id
          AND e.created_at >= b.window_start AND (b.window_end IS NULL OR e.created_at < b.window_end)
        WHERE b.organization_id = $1
        GROUP BY b.customer_id, b.subject_id, b.used, b.overage`,
      [org]
    )
    const badBalances = balances.rows.filter((b) => b.used !== b.events_used || b.overage !== b.events_overage)
    const rollups = await db.query(
      `SELECT r.customer_id, r.feature_id, SUM(r.value)::text AS value, SUM(r.records)::text AS records,
              (SELECT COALESCE(SUM(e.value), 0) FROM usage_events e WHERE e.organization_id = r.organization_id
                 AND e.customer_id = r.customer_id AND e.feature_id = r.feature_id)::text AS events_value,
              (SELECT COUNT(*) FROM usage_events e WHERE e.organization_id = r.organization_id
                 AND e.customer_id = r.customer_id AND e.feature_id = r.feature_id)::text AS events
         FROM usage_rollups r WHERE r.organization_id = $1
        GROUP BY r.organization_id, r.customer_id, r.feature_id`,
      [org]
    )
    const badRollups = rollups.rows.filter((r) => r.value !== r.events_value || r.records !== r.events)
    const events = (
      await db.query<{ count: string; value: string }>(
        `SELECT COUNT(*)::text AS count, COALESCE(SUM(value), 0)::text AS value FROM usage_events
        WHERE organization_id = $1 AND metadata::json->>'run' = $2`,
        [org, run]
      )
    ).rows[0]!
    const eventsMatch =
      Number(events.count) === acknowledgedTracks && BigInt(events.value) === BigInt(acknowledgedValue) * 1_000_000n
    return {
      balances: balances.rows.length,
      badBalances,
      rollups: rollups.rows.length,
      badRollups,
      events,
      eventsMatch
    }
  } finally {
    await db.end()
  }
}

const main = async () => {
  await setup()
  let next = 0
  const deadline = performance.now() + seconds * 1000
  const worker = async () => {
    while (performance.now() < deadline) await operation(next++)
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: connections }, worker))
  const elapsed = (performance.now() - started) / 1000

  const all = [...latencies.check, ...latencies.track, ...latencies.read].sort((a, b) => a - b)
  const totalErrors = errors.check + errors.track + errors.read
  console.log(`load: ${connections} clients, ${seconds}s, ${customerCount} customers, run ${run}`)
  console.log(`  requests   ${all.length} (${(all.length / elapsed).toFixed(0)}/s)`)
  console.log(`  p50        ${percentile(all, 50).toFixed(2)} ms`)
  console.log(`  p99        ${percentile(all, 99).toFixed(2)} ms`)
  for (const kind of ["check", "track", "read"] as const) {
    const sorted = latencies[kind].sort((a, b) => a - b)
    console.log(
      `  ${kind.padEnd(6)}     ${String(sorted.length).padStart(7)} (${((100 * sorted.length) / Math.max(1, all.length)).toFixed(1)}%)` +
        `  p50 ${percentile(sorted, 50).toFixed(2)} ms  p99 ${percentile(sorted, 99).toFixed(2)} ms  errors ${errors[kind]}`
    )
  }
  console.log(`  errors     ${totalErrors}`)
  for (const sample of errorSamples) console.log(`    ${sample}`)

  const check = await consistency()
  console.log(`consistency (PostgreSQL):`)
  console.log(`  balances checked against their events   ${check.balances}, inconsistent ${check.badBalances.length}`)
  console.log(`  rollups checked against their events    ${check.rollups}, inconsistent ${check.badRollups.length}`)
  console.log(
    `  this run's events ${check.events.count} (value ${Number(check.events.value) / 1e6}) vs acknowledged tracks ` +
      `${acknowledgedTracks} (value ${acknowledgedValue}): ${check.eventsMatch ? "equal" : "DIFFERENT"}`
  )
  for (const bad of [...check.badBalances, ...check.badRollups].slice(0, 5)) console.log(`    ${JSON.stringify(bad)}`)
  const inconsistencies = check.badBalances.length + check.badRollups.length + (check.eventsMatch ? 0 : 1)
  if (totalErrors > 0 || inconsistencies > 0) process.exit(1)
}

await main()
