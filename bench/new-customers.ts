/**
 * New customers at volume (issues 33.4 and 37.4): batches of first tracks whose every item creates its customer
 * (`customerData`), and what they do to other organizations' latency.
 *
 *   node_modules/.bin/bun bench/new-customers.ts [--db pg,sqlite] [--batches 10] [--size 1000] [--plans 2]
 *     [--stall-plans 2,20] [--parts volume,stall] [--pg postgres://postgres@127.0.0.1:5432]
 *     [--name billing_bench_new_customers]
 *
 * Per database, on a scratch database (bench/support.ts) with the service as a subprocess:
 * 1. volume: `--batches` batches of `--size` new customers, one after the other, on a catalog of `--plans` free
 *    `autoEnable` plans (in one group: each replaces the one before, as in the issue's reproduction). Statistics are
 *    taken once, on the empty tables, and never again (autovacuum is off on this machine): every batch runs on stale
 *    statistics. Printed: each batch's time and new customers/s; the last over the first (target ≤ 1.5); then batches
 *    of the same size naming customers that exist (the median of 3) and the new customers' median over it (target
 *    ≤ 3); and on PostgreSQL the plan of the batch's customer read (`contextReadMany`) over stale statistics, which
 *    must not scan the organization's customers. Targets: ≥ 1,000 new customers/s on PostgreSQL.
 * 2. stall: organization A tracks one known customer every 20 ms while organization B sends a batch of `--size` new
 *    customers on a catalog of N `autoEnable` plans, for each N of `--stall-plans`; printed: B's batch time and A's
 *    worst and p99 latency during it, against the bound (docs/decisions.md, "New customers in batches").
 * After each part the counts are checked: customers, subscriptions and usage events are exactly what was answered.
 */
import { parseArgs } from "node:util"
import { contextReadMany, manyReadParameters } from "../src/entitlements/hotStatements.ts"
import {
  createOrganization,
  median,
  ms,
  pad,
  percentile,
  post,
  scratchDatabase,
  type Service,
  sleep,
  startService,
  type Store
} from "./support.ts"

const { values: args } = parseArgs({
  options: {
    db: { type: "string", default: "pg,sqlite" },
    batches: { type: "string", default: "10" },
    size: { type: "string", default: "1000" },
    plans: { type: "string", default: "2" },
    "stall-plans": { type: "string", default: "2,20" },
    parts: { type: "string", default: "volume,stall" },
    // The scratch PostgreSQL database (dropped and created anew): one name a person, when several run it at once.
    name: { type: "string", default: "billing_bench_new_customers" },
    pg: { type: "string", default: process.env.BENCH_PG ?? "postgres://postgres@127.0.0.1:5432" }
  }
})
const BATCHES = Number(args.batches)
const SIZE = Number(args.size)
const PLANS = Number(args.plans)
const STALL_PLANS = args["stall-plans"]!.split(",").map(Number)
const PARTS = args.parts!.split(",")
const FEATURE = "calls"
/**
 * The worst latency organization A may see while B's batch runs (docs/decisions.md, "New customers in batches"). SQLite
 * with 20 plans: 2,000 ms, not 1,000 (one writer, and the batch's one transaction of 61,000 rows takes 0.9–1.5 s on
 * the shared machine: the record says what was measured).
 */
const STALL_BOUND_MS: Record<"pg" | "sqlite", Record<number, number>> = {
  pg: { 2: 250, 20: 1000 },
  sqlite: { 2: 250, 20: 2000 }
}
const TARGET_RATE = 1000

let failed = false
const check = (ok: boolean, what: string) => {
  if (!ok) {
    failed = true
    console.log(`  FAILED: ${what}`)
  }
}

const catalog = (plans: number) => ({
  features: [{ slug: FEATURE, name: "Calls", type: "metered" }],
  plans: Array.from({ length: plans }, (_, i) => ({
    slug: `p${i}`,
    name: `P${i}`,
    autoEnable: true,
    features: [{ slug: FEATURE, limit: 1e9, reset: "monthly" }]
  }))
})

const sync = async (service: Service, plans: number) => {
  const answer = await post(service, "/v1/sync", catalog(plans))
  if (answer.status !== 200) throw new Error(`sync failed: ${JSON.stringify(answer.body)}`)
}

/** One batch: its time, and how many of its items were allowed. */
const batch = async (service: Service, customers: ReadonlyArray<string>, create: boolean) => {
  const events = customers.map((customer) =>
    create
      ? { customer, feature: FEATURE, value: 1, customerData: { name: customer } }
      : { customer, feature: FEATURE, value: 1 }
  )
  const started = performance.now()
  const answer = await post(service, "/v1/track/batch", { events })
  const elapsed = performance.now() - started
  const allowed = answer.status === 200 ? answer.body.results.filter((r: any) => r.allowed === true).length : 0
  if (answer.status !== 200) console.log(`  batch answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  return { elapsed, allowed }
}

const counts = async (store: Store, org: string) => {
  const [row] = await store.rows(`SELECT
    (SELECT COUNT(*) FROM customers WHERE organization_id = '${org}') AS customers,
    (SELECT COUNT(*) FROM subscriptions WHERE organization_id = '${org}') AS subscriptions,
    (SELECT COUNT(*) FROM usage_events WHERE organization_id = '${org}') AS events`)
  return { customers: Number(row!.customers), subscriptions: Number(row!.subscriptions), events: Number(row!.events) }
}

const organizationOf = async (store: Store, apiKey: string) => {
  const keyHash = new Bun.CryptoHasher("sha256").update(apiKey).digest("hex")
  const [key] = await store.rows(`SELECT organization_id FROM api_keys WHERE key_hash = '${keyHash}'`)
  return String(key!.organization_id)
}

const volume = async (kind: "pg" | "sqlite") => {
  const db = await scratchDatabase(kind, { name: args.name!, pg: args.pg!, keep: false })
  const apiKey = await createOrganization(db.env)
  const service = await startService(db.env, apiKey)
  const store = db.store()
  try {
    const org = await organizationOf(store, apiKey)
    await sync(service, PLANS)
    // Statistics of the empty tables, and never again: every batch below runs on stale statistics.
    if (kind === "pg") await store.rows("ANALYZE")
    console.log(`\n${kind}: ${BATCHES} batches of ${SIZE} new customers, ${PLANS} autoEnable plans (stale statistics)`)
    const times: Array<number> = []
    let allowed = 0
    for (let b = 0; b < BATCHES; b++) {
      const names = Array.from({ length: SIZE }, (_, i) => `c${b}-${i}`)
      const run = await batch(service, names, true)
      times.push(run.elapsed)
      allowed += run.allowed
      console.log(
        `  batch ${pad(b + 1, 2)}: ${pad(ms(run.elapsed), 7)} ms  ${pad(Math.round((SIZE * 1000) / run.elapsed), 6)} new customers/s`
      )
    }
    const rate = (SIZE * 1000) / median(times)
    const growth = times.at(-1)! / times[0]!
    console.log(`  median ${ms(median(times))} ms: ${Math.round(rate)} new customers/s (target ≥ ${TARGET_RATE} on pg)`)
    console.log(`  last/first: ${growth.toFixed(2)} (target ≤ 1.50)`)
    if (kind === "pg") {
      check(rate >= TARGET_RATE, "rate")
      check(growth <= 1.5, "flat")
    }
    const known: Array<number> = []
    for (let b = 0; b < 3; b++) {
      const run = await batch(
        service,
        Array.from({ length: SIZE }, (_, i) => `c${b}-${i}`),
        false
      )
      known.push(run.elapsed)
      allowed += run.allowed
    }
    const ratio = median(times) / median(known)
    console.log(
      `  known customers: median ${ms(median(known))} ms a batch; new over known ${ratio.toFixed(2)} (target ≤ 3)`
    )
    check(ratio <= 3, "new over known")
    const after = await counts(store, org)
    check(after.customers === BATCHES * SIZE, `customers ${after.customers}`)
    check(after.subscriptions === BATCHES * SIZE * PLANS, `subscriptions ${after.subscriptions}`)
    check(after.events === allowed, `usage events ${after.events} for ${allowed} allowed`)
    if (kind === "pg") {
      // The batch's read of its references (new ones: not found), planned over the stale statistics.
      const refs = Array.from({ length: SIZE }, (_, i) => `fresh-${i}`)
      const parameters = manyReadParameters({ org, refs, feature: "", subjects: [] })
      const text = contextReadMany("pg").replace(/\$(\d+)/g, (_, n) => literal(parameters[Number(n) - 1]))
      const plan = (await store.rows(`EXPLAIN ${text}`)).map((r) => String(r["QUERY PLAN"]))
      // A lookup of the references is an index probe by organization and the column; one whose index condition is
      // the organization alone (the rest a filter) or a sequential scan reads every customer of the organization.
      const scans = plan.flatMap((line, i) =>
        /Seq Scan on customers/.test(line) ||
        (/Scan .*on customers/.test(line) &&
          /Cond: \(organization_id = '[^']*'::text\)$/.test(plan[i + 1]?.trim() ?? "") &&
          !/Cond: .*AND/.test(plan[i + 1] ?? ""))
          ? [`${line.trim()} / ${plan[i + 1]?.trim()} / ${plan[i + 2]?.trim()}`]
          : []
      )
      const [stats] = await store.rows(`SELECT reltuples FROM pg_class WHERE relname = 'customers'`)
      console.log(
        `  customer read over stale statistics (pg_class.reltuples ${stats!.reltuples} for ${after.customers} rows): ` +
          (scans.length === 0 ? "index probes by organization and reference only" : `SCANS: ${scans.join("; ")}`)
      )
      check(scans.length === 0, "a scan of the organization's customers")
      // Which tables were read whole meanwhile (a plan gone wrong on stale statistics shows here).
      const scanned = await store.rows(`SELECT relname, seq_scan, seq_tup_read, idx_scan FROM pg_stat_user_tables
        WHERE seq_tup_read > 10000 ORDER BY seq_tup_read DESC LIMIT 5`)
      for (const t of scanned) {
        console.log(`  scanned: ${t.relname} ${t.seq_scan} scans, ${t.seq_tup_read} rows (index scans ${t.idx_scan})`)
      }
      const indexes = await store.rows(`SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes
        WHERE relname = 'customers' ORDER BY idx_tup_read DESC`)
      console.log(
        `  customers' indexes (probes, entries read): ` +
          indexes.map((i) => `${i.indexrelname} ${i.idx_scan}, ${i.idx_tup_read}`).join("; ")
      )
    }
  } finally {
    await service.stop()
    await store.close()
    for (const c of db.cleanups) await c()
  }
}

const literal = (value: unknown) =>
  value === null ? "NULL" : typeof value === "number" ? String(value) : `'${String(value).replace(/'/g, "''")}'`

const stall = async (kind: "pg" | "sqlite") => {
  const db = await scratchDatabase(kind, { name: args.name!, pg: args.pg!, keep: false })
  const keyA = await createOrganization(db.env)
  // B: an organization per catalog (a sync that auto-enables plans attaches them to every existing customer).
  const keysB = new Map<number, string>()
  for (const plans of STALL_PLANS) keysB.set(plans, await createOrganization(db.env, `bench-b${plans}`))
  const a = await startService(db.env, keyA)
  const store = db.store()
  try {
    await sync(a, 1)
    const first = await post(a, "/v1/track", { customer: "a", feature: FEATURE, value: 0, customerData: {} })
    if (first.status !== 200) throw new Error(`A's customer: ${JSON.stringify(first.body)}`)
    console.log(`\n${kind}: A tracks every 20 ms while B sends a batch of ${SIZE} new customers`)
    for (const plans of STALL_PLANS) {
      const b = { ...a, apiKey: keysB.get(plans)! }
      await sync(b, plans)
      let running = true
      const latencies: Array<number> = []
      const tracker = (async () => {
        while (running) {
          const started = performance.now()
          const answer = await post(a, "/v1/track", { customer: "a", feature: FEATURE, value: 1 })
          if (answer.status !== 200) check(false, `A's track answered ${answer.status}`)
          latencies.push(performance.now() - started)
          await sleep(20)
        }
      })()
      await sleep(200)
      latencies.length = 0
      const run = await batch(
        b,
        Array.from({ length: SIZE }, (_, i) => `s${plans}-${i}`),
        true
      )
      running = false
      await tracker
      const sorted = [...latencies].sort((x, y) => x - y)
      const bound = STALL_BOUND_MS[kind][plans] ?? 1000
      const worst = sorted.at(-1) ?? 0
      console.log(
        `  ${pad(plans, 2)} plans: B's batch ${pad(ms(run.elapsed), 7)} ms; A: ${latencies.length} tracks, p99 ` +
          `${ms(percentile(sorted, 99))} ms, worst ${ms(worst)} ms (bound ${bound} ms: ${worst <= bound ? "met" : "NOT met"})`
      )
      check(worst <= bound, `stall bound with ${plans} plans`)
      check(run.allowed === SIZE, `B's items allowed: ${run.allowed}`)
    }
  } finally {
    await a.stop()
    await store.close()
    for (const c of db.cleanups) await c()
  }
}

for (const kind of args.db!.split(",") as ReadonlyArray<"pg" | "sqlite">) {
  if (PARTS.includes("volume")) await volume(kind)
  if (PARTS.includes("stall")) await stall(kind)
}
process.exit(failed ? 1 : 0)
