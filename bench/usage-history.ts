/**
 * Usage history at volume (issue 5): loads 2,000,000 usage events for one organization (90 days, 1,000 customers,
 * 5 features) into PostgreSQL, then times `GET /v1/customers/{id}/usage/history?range=90d&granularity=day&groupBy=feature`
 * for one customer over HTTP and prints p50/p99 over 200 requests.
 *
 *   psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE billing_bench_usage'
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/billing_bench_usage bun bench/usage-history.ts \
 *     [--events 2000000] [--customers 1000] [--features 5] [--days 90] [--requests 200] [--timezone UTC]
 *     [--reuse bench-usage-xxxxxxxx]   # time again against an organization a previous run loaded (no loading)
 *
 * Use a dedicated database: every run creates a new organization (`bench-usage-…`) and leaves its rows behind
 * (drop the database to clean up). The service runs in-process (`makeApp` + `serve` on a random port) and is
 * reached over real HTTP. Customers and the catalog go through the API; the events are generated inside PostgreSQL
 * (`INSERT … SELECT` over `generate_series`, seeded, in batches) straight into `usage_events`, and `usage_rollups`
 * is then filled from them with the same 15-minute bucketing as the track transaction — so the two agree exactly,
 * as if every event had been tracked. The answer is checked once against the raw events at the end.
 */
import { SqlClient } from "@effect/sql"
import { Effect, LogLevel, Option, Redacted } from "effect"
import { parseArgs } from "node:util"
import { Catalog } from "../src/catalog/Catalog.ts"
import { ROLLUP_MS } from "../src/entitlements/EntitlementsRepo.ts"
import { makeApp } from "../src/app/App.ts"
import { serve } from "../src/http/server.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { AppConfigTest } from "../src/platform/config.ts"
import { planBuckets } from "../src/usage/buckets.ts"
import { UsageRepo } from "../src/usage/UsageRepo.ts"

const { values: args } = parseArgs({
  options: {
    events: { type: "string", default: "2000000" },
    customers: { type: "string", default: "1000" },
    features: { type: "string", default: "5" },
    days: { type: "string", default: "90" },
    requests: { type: "string", default: "200" },
    timezone: { type: "string", default: "UTC" },
    batch: { type: "string", default: "250000" },
    reuse: { type: "string" }
  }
})
const databaseUrl = process.env.DATABASE_URL?.trim()
if (!databaseUrl || !databaseUrl.startsWith("postgres")) {
  console.error(
    "Set DATABASE_URL to a dedicated PostgreSQL database, e.g. postgres://postgres@127.0.0.1:5432/billing_bench_usage"
  )
  process.exit(2)
}
const EVENTS = Number(args.events)
const CUSTOMERS = Number(args.customers)
const FEATURES = Number(args.features)
const DAYS = Number(args.days)
const REQUESTS = Number(args.requests)
const BATCH = Number(args.batch)
const timezone = args.timezone!

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
const seconds = (since: number) => `${((performance.now() - since) / 1000).toFixed(1)} s`
const summary = (label: string, latencies: Array<number>) => {
  latencies.sort((a, b) => a - b)
  const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length
  console.log(
    `${label}: n=${latencies.length}  p50 ${percentile(latencies, 50).toFixed(2)} ms  p99 ${percentile(latencies, 99).toFixed(2)} ms` +
      `  mean ${mean.toFixed(2)} ms  max ${latencies[latencies.length - 1]!.toFixed(2)} ms`
  )
}

const app = makeApp(AppConfigTest({ databaseUrl: Option.some(Redacted.make(databaseUrl)), logLevel: "none" }))
const run = <A, E>(effect: Effect.Effect<A, E, any>) => app.runtime.runPromise(effect as Effect.Effect<A, E, never>)
await run(Effect.void) // migrations
const server = serve(app, { port: 0, hostname: "127.0.0.1", logLevel: LogLevel.None })
const baseUrl = `http://127.0.0.1:${server.port}`

try {
  const started = performance.now()
  const slug = args.reuse ?? `bench-usage-${crypto.randomUUID().slice(0, 8)}`
  const { org, apiKey } = await run(
    Effect.gen(function* () {
      const orgs = yield* Organizations
      const org = args.reuse === undefined ? yield* orgs.create(slug) : yield* orgs.get(slug)
      const { apiKey } = yield* orgs.createKey(org.id)
      return { org, apiKey }
    })
  )
  const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(baseUrl + path, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const json = (await response.json()) as any
    if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`)
    return json
  }

  const featureSlugs = Array.from({ length: FEATURES }, (_, i) => `bench-f${i}`)
  const featureIdsOf = () =>
    run(
      Effect.map(
        Effect.flatMap(Catalog, (c) => c.snapshot(org.id)),
        (s) => featureSlugs.map((f) => s.features.get(f)!.id)
      )
    )

  /** The catalog and customers through the API, then the events and their rollups straight into PostgreSQL. */
  const load = async () => {
    // FEATURES unlimited metered features on an auto-enabled plan.
    await call("POST", "/v1/sync", {
      features: featureSlugs.map((s, i) => ({ slug: s, name: `Bench feature ${i}`, type: "metered", unit: "units" })),
      plans: [
        {
          slug: "bench",
          name: "Bench",
          autoEnable: true,
          features: featureSlugs.map((s) => ({ slug: s, limit: null, reset: "none" }))
        }
      ]
    })
    const featureIds = await featureIdsOf()
    // Customers, 25 requests at a time.
    const customerIds: Array<string> = new Array(CUSTOMERS)
    let nextCustomer = 0
    await Promise.all(
      Array.from({ length: 25 }, async () => {
        while (nextCustomer < CUSTOMERS) {
          const i = nextCustomer++
          customerIds[i] = (
            await call("POST", "/v1/customers", { id: `bench-${i}`, email: `bench-${i}@example.com` })
          ).id
        }
      })
    )
    console.log(`organization ${slug}: ${FEATURES} features, ${CUSTOMERS} customers (${seconds(started)})`)

    // Events, generated inside PostgreSQL: customer = g mod C, feature = (g div C) mod F, a random instant of the
    // last DAYS days, 1 to 100 units (micro-units in the table).
    const now = Date.now()
    const span = DAYS * 86_400_000
    const loading = performance.now()
    await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE UNLOGGED TABLE IF NOT EXISTS bench_customers (organization_id TEXT, n INTEGER, id TEXT)`
        yield* sql`CREATE UNLOGGED TABLE IF NOT EXISTS bench_features (organization_id TEXT, n INTEGER, id TEXT)`
        yield* sql`INSERT INTO bench_customers ${sql.insert(customerIds.map((id, n) => ({ organizationId: org.id, n, id })))}`
        yield* sql`INSERT INTO bench_features ${sql.insert(featureIds.map((id, n) => ({ organizationId: org.id, n, id })))}`
        for (let lo = 0; lo < EVENTS; lo += BATCH) {
          const hi = Math.min(EVENTS, lo + BATCH) - 1
          yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`SET LOCAL synchronous_commit = off`
              yield* sql`SELECT setseed(${(lo / EVENTS) * 0.9})`
              yield* sql`
            INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
              from_plan, from_bonus, from_addon, overage, billable, metadata, created_at)
            SELECT ${org.id}, 'evt_bench_' || lpad(e.g::text, 10, '0'), c.id, f.id, f.id, NULL, e.v, e.v, e.v, 0, 0, 0, 0,
              '{}', e.t
            FROM (
              SELECT g, (1 + floor(random() * 100))::bigint * 1000000 AS v,
                ${now - span}::bigint + floor(random() * ${span})::bigint AS t
              FROM generate_series(${lo}::bigint, ${hi}::bigint) AS g
            ) e
            JOIN bench_customers c ON c.organization_id = ${org.id} AND c.n = e.g % ${CUSTOMERS}
            JOIN bench_features f ON f.organization_id = ${org.id} AND f.n = (e.g / ${CUSTOMERS}) % ${FEATURES}`
            })
          )
          console.log(`  events ${hi + 1}/${EVENTS} (${seconds(loading)})`)
        }
        // The rollups exactly as the track transaction keeps them: one row per 15-minute UTC bucket.
        const rolling = performance.now()
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET LOCAL synchronous_commit = off`
            yield* sql`
          INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
          SELECT organization_id, customer_id, feature_id, created_at - created_at % ${ROLLUP_MS}, SUM(value), COUNT(*)
          FROM usage_events WHERE organization_id = ${org.id}
          GROUP BY 1, 2, 3, 4`
          })
        )
        const rollups = yield* sql<{
          n: number
        }>`SELECT COUNT(*) AS n FROM usage_rollups WHERE organization_id = ${org.id}`
        console.log(`  rollups ${rollups[0]!.n} rows (${seconds(rolling)})`)
        yield* sql`DELETE FROM bench_customers WHERE organization_id = ${org.id}`
        yield* sql`DELETE FROM bench_features WHERE organization_id = ${org.id}`
        yield* sql`ANALYZE usage_events`
        yield* sql`ANALYZE usage_rollups`
      })
    )
    console.log(`loaded ${EVENTS} events in ${seconds(loading)}`)
  }

  if (args.reuse === undefined) await load()
  const featureIds = await featureIdsOf()

  // The timed requests: one customer, 90 days, daily, grouped by feature.
  const customerRef = `bench-${Math.floor(CUSTOMERS / 2)}`
  const customerId = (await call("GET", `/v1/customers/${customerRef}`)).id as string
  const query = new URLSearchParams({ range: "90d", granularity: "day", groupBy: "feature", timezone })
  const path = `/v1/customers/${customerRef}/usage/history?${query}`
  for (let i = 0; i < 10; i++) await call("GET", path) // warm-up
  const latencies: Array<number> = []
  let last: any
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now()
    last = await call("GET", path)
    latencies.push(performance.now() - t)
  }
  console.log(`\nGET ${path}`)
  console.log(
    `  ${last.series.length} buckets, ${last.breakdown.length} features, ${last.totals.records} events, ` +
      `${JSON.stringify(last).length} bytes`
  )
  summary("  HTTP", latencies)

  // The SQL alone (the repository read), for the breakdown of the time.
  const plan = planBuckets({ range: "90d", granularity: "day", timezone, now: Date.now() })
  if (plan._tag !== "Ok") throw new Error("bad plan")
  const sqlLatencies: Array<number> = []
  let rows = 0
  await run(
    Effect.gen(function* () {
      const repo = yield* UsageRepo
      for (let i = 0; i < REQUESTS; i++) {
        const t = performance.now()
        rows = (yield* repo.sumByBucket(org.id, customerId, featureIds, plan.plan.buckets)).length
        sqlLatencies.push(performance.now() - t)
      }
    })
  )
  const rollupRows = await run(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) =>
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage_rollups WHERE organization_id = ${org.id}
      AND customer_id = ${customerId} AND bucket_start >= ${plan.plan.startMs} AND bucket_start < ${plan.plan.endMs}`
    )
  )
  summary(`  SQL (${rollupRows[0]!.n} rollup rows read, ${rows} sums returned)`, sqlLatencies)

  // Checked once against the raw events (never read by the endpoint).
  const raw = await run(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) =>
        sql<{ n: number; total: string }>`SELECT COUNT(*) AS n, COALESCE(SUM(value), 0) AS total FROM usage_events
      WHERE organization_id = ${org.id} AND customer_id = ${customerId}
        AND created_at >= ${plan.plan.startMs} AND created_at < ${plan.plan.endMs}`
    )
  )
  const expected = { records: Number(raw[0]!.n), usage: Number(BigInt(raw[0]!.total) / 1_000_000n) }
  const same = expected.records === last.totals.records && expected.usage === last.totals.usage
  console.log(`  raw events check: ${same ? "ok" : "MISMATCH"} (${JSON.stringify(expected)})`)
  console.log(`total ${seconds(started)}`)
  if (!same) process.exitCode = 1
} finally {
  server.stop(true)
  await app.dispose()
}
