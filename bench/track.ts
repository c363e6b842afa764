/**
 * check/track at the speed of the database (issues 7 and 17): one run measures the database ceiling and the service,
 * on PostgreSQL and on the embedded SQLite, bare and in production's configuration, and checks every balance against
 * the events after every run.
 *
 *   node_modules/.bin/bun bench/track.ts [--db pg,sqlite] [--seconds 10] [--ceiling-seconds 5] [--customers 10000]
 *     [--connections 8,32,64] [--rss-seconds 30] [--routes track,check] [--pg postgres://postgres@127.0.0.1:5432]
 *     [--parts ceiling,service,half,rss,production,endpoints,quiet,durability] [--runs 3] [--skip-ceiling] [--rate N] [--keep]
 *
 * It starts and stops everything it needs:
 * - a scratch PostgreSQL database `billing_bench_track` (dropped and re-created; dropped again at the end unless
 *   `--keep`) and/or a temporary SQLite data directory;
 * - the service as a subprocess (`bun src/main.ts` with `npm start`'s environment, logging at info to /dev/null, as
 *   production would log), with an organization created by the CLI, a catalog (a metered feature with a limit on an
 *   auto-enabled plan), and `--customers` customers plus one hot customer, each created by its first track
 *   (`customerData`), which also creates its balance; then ANALYZE (PostgreSQL), as autovacuum would in service, and
 *   before every measured run VACUUM (ANALYZE), as autovacuum would and as pgbench does before its runs; then the disk
 *   quiet (`quietDisk`: PostgreSQL's CHECKPOINT, the OS's `sync`) on either database.
 *   Environment variables of the bench pass through to the service.
 *
 * Then, per database, the parts `--parts` names (all by default):
 * 1. `ceiling` (PostgreSQL): `bench/ceiling.ts` replays the statements of an allowed track with a raw driver loop
 *    (`Bun.sql`), as this version runs them and as the first version did, over all balances and over the hot one, at
 *    each connection count;
 * 2. `service`: the service over HTTP, `POST /v1/track` and `POST /v1/check` with `sendEvent: true`, over all balances
 *    (a random customer per request) and over the hot balance, at each connection count (closed loop);
 * 3. `half`: the service at half of its peak track rate (open loop, latency from the scheduled start): p99 there; on
 *    PostgreSQL the raw driver at the same rate beside it, the database's own latency there;
 * 4. `quiet`: track over all balances from one connection (a quiet service: every request its own read and write);
 * 5. `production` (PostgreSQL): the same database served by two more processes in production's configuration,
 *    `RATE_LIMIT_RPS=1000000` (a limit this load never reaches, so every request passes the gate) and traces exported
 *    to an OTLP/HTTP receiver the bench starts (`bench/otlp-receiver.ts`, one per process, counting spans), sampled
 *    parent-based at 10% (`OTEL_TRACES_SAMPLER_ARG=0.1`) and at 100%; track over all balances at the highest
 *    connection count, `--runs` runs of each configuration interleaved (the order rotates every round), then the
 *    medians and their ratio to the bare service's;
 * 5b. `endpoints`: outbound events' cost on track (issue 14): the same service with two webhook endpoints subscribed
 *    to every type (receiving on a local HTTP server of the bench's) against none, `--runs` interleaved runs of each
 *    at the highest connection count (the endpoints created before and deleted after each run of theirs); the
 *    medians and their ratio, and the deliveries received;
 * 6. `durability` (SQLite): the same data directory served with `SQLITE_SYNCHRONOUS=normal` beside the default
 *    (`full`: the log synced at every commit), `--runs` interleaved runs of each at the highest connection count and
 *    one from one connection each, then the medians and the cost of the sync;
 * 7. `rss`: a `--rss-seconds` run at peak, then the service's resident memory (VmRSS, and VmHWM = the peak) from /proc.
 * After every run: every customer's balance equals the sum of its events, its event count grew by exactly the
 * acknowledged (200, allowed) answers, and the usage rollups add up to the events. Any mismatch or error exits 1.
 *
 * Columns: req/s; p50/p99 latency; errors (non-200 or not allowed); ratio = req/s over the peak ceiling of the same
 * balances (PostgreSQL: the highest rate either ceiling script reached at any connection count), or in the production
 * and durability parts over the bare (or `normal`) median; cpu µs/req = CPU time per request of the service (all its
 * processes), of PostgreSQL (all its processes, exited ones included) and of this bench process (the client; in the
 * ceiling runs, the raw driver); idle = the machine's idle CPU during the run (2 cores shared by the bench client, the
 * service and the database).
 *
 * Experiments: BENCH_SERVICE_FLAGS (extra flags for the service's bun, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/p"),
 * BENCH_SERVICE (another entry point), BENCH_SERVICE_LOG (keep the service's log lines in a file).
 */
import { SQL } from "bun"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { type CeilingContext, ceilingScripts } from "./ceiling.ts"
import {
  BUN,
  ROOT,
  TICK_MS,
  cpuTicks,
  createOrganization,
  drive,
  loadIds,
  measurer,
  median,
  memoryOf,
  micros,
  ms,
  noteFailure,
  pad,
  percent,
  post,
  processTree,
  type RunResult,
  type Service,
  scratchDatabase,
  single,
  sleep,
  startService,
  syncCatalog
} from "./support.ts"

const PARTS = ["ceiling", "service", "half", "quiet", "production", "endpoints", "durability", "rss", "versus"] as const
/** Parts run unless `--parts` says otherwise (`versus` is an experiment: only when named). */
const DEFAULT_PARTS = PARTS.filter((p) => p !== "versus")
type Part = (typeof PARTS)[number]

const { values: args } = parseArgs({
  options: {
    db: { type: "string", default: "pg,sqlite" },
    seconds: { type: "string", default: "10" },
    "ceiling-seconds": { type: "string", default: "5" },
    customers: { type: "string", default: "10000" },
    connections: { type: "string", default: "8,32,64" },
    "rss-seconds": { type: "string", default: "30" },
    routes: { type: "string", default: "track,check" },
    pg: { type: "string", default: process.env.BENCH_PG ?? "postgres://postgres@127.0.0.1:5432" },
    keep: { type: "boolean", default: false },
    parts: { type: "string", default: DEFAULT_PARTS.join(",") },
    // The `versus` part: a second service with these extra variables ("A=1,B=2") and/or from another copy of the
    // code (a directory with src/main.ts), interleaved with this one.
    "versus-env": { type: "string", default: "" },
    "versus-root": { type: "string" },
    // Interleaved runs of each configuration in the production and durability parts (medians of these).
    runs: { type: "string", default: "3" },
    // The service alone (PostgreSQL): no ceiling runs, no ratios; for repeating one phase quickly.
    "skip-ceiling": { type: "boolean", default: false },
    // Phase 3 at this rate (req/s) instead of half of the measured peak: two versions compared at the same load.
    rate: { type: "string" }
  }
})

const SECONDS = Number(args.seconds)
const CEILING_SECONDS = Number(args["ceiling-seconds"])
const CUSTOMERS = Number(args.customers)
const CONNECTIONS = args.connections!.split(",").map(Number)
const RSS_SECONDS = Number(args["rss-seconds"])
const RATE = args.rate === undefined ? undefined : Number(args.rate)
if (RATE !== undefined && !(RATE > 0)) throw new Error(`--rate must be a positive number of requests per second`)
const ROUTES = args.routes!.split(",") as Array<Route>
const RUNS = Number(args.runs)
if (!(RUNS >= 1)) throw new Error("--runs must be at least 1")
const CHOSEN = new Set(args.parts!.split(",").filter((p) => p !== "") as Array<Part>)
for (const part of CHOSEN)
  if (!PARTS.includes(part)) throw new Error(`--parts: no part '${part}' (${PARTS.join(", ")})`)
if (args["skip-ceiling"]) CHOSEN.delete("ceiling")
const PEAK_CONNECTIONS = Math.max(...CONNECTIONS)
const SCRATCH_DB = "billing_bench_track"
const FEATURE = "bench-calls"
const HOT = "bench-hot"
const VALUE = 1

type Route = "track" | "check"
type Scenario = "many" | "hot"

const customerName = (i: number) => `bench-${i}`

interface Receiver {
  readonly url: string
  readonly pid: number
  readonly count: () => Promise<{ readonly spans: number; readonly requests: number }>
  readonly stop: () => Promise<void>
}

/** An OTLP/HTTP trace receiver in a process of its own (bench/otlp-receiver.ts). */
const startReceiver = async (): Promise<Receiver> => {
  const child = Bun.spawn([BUN, join(import.meta.dir, "otlp-receiver.ts")], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "inherit"
  })
  const reader = child.stdout.getReader()
  let out = ""
  while (!out.includes("\n")) {
    const chunk = await reader.read()
    if (chunk.done) throw new Error("the OTLP receiver exited before listening")
    out += new TextDecoder().decode(chunk.value)
  }
  const url = out.trim()
  return {
    url,
    pid: child.pid,
    count: () => fetch(`${url}/count`).then((r) => r.json() as Promise<{ spans: number; requests: number }>),
    stop: async () => {
      child.kill("SIGTERM")
      await child.exited
    }
  }
}

/** The catalog, then every customer (and its balance) through its first track. */
const setUp = async (service: Service) => {
  await syncCatalog(service, FEATURE, 1_000_000_000)
  const names = [HOT, ...Array.from({ length: CUSTOMERS }, (_, i) => customerName(i))]
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < names.length) {
        const customer = names[next++]!
        const r = await post(service, "/v1/track", { customer, feature: FEATURE, value: VALUE, customerData: {} })
        if (r.status !== 200 || r.body.allowed !== true)
          throw new Error(`set-up track failed: ${JSON.stringify(r.body)}`)
      }
    })
  )
  return (performance.now() - started) / 1000
}

const httpOnce = (service: Service, route: Route) => {
  const headers = { authorization: `Bearer ${service.apiKey}`, "content-type": "application/json" }
  const url = `${service.baseUrl}/v1/${route}`
  return async (customer: string) => {
    const body =
      route === "track"
        ? JSON.stringify({ customer, feature: FEATURE, value: VALUE })
        : JSON.stringify({ customer, feature: FEATURE, value: VALUE, sendEvent: true })
    const response = await fetch(url, { method: "POST", headers, body })
    const answer = (await response.json()) as { allowed?: boolean; code?: string }
    const ok = response.status === 200 && answer.allowed === true
    if (!ok) noteFailure(`${route} ${response.status} ${answer.code}`)
    return ok
  }
}

const picker = (scenario: Scenario) =>
  scenario === "hot" ? () => HOT : () => customerName(Math.floor(Math.random() * CUSTOMERS))

// ---------------------------------------------------------------- printing

const cpuColumn = (r: RunResult) =>
  [r.cpuUsPerRequest, r.dbUsPerRequest, r.clientUsPerRequest].map((v) => (v === null ? "-" : v.toFixed(0))).join("/")
const header = () =>
  console.log(
    `  ${"what".padEnd(22)}${pad("conns", 6)}${pad("req/s", 8)}${pad("p50 ms", 9)}${pad("p99 ms", 9)}${pad("errors", 8)}` +
      `${pad("ratio", 7)}${pad("cpu µs/req svc/db/client", 26)}${pad("idle", 6)}  exact`
  )
const line = (what: string, connections: number | string, r: RunResult, ratio: number | null, wrong: number) =>
  console.log(
    `  ${what.padEnd(22)}${pad(connections, 6)}${pad(r.rate.toFixed(0), 8)}${pad(ms(r.p50), 9)}${pad(ms(r.p99), 9)}` +
      `${pad(r.errors, 8)}${pad(ratio === null ? "-" : `${(ratio * 100).toFixed(0)}%`, 7)}` +
      `${pad(cpuColumn(r), 26)}${pad(`${(r.idle * 100).toFixed(0)}%`, 6)}  ` +
      (wrong === 0 ? "ok" : `${wrong} WRONG`)
  )

// ---------------------------------------------------------------- one database

let failed = false

/** One configuration's runs in an interleaved comparison. */
interface Arm {
  readonly name: string
  readonly service: Service
  readonly runs: Array<RunResult>
}

/** The medians of each arm's runs and their ratio to the first arm's (the reference). */
const summarize = <A extends Arm>(title: string, arms: ReadonlyArray<A>, extra: (arm: A) => string = () => "") => {
  console.log(title)
  const reference = median(arms[0]!.runs.map((r) => r.rate))
  const referenceCpu = median(arms[0]!.runs.map((r) => r.cpuUsPerRequest ?? 0))
  for (const arm of arms) {
    const rate = median(arm.runs.map((r) => r.rate))
    const cpu = median(arm.runs.map((r) => r.cpuUsPerRequest ?? 0))
    const db = arm.runs[0]!.dbUsPerRequest === null ? null : median(arm.runs.map((r) => r.dbUsPerRequest ?? 0))
    const rates = arm.runs.map((r) => r.rate.toFixed(0)).join(", ")
    console.log(
      `  ${arm.name.padEnd(20)} median ${pad(rate.toFixed(0), 5)} req/s (${percent(rate / reference)}; runs ${rates}); ` +
        `cpu µs/req svc/db ${micros(cpu)}/${micros(db)}` +
        (arm === arms[0] ? "" : ` (service ${cpu >= referenceCpu ? "+" : ""}${(cpu - referenceCpu).toFixed(0)} µs)`) +
        extra(arm)
    )
  }
}

const benchDatabase = async (kind: "pg" | "sqlite") => {
  const cleanups: Array<() => Promise<void> | void> = []
  try {
    const scratch = await scratchDatabase(kind, { name: SCRATCH_DB, pg: args.pg!, keep: args.keep! })
    cleanups.push(...scratch.cleanups)
    const { env, pgUrl } = scratch
    const apiKey = await createOrganization(env)
    const service = await startService(env, apiKey)
    cleanups.unshift(() => service.stop())
    const setupSeconds = await setUp(service)
    const store = scratch.store()
    cleanups.unshift(() => store.close())
    // Fresh statistics after the bulk set-up, as autovacuum would give a database in service.
    if (kind === "pg") await store.rows("ANALYZE")
    const ids = await loadIds(store, service.apiKey, FEATURE)
    const database = kind === "pg"
    const pidsOf = (s: Service) => processTree(s.pid)
    const pids = pidsOf(service)

    console.log(
      `\n${kind === "pg" ? "PostgreSQL" : "SQLite (embedded default)"}: ${CUSTOMERS} balances + 1 hot; ` +
        `service ${pids.length === 1 ? "1 process" : `${pids.length} processes`}; set-up ${setupSeconds.toFixed(0)} s`
    )

    const measured = measurer({
      vacuum: kind === "pg",
      store,
      ids,
      value: VALUE,
      onFailure: () => void (failed = true)
    })
    /** Track over all balances (or the hot one) through `target`, closed loop. */
    const trackRun = (target: Service, connections: number, seconds = SECONDS, scenario: Scenario = "many") =>
      measured(() =>
        drive({
          connections,
          seconds,
          request: single(picker(scenario), httpOnce(target, "track")),
          pids: pidsOf(target),
          database
        })
      )

    // 1. The ceiling (PostgreSQL): the service's statements from a raw driver.
    const ceilingPeak: Record<Scenario, number> = { many: 0, hot: 0 }
    const customers = [...ids.customers].map(([externalId, id]) => ({ id, externalId }))
    const ctx: CeilingContext = {
      organizationId: ids.organizationId,
      keyHash: ids.keyHash,
      featureId: ids.featureId,
      planId: ids.planId,
      valueMicro: VALUE * 1_000_000,
      customers
    }
    const byName = new Map(customers.map((c) => [c.externalId, c]))
    const ceilingRun = async (
      name: string,
      scenario: Scenario,
      connections: number,
      seconds: number,
      rate?: number
    ) => {
      const db = new SQL({ url: pgUrl, max: connections })
      const script = ceilingScripts[name]!
      try {
        return await measured(() =>
          drive({
            connections,
            seconds,
            request: single(picker(scenario), async (customer) => {
              await script(db, ctx, byName.get(customer)!)
              return true
            }),
            ...(rate === undefined ? {} : { rate }),
            database: true
          })
        )
      } finally {
        await db.close()
      }
    }
    const ceiling = kind === "pg" && CHOSEN.has("ceiling")
    if (ceiling) {
      for (const name of ["current", "v1"] as const) {
        console.log(
          `ceiling: Bun.sql replaying the statements of an allowed track, ${
            name === "current" ? "as this version runs them" : "as the first version ran them (reference)"
          }`
        )
        header()
        for (const scenario of ["many", "hot"] as const) {
          for (const connections of CONNECTIONS) {
            const { result, wrong } = await ceilingRun(name, scenario, connections, CEILING_SECONDS)
            ceilingPeak[scenario] = Math.max(ceilingPeak[scenario], result.rate)
            line(`${scenario === "hot" ? "1 hot balance" : `${CUSTOMERS} balances`}`, connections, result, null, wrong)
          }
        }
      }
    }

    // 2. The service over HTTP.
    const peak = { rate: 0, connections: PEAK_CONNECTIONS, hotRate: 0, hotConnections: PEAK_CONNECTIONS }
    if (CHOSEN.has("service")) {
      console.log(`service over HTTP${ceiling ? " (ratio = req/s / peak ceiling of the same balances)" : ""}`)
      header()
      for (const route of ROUTES) {
        for (const scenario of ["many", "hot"] as const) {
          for (const connections of CONNECTIONS) {
            const { result, wrong } = await measured(() =>
              drive({
                connections,
                seconds: SECONDS,
                request: single(picker(scenario), httpOnce(service, route)),
                pids,
                database
              })
            )
            if (route === "track" && scenario === "many" && result.rate > peak.rate) {
              peak.rate = result.rate
              peak.connections = connections
            }
            if (route === "track" && scenario === "hot" && result.rate > peak.hotRate) {
              peak.hotRate = result.rate
              peak.hotConnections = connections
            }
            const what = `${route === "track" ? "track" : "check+send"} ${scenario === "hot" ? "hot" : "many"}`
            line(what, connections, result, ceiling ? result.rate / ceilingPeak[scenario] : null, wrong)
          }
        }
      }
    }

    // 3. Half of the peak, open loop: latency as a client at that load sees it.
    if (CHOSEN.has("half") && (RATE !== undefined || peak.rate > 0)) {
      console.log(
        RATE === undefined
          ? "service at half of its peak track rate (open loop)"
          : `service at ${RATE} track/s (open loop)`
      )
      header()
      for (const scenario of ["many", "hot"] as const) {
        const rate = RATE ?? (scenario === "hot" ? peak.hotRate : peak.rate) / 2
        const { result, wrong } = await measured(() =>
          drive({
            connections: PEAK_CONNECTIONS,
            seconds: SECONDS,
            request: single(picker(scenario), httpOnce(service, "track")),
            rate,
            pids,
            database
          })
        )
        line(`track ${scenario} @${rate.toFixed(0)}/s`, PEAK_CONNECTIONS, result, null, wrong)
        if (ceiling) {
          // The database's own latency at that rate, for reference: the raw driver running this version's statements
          // (one hot balance: the first version's, which queue on the row lock instead of retrying a moved version).
          const script = scenario === "hot" ? "v1" : "current"
          const ceiling = await ceilingRun(script, scenario, PEAK_CONNECTIONS, SECONDS, rate)
          line(`  ceiling (${script}) @${rate.toFixed(0)}/s`, PEAK_CONNECTIONS, ceiling.result, null, ceiling.wrong)
        }
      }
    }

    // 4. A quiet service: one connection, so every track is a read and a write of its own.
    if (CHOSEN.has("quiet")) {
      console.log("a quiet service: track from one connection")
      header()
      const { result, wrong } = await trackRun(service, 1)
      line("track many", 1, result, null, wrong)
    }

    // 5. Production's configuration (PostgreSQL): a rate limit and trace export, against the bare service.
    if (kind === "pg" && CHOSEN.has("production")) {
      const receivers = [await startReceiver(), await startReceiver()]
      for (const r of receivers) cleanups.unshift(() => r.stop())
      const traced = async (ratio: string, receiver: Receiver) => {
        const started = await startService(
          {
            ...env,
            RATE_LIMIT_RPS: "1000000",
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_TRACES_SAMPLER_ARG: ratio
          },
          apiKey
        )
        cleanups.unshift(() => started.stop())
        return started
      }
      const arms: Array<Arm & { receiver?: Receiver; tracks: number }> = [
        { name: "bare", service, runs: [], tracks: 0 },
        {
          name: "production 10%",
          service: await traced("0.1", receivers[0]!),
          runs: [],
          receiver: receivers[0]!,
          tracks: 0
        },
        {
          name: "production 100%",
          service: await traced("1", receivers[1]!),
          runs: [],
          receiver: receivers[1]!,
          tracks: 0
        }
      ]
      console.log(
        `production's configuration: RATE_LIMIT_RPS=1000000, traces to an OTLP/HTTP receiver sampled at 10% and 100%; ` +
          `track many at ${PEAK_CONNECTIONS} connections, ${RUNS} interleaved runs each`
      )
      header()
      // Warm-up of the new processes (their first requests compile the code), not printed unless it fails.
      for (const arm of arms.slice(1)) {
        const { result, wrong } = await trackRun(arm.service, PEAK_CONNECTIONS, 3)
        arm.tracks += result.requests
        if (wrong > 0 || result.errors > 0) line(`${arm.name} warm-up`, PEAK_CONNECTIONS, result, null, wrong)
      }
      for (let round = 0; round < RUNS; round++) {
        for (let i = 0; i < arms.length; i++) {
          const arm = arms[(i + round) % arms.length]!
          const { result, wrong } = await trackRun(arm.service, PEAK_CONNECTIONS)
          arm.runs.push(result)
          arm.tracks += result.requests
          line(`${arm.name} #${round + 1}`, PEAK_CONNECTIONS, result, null, wrong)
        }
      }
      await sleep(1500) // the exporters' last batch (they send every second)
      const spans = new Map<Arm, number>()
      const receiverCpu = new Map<Arm, number>()
      for (const arm of arms) {
        if (arm.receiver === undefined) continue
        spans.set(arm, (await arm.receiver.count()).spans)
        receiverCpu.set(arm, cpuTicks([arm.receiver.pid]))
      }
      summarize(
        "production's configuration against the bare service (medians; ratio = req/s over the bare median)",
        arms,
        (arm) => {
          const n = spans.get(arm)
          if (n === undefined) return ""
          const perTrack = n / Math.max(1, arm.tracks)
          const receiverUs = ((receiverCpu.get(arm) ?? 0) * TICK_MS * 1000) / Math.max(1, arm.tracks)
          return `; ${perTrack.toFixed(2)} spans exported per track, receiver ${receiverUs.toFixed(0)} µs/track`
        }
      )
    }

    // 5b. Outbound events: two endpoints subscribed to every type against none, interleaved.
    if (CHOSEN.has("endpoints")) {
      let deliveries = 0
      const receiver = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: async (request) => {
          await request.text()
          deliveries++
          return new Response(null, { status: 204 })
        }
      })
      cleanups.unshift(() => receiver.stop(true))
      const endpoints = {
        create: async () => {
          const made: Array<string> = []
          for (let i = 0; i < 2; i++) {
            const r = await post(service, "/v1/webhook-endpoints", {
              url: `http://127.0.0.1:${receiver.port}/hook/${i}`
            })
            if (r.status !== 200) throw new Error(`endpoint not created: ${JSON.stringify(r.body)}`)
            made.push(r.body.id as string)
          }
          return made
        },
        remove: async (made: ReadonlyArray<string>) => {
          for (const id of made) {
            const r = await fetch(`${service.baseUrl}/v1/webhook-endpoints/${id}`, {
              method: "DELETE",
              headers: { authorization: `Bearer ${service.apiKey}` }
            })
            if (r.status !== 200) throw new Error(`endpoint not deleted: ${r.status}`)
          }
        }
      }
      const arms: Array<Arm & { readonly endpoints: boolean }> = [
        { name: "no endpoints", service, runs: [], endpoints: false },
        { name: "two endpoints", service, runs: [], endpoints: true }
      ]
      console.log(
        `outbound events: two webhook endpoints subscribed to every type against none; track many at ` +
          `${PEAK_CONNECTIONS} connections, ${RUNS} interleaved runs each`
      )
      header()
      for (let round = 0; round < RUNS; round++) {
        for (let i = 0; i < arms.length; i++) {
          const arm = arms[(i + round) % arms.length]!
          const made = arm.endpoints ? await endpoints.create() : []
          const { result, wrong } = await trackRun(service, PEAK_CONNECTIONS)
          await endpoints.remove(made)
          arm.runs.push(result)
          line(`${arm.name} #${round + 1}`, PEAK_CONNECTIONS, result, null, wrong)
        }
      }
      summarize("outbound events: two endpoints against none (medians; ratio = req/s over none's)", arms)
      console.log(`  deliveries received: ${deliveries} (only threshold crossings write an event on track)`)
    }

    // 6. Durability (SQLite): the log synced at every commit (the default) against only at checkpoints.
    if (kind === "sqlite" && CHOSEN.has("durability")) {
      const normal = await startService({ ...env, SQLITE_SYNCHRONOUS: "normal" }, apiKey)
      cleanups.unshift(() => normal.stop())
      const arms: Array<Arm> = [
        { name: "synchronous NORMAL", service: normal, runs: [] },
        { name: "synchronous FULL", service, runs: [] }
      ]
      console.log(
        `durability: the default (FULL, the log synced at every commit) against SQLITE_SYNCHRONOUS=normal (synced at ` +
          `checkpoints); track many at ${PEAK_CONNECTIONS} connections, ${RUNS} interleaved runs each, then one connection`
      )
      header()
      {
        const { result, wrong } = await trackRun(normal, PEAK_CONNECTIONS, 3)
        if (wrong > 0 || result.errors > 0) line("NORMAL warm-up", PEAK_CONNECTIONS, result, null, wrong)
      }
      for (let round = 0; round < RUNS; round++) {
        for (let i = 0; i < arms.length; i++) {
          const arm = arms[(i + round) % arms.length]!
          const { result, wrong } = await trackRun(arm.service, PEAK_CONNECTIONS)
          arm.runs.push(result)
          line(`${arm.name.replace("synchronous ", "")} #${round + 1}`, PEAK_CONNECTIONS, result, null, wrong)
        }
      }
      const quiet = new Map<Arm, RunResult>()
      for (const arm of arms) {
        const { result, wrong } = await trackRun(arm.service, 1)
        quiet.set(arm, result)
        line(`${arm.name.replace("synchronous ", "")} quiet`, 1, result, null, wrong)
      }
      summarize("durability: FULL against NORMAL (medians at peak; ratio = req/s over NORMAL's)", arms, (arm) => {
        const q = quiet.get(arm)!
        return `; from one connection ${q.rate.toFixed(0)} req/s, ${micros(q.cpuUsPerRequest)} µs/req, p50 ${ms(q.p50)} ms`
      })
      await normal.stop() // (and again, harmlessly, at clean-up)
    }

    // An experiment: this service against another configuration or another copy of the code, interleaved.
    if (CHOSEN.has("versus")) {
      const extra = Object.fromEntries(
        args["versus-env"]!.split(",")
          .filter((kv) => kv !== "")
          .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)])
      )
      const other = await startService({ ...env, ...extra }, apiKey, args["versus-root"] ?? ROOT)
      cleanups.unshift(() => other.stop())
      const label = [args["versus-root"], args["versus-env"]].filter((x) => x).join(" ")
      const arms: Array<Arm> = [
        { name: "this", service, runs: [] },
        { name: "versus", service: other, runs: [] }
      ]
      const quiet: Array<Arm> = [
        { name: "this", service, runs: [] },
        { name: "versus", service: other, runs: [] }
      ]
      console.log(
        `versus ${label}: track many at ${PEAK_CONNECTIONS} connections and at 1, ${RUNS} interleaved runs each`
      )
      header()
      await trackRun(other, PEAK_CONNECTIONS, 3)
      for (let round = 0; round < RUNS; round++) {
        for (let i = 0; i < arms.length; i++) {
          const k = (i + round) % arms.length
          const peakRun = await trackRun(arms[k]!.service, PEAK_CONNECTIONS)
          arms[k]!.runs.push(peakRun.result)
          line(`${arms[k]!.name} #${round + 1}`, PEAK_CONNECTIONS, peakRun.result, null, peakRun.wrong)
          const quietRun = await trackRun(quiet[k]!.service, 1)
          quiet[k]!.runs.push(quietRun.result)
          line(`${quiet[k]!.name} #${round + 1}`, 1, quietRun.result, null, quietRun.wrong)
        }
      }
      summarize(`versus at ${PEAK_CONNECTIONS} connections (medians)`, arms)
      summarize("versus at 1 connection (medians)", quiet)
      await other.stop()
    }

    // 7. Memory after a long run at peak.
    if (CHOSEN.has("rss") && RSS_SECONDS > 0) {
      const { result, wrong } = await measured(() =>
        drive({
          connections: peak.connections,
          seconds: RSS_SECONDS,
          request: single(picker("many"), httpOnce(service, "track")),
          pids,
          database
        })
      )
      console.log(`memory after ${RSS_SECONDS} s of track at ${peak.connections} connections`)
      header()
      line(
        `track many ${RSS_SECONDS}s`,
        peak.connections,
        result,
        ceiling ? result.rate / ceilingPeak.many : null,
        wrong
      )
      const memory = processTree(service.pid).map(memoryOf)
      const total = memory.reduce((sum, m) => sum + m.rssMb, 0)
      for (const m of memory)
        console.log(`  pid ${m.pid}: RSS ${m.rssMb.toFixed(0)} MB (peak ${m.hwmMb.toFixed(0)} MB)`)
      console.log(`  service RSS total: ${total.toFixed(0)} MB`)
    }
  } finally {
    for (const cleanup of cleanups) await Promise.resolve(cleanup()).catch((e) => console.error("cleanup:", e))
  }
}

const started = performance.now()
for (const kind of args.db!.split(",") as Array<"pg" | "sqlite">) await benchDatabase(kind)
console.log(`\nbench: ${((performance.now() - started) / 60_000).toFixed(1)} minutes`)
if (failed) {
  console.error("\nFAILED: errors or a balance that differs from the acknowledged events (see above)")
  process.exit(1)
}
