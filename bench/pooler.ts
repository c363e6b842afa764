/**
 * Many processes through one pooler (issue 38): 4 service processes through one PgBouncer in transaction mode (a pool
 * of 20 server connections) against one PostgreSQL, beside one process direct (prepared statements), and one process
 * direct with unnamed statements (`DATABASE_POOLER=transaction`: what the pooled processes send, without the pooler's
 * hop); and, to tell the pooler's hop from the split into processes, 1 process through PgBouncer (and with
 * `--four-direct`, 4 processes direct: 84 connections, past what a shared PostgreSQL's default 100 leaves). Prints throughput, latency, errors and exactness (every customer's balance equal to its events, its event count
 * grown by exactly the acknowledged answers) after every run. Any error or mismatch exits 1.
 *
 *   node_modules/.bin/bun bench/pooler.ts [--seconds 10] [--connections 32] [--customers 2000] [--runs 2]
 *     [--url postgres://postgres@127.0.0.1:5432/billing_bench_pooler] [--bouncer-port 6432] [--four-direct]
 *
 * The database at `--url` is created when missing and never dropped (each run's rows belong to a new organization);
 * PgBouncer is started with scripts/pgbouncer.sh (PGBOUNCER_POOL_SIZE=20) and stopped at the end. The services get
 * DATABASE_DIRECT_URL (LISTEN for key revocations) and leave DATABASE_POOLER to `auto`: they recognise PgBouncer.
 * The `--runs` runs of each configuration are interleaved; the medians are printed last.
 */
import { SQL } from "bun"
import { parseArgs } from "node:util"
import {
  createOrganization,
  drive,
  loadIds,
  measurer,
  median,
  ms,
  noteFailure,
  pad,
  pgStore,
  post,
  processTree,
  ROOT,
  type RunResult,
  type Service,
  single,
  startService,
  syncCatalog
} from "./support.ts"

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    connections: { type: "string", default: "32" },
    customers: { type: "string", default: "2000" },
    runs: { type: "string", default: "2" },
    url: { type: "string", default: "postgres://postgres@127.0.0.1:5432/billing_bench_pooler" },
    "bouncer-port": { type: "string", default: "6432" },
    // 4 processes direct: up to 84 of PostgreSQL's connections (100 by default, shared with whoever else uses it).
    "four-direct": { type: "boolean", default: false }
  }
})
const SECONDS = Number(args.seconds)
const CONNECTIONS = Number(args.connections)
const CUSTOMERS = Number(args.customers)
const RUNS = Number(args.runs)
const FEATURE = "calls"
const VALUE = 1
const direct = new URL(args.url!)
const database = direct.pathname.slice(1)
const pooled = new URL(args.url!)
pooled.port = args["bouncer-port"]!

const customerName = (i: number) => `customer-${i}`

const cleanups: Array<() => Promise<void> | void> = []
let failed = false

const ensureDatabase = async () => {
  const admin = new URL(args.url!)
  admin.pathname = "/postgres"
  const db = new SQL({ url: admin.toString(), max: 1 })
  const exists = (await db.unsafe(`SELECT 1 FROM pg_database WHERE datname = '${database}'`)).length > 0
  if (!exists) await db.unsafe(`CREATE DATABASE ${database}`)
  await db.close()
}

const startBouncer = () => {
  const started = Bun.spawnSync(["bash", "scripts/pgbouncer.sh", "start"], {
    cwd: ROOT,
    env: { ...process.env, PGBOUNCER_PORT: args["bouncer-port"]!, PGBOUNCER_POOL_SIZE: "20" },
    stderr: "inherit"
  })
  if (started.exitCode !== 0) throw new Error("pgbouncer did not start")
  const dir = started.stdout.toString().trim()
  cleanups.unshift(() => void Bun.spawnSync(["bash", "scripts/pgbouncer.sh", "stop", dir], { cwd: ROOT }))
}

const httpTrack = (services: ReadonlyArray<Service>) => {
  let next = 0
  return async (customer: string) => {
    const service = services[next++ % services.length]!
    const response = await fetch(`${service.baseUrl}/v1/track`, {
      method: "POST",
      headers: { authorization: `Bearer ${service.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ customer, feature: FEATURE, value: VALUE })
    })
    const answer = (await response.json()) as { allowed?: boolean; code?: string }
    const ok = response.status === 200 && answer.allowed === true
    if (!ok) noteFailure(`track ${response.status} ${answer.code}`)
    return ok
  }
}

const main = async () => {
  await ensureDatabase()
  startBouncer()
  const directEnv = { DATABASE_URL: direct.toString(), ENCRYPTION_KEY: process.env.ENCRYPTION_KEY ?? "0".repeat(64) }
  // A new organization each run: the database is kept.
  const apiKey = await createOrganization(directEnv, `bench-pooler-${Date.now().toString(36)}`)
  const start = async (env: Record<string, string>) => {
    const service = await startService({ ...directEnv, RENEWALS_INTERVAL_SECONDS: "0", ...env }, apiKey)
    cleanups.unshift(() => service.stop())
    return service
  }
  const one = await start({})
  await syncCatalog(one, FEATURE, 1_000_000_000)
  // Every customer (and its balance) through its first track.
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < CUSTOMERS) {
        const customer = customerName(next++)
        const r = await post(one, "/v1/track", { customer, feature: FEATURE, value: VALUE, customerData: {} })
        if (r.status !== 200 || r.body.allowed !== true) throw new Error(`set-up failed: ${JSON.stringify(r.body)}`)
      }
    })
  )
  const unnamed = await start({ DATABASE_POOLER: "transaction" })
  const throughBouncer = () => start({ DATABASE_URL: pooled.toString(), DATABASE_DIRECT_URL: direct.toString() })
  const many = await Promise.all(Array.from({ length: 4 }, throughBouncer))
  const manyDirect = args["four-direct"]
    ? [one, unnamed, ...(await Promise.all(Array.from({ length: 2 }, () => start({}))))]
    : []
  const store = pgStore(direct.toString())
  cleanups.unshift(() => store.close())
  await store.rows("ANALYZE")
  const ids = await loadIds(store, apiKey, FEATURE)
  const measured = measurer({ vacuum: true, store, ids, value: VALUE, onFailure: () => void (failed = true) })
  const configurations: ReadonlyArray<{ name: string; services: ReadonlyArray<Service> }> = [
    { name: "1 process direct (prepared statements)", services: [one] },
    { name: "1 process direct, unnamed statements", services: [unnamed] },
    { name: "1 process through PgBouncer", services: [many[0]!] },
    ...(manyDirect.length > 0
      ? [{ name: "4 processes direct (2 of them unnamed statements)", services: manyDirect }]
      : []),
    { name: "4 processes through PgBouncer (20 server conns)", services: many }
  ]
  console.log(
    `PostgreSQL ${database}: ${CUSTOMERS} balances, track over all of them (random customer per request), ` +
      `${CONNECTIONS} connections closed loop, ${SECONDS} s a run, ${RUNS} runs of each interleaved`
  )
  console.log(`${"configuration".padEnd(50)} ${pad("req/s", 7)} ${pad("p50", 6)} ${pad("p99", 6)} errors  wrong`)
  const results = new Map<string, Array<RunResult>>()
  for (let run = 0; run < RUNS; run++) {
    for (const c of run % 2 === 0 ? configurations : [...configurations].reverse()) {
      const { result, wrong } = await measured(() =>
        drive({
          connections: CONNECTIONS,
          seconds: SECONDS,
          request: single(() => customerName(Math.floor(Math.random() * CUSTOMERS)), httpTrack(c.services)),
          pids: c.services.flatMap((s) => processTree(s.pid)),
          database: true
        })
      )
      results.set(c.name, [...(results.get(c.name) ?? []), result])
      console.log(
        `${c.name.padEnd(50)} ${pad(result.rate.toFixed(0), 7)} ${pad(ms(result.p50), 6)} ${pad(ms(result.p99), 6)} ` +
          `${pad(result.errors, 6)} ${pad(wrong, 6)}`
      )
    }
  }
  console.log("\nmedians")
  const base = median(results.get(configurations[0]!.name)!.map((r) => r.rate))
  for (const c of configurations) {
    const runs = results.get(c.name)!
    const rate = median(runs.map((r) => r.rate))
    console.log(
      `${c.name.padEnd(50)} ${pad(rate.toFixed(0), 7)} req/s (${((rate / base) * 100).toFixed(0)}% of direct), ` +
        `p99 ${ms(median(runs.map((r) => r.p99)))} ms, errors ${runs.reduce((n, r) => n + r.errors, 0)}`
    )
  }
  console.log(
    failed ? "\nFAILED: errors or balances that disagree with their events" : "\nexact: every balance equals its events"
  )
}

try {
  await main()
} catch (error) {
  console.error(error)
  failed = true
} finally {
  for (const cleanup of cleanups) await cleanup()
}
process.exit(failed ? 1 : 0)
