/**
 * What the benches share (bench/track.ts, bench/batch.ts): the machine's and the processes' CPU from /proc, the
 * service as a subprocess with an organization created by the CLI, a scratch database, the stores the benches read
 * balances and events from, the exactness check after every run, and the closed/open-loop driver.
 */
import { Database } from "bun:sqlite"
import { SQL } from "bun"
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const ROOT = join(import.meta.dir, "..")
export const BUN = process.execPath

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
export const percentile = (sorted: ArrayLike<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

// ---------------------------------------------------------------- machine and process accounting

export const TICK_MS = 10 // USER_HZ = 100 on Linux
export const readProc = (path: string) => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}
/** The process and all its descendants. */
export const processTree = (pid: number): Array<number> => {
  const out = [pid]
  for (const task of readdirSync(`/proc/${pid}/task`, { withFileTypes: true })) {
    const children = readProc(`/proc/${pid}/task/${task.name}/children`).trim()
    if (children !== "") for (const child of children.split(/\s+/)) out.push(...processTree(Number(child)))
  }
  return out
}
/** The fields of /proc/<pid>/stat after the command name (which may hold spaces): [1] ppid, [11] utime, [12] stime,
 * [13] cutime, [14] cstime (reaped children), in clock ticks. */
export const statFields = (stat: string) => stat.slice(stat.lastIndexOf(")") + 2).split(" ")
export const ticks = (fields: ReadonlyArray<string>, from: number) =>
  Number(fields[from] ?? 0) + Number(fields[from + 1] ?? 0)
export const cpuTicks = (pids: ReadonlyArray<number>) =>
  pids.reduce((sum, pid) => sum + ticks(statFields(readProc(`/proc/${pid}/stat`)), 11), 0)
/**
 * The database server's CPU ticks: every postgres process, plus what the postmaster has reaped of its exited children
 * (the ceiling's connections come and go).
 */
export const databaseTicks = () => {
  let sum = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const stat = readProc(`/proc/${entry}/stat`)
    if (!stat.includes("(postgres)")) continue
    const fields = statFields(stat)
    sum += ticks(fields, 11)
    if (!readProc(`/proc/${fields[1]}/stat`).includes("(postgres)")) sum += ticks(fields, 13)
  }
  return sum
}
export const machineIdle = () => {
  const cpu = readProc("/proc/stat").split("\n")[0]!.split(/\s+/).slice(1).map(Number)
  return { idle: cpu[3]! + cpu[4]!, total: cpu.reduce((a, b) => a + b, 0) }
}
export const memoryOf = (pid: number) => {
  const status = readProc(`/proc/${pid}/status`)
  const kb = (field: string) => Number(status.match(new RegExp(`${field}:\\s+(\\d+) kB`))?.[1] ?? 0)
  return { pid, rssMb: kb("VmRSS") / 1024, hwmMb: kb("VmHWM") / 1024 }
}

// ---------------------------------------------------------------- the service

export interface Service {
  readonly baseUrl: string
  readonly apiKey: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

export const freePort = () => {
  const probe = Bun.serve({ port: 0, fetch: () => new Response() })
  const port = probe.port
  probe.stop(true)
  return port
}

/**
 * An organization and its API key, created by the CLI. Its answer is taken as soon as it is printed, and a CLI still
 * running 5 s later is stopped (it once stayed alive on PostgreSQL after answering: issue 33, test/cli-exit.test.ts).
 */
export const createOrganization = async (env: Record<string, string>, slug = "bench"): Promise<string> => {
  const cli = Bun.spawn([BUN, "src/cli.ts", "org", "create", slug, "--name", "Bench", "--json"], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  let out = ""
  const decoder = new TextDecoder()
  const reader = cli.stdout.getReader()
  const deadline = Date.now() + 60_000
  while (!out.includes("\n")) {
    const chunk = await Promise.race([reader.read(), sleep(deadline - Date.now()).then(() => undefined)])
    if (chunk === undefined) throw new Error("org create printed nothing in 60 s")
    if (chunk.done) break
    out += decoder.decode(chunk.value)
  }
  const exited = await Promise.race([cli.exited, sleep(5000).then(() => undefined)])
  if (exited === undefined) cli.kill("SIGKILL")
  else if (exited !== 0) throw new Error(`org create failed: ${await new Response(cli.stderr).text()}`)
  return JSON.parse(out).apiKey as string
}

/** The service on `env`'s database, serving `apiKey`'s organization (another process may serve the same one). */
export const startService = async (env: Record<string, string>, apiKey: string, root = ROOT): Promise<Service> => {
  const port = freePort()
  // BENCH_SERVICE_FLAGS: extra flags for the service's bun, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof".
  const flags = (process.env.BENCH_SERVICE_FLAGS ?? "").split(" ").filter((f) => f !== "")
  // BENCH_SERVICE: another entry point (an experiment); the default is the service itself.
  const child = Bun.spawn([BUN, ...flags, process.env.BENCH_SERVICE ?? "src/main.ts"], {
    cwd: root,
    // As `npm start` and the Dockerfile run it (BUN_JSC_forceRAMSize, MIMALLOC_PURGE_*: see docs/decisions.md,
    // "Performance").
    env: {
      LOG_LEVEL: "info",
      BUN_JSC_forceRAMSize: "1073741824",
      MIMALLOC_PURGE_DELAY: "10000",
      MIMALLOC_PURGE_HOLES: "0",
      ...process.env,
      ...env,
      PORT: String(port),
      APP_ENV: "sandbox"
    },
    // BENCH_SERVICE_LOG: keep the service's log lines (one per request, with its duration) in that file.
    stdout: process.env.BENCH_SERVICE_LOG ? Bun.file(process.env.BENCH_SERVICE_LOG) : "ignore",
    stderr: "inherit"
  })
  const baseUrl = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`)
    const ready = await fetch(`${baseUrl}/ready`).then(
      (r) => r.ok,
      () => false
    )
    if (ready) break
    if (i > 300) throw new Error("the service did not become ready in 30 s")
    await sleep(100)
  }
  return {
    baseUrl,
    apiKey,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM")
      const timeout = setTimeout(() => child.kill("SIGKILL"), 10_000)
      await child.exited
      clearTimeout(timeout)
    }
  }
}

export const post = async (service: Service, path: string, body: unknown) => {
  const response = await fetch(service.baseUrl + path, {
    method: "POST",
    headers: { authorization: `Bearer ${service.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  return { status: response.status, body: (await response.json()) as any }
}

// ---------------------------------------------------------------- exactness

export interface Store {
  readonly rows: (sql: string) => Promise<Array<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

export const pgStore = (url: string): Store => {
  const db = new SQL({ url, max: 1 })
  return { rows: async (text) => [...(await db.unsafe(text))], close: () => db.close() }
}
export const sqliteStore = (file: string): Store => {
  const db = new Database(file, { readonly: true })
  return { rows: async (text) => db.query(text).all() as Array<Record<string, unknown>>, close: async () => db.close() }
}

export interface Ids {
  readonly organizationId: string
  readonly featureId: string
  readonly planId: string
  readonly keyHash: string
  readonly customers: Map<string, string>
}

/** The organization's ids of `apiKey`, of the feature `feature` and the plan `bench` (as `syncCatalog` makes them). */
export const loadIds = async (store: Store, apiKey: string, feature: string): Promise<Ids> => {
  const keyHash = new Bun.CryptoHasher("sha256").update(apiKey).digest("hex")
  const [key] = await store.rows(`SELECT organization_id FROM api_keys WHERE key_hash = '${keyHash}'`)
  const org = String(key!.organization_id)
  const [f] = await store.rows(`SELECT id FROM features WHERE organization_id = '${org}' AND slug = '${feature}'`)
  const [plan] = await store.rows(`SELECT id FROM plans WHERE organization_id = '${org}' AND slug = 'bench'`)
  const customers = await store.rows(`SELECT id, external_id FROM customers WHERE organization_id = '${org}'`)
  return {
    organizationId: org,
    featureId: String(f!.id),
    planId: String(plan!.id),
    keyHash,
    customers: new Map(customers.map((c) => [String(c.external_id), String(c.id)]))
  }
}

/** Per customer (by external id): its balance and its events; and the rollups' and events' totals. */
export const snapshot = async (store: Store, ids: Ids) => {
  const org = ids.organizationId
  const f = ids.featureId
  const rows = await store.rows(`
    SELECT c.external_id AS ext, COALESCE(b.used, 0) AS used, COALESCE(e.n, 0) AS n, COALESCE(e.total, 0) AS total
    FROM customers c
    LEFT JOIN balances b ON b.organization_id = c.organization_id AND b.customer_id = c.id AND b.subject_id = '${f}'
    LEFT JOIN (SELECT customer_id, COUNT(*) AS n, SUM(value) AS total FROM usage_events
               WHERE organization_id = '${org}' AND feature_id = '${f}' GROUP BY customer_id) e ON e.customer_id = c.id
    WHERE c.organization_id = '${org}'`)
  const [rollups] = await store.rows(`SELECT COALESCE(SUM(value), 0) AS v, COALESCE(SUM(records), 0) AS r
    FROM usage_rollups WHERE organization_id = '${org}' AND feature_id = '${f}'`)
  const [events] = await store.rows(`SELECT COUNT(*) AS n, COALESCE(SUM(value), 0) AS v
    FROM usage_events WHERE organization_id = '${org}' AND feature_id = '${f}'`)
  return {
    customers: new Map(
      rows.map((r) => [String(r.ext), { used: Number(r.used), n: Number(r.n), total: Number(r.total) }])
    ),
    rollupsAgree: Number(rollups!.v) === Number(events!.v) && Number(rollups!.r) === Number(events!.n)
  }
}
export type Snapshot = Awaited<ReturnType<typeof snapshot>>

/**
 * The number of customers whose balance or event count disagrees with what was acknowledged (0 = exact); every
 * acknowledged event is of `value`.
 */
export const verify = (before: Snapshot, after: Snapshot, acknowledged: Map<string, number>, value: number) => {
  let wrong = after.rollupsAgree ? 0 : 1
  for (const [ext, now] of after.customers) {
    const was = before.customers.get(ext) ?? { used: 0, n: 0, total: 0 }
    if (now.used !== now.total) wrong++
    else if (now.n - was.n !== (acknowledged.get(ext) ?? 0)) wrong++
    else if (now.total - was.total !== (acknowledged.get(ext) ?? 0) * value * 1_000_000) wrong++
  }
  return wrong
}

// ---------------------------------------------------------------- load

/** The first few distinct failures of a run (status and code), for the report. */
export const failures = new Map<string, number>()
export const noteFailure = (what: string) => failures.set(what, (failures.get(what) ?? 0) + 1)

/** What one request recorded: the customers of its acknowledged items (one per item) and its failed items. */
export interface Outcome {
  readonly acknowledged: ReadonlyArray<string>
  readonly errors: number
}

/** A request of one item for a customer `pick` chooses: acknowledged when `once` answers true. */
export const single =
  (pick: () => string, once: (customer: string) => Promise<boolean>) => async (): Promise<Outcome> => {
    const customer = pick()
    return (await once(customer)) ? { acknowledged: [customer], errors: 0 } : { acknowledged: [], errors: 1 }
  }

export interface RunResult {
  readonly requests: number
  readonly rate: number
  /** Acknowledged items (one per acknowledged request when a request is one item), and per second. */
  readonly items: number
  readonly itemRate: number
  readonly p50: number
  readonly p99: number
  /** Failed items (a request that threw: one). */
  readonly errors: number
  readonly acknowledged: Map<string, number>
  readonly cpuUsPerRequest: number | null
  /** PostgreSQL's CPU per request (all its processes; null on SQLite, which runs inside the service). */
  readonly dbUsPerRequest: number | null
  /** This bench process's CPU per request: the load generator's own share of the machine. */
  readonly clientUsPerRequest: number
  /** The same three per acknowledged item. */
  readonly cpuUsPerItem: number | null
  readonly dbUsPerItem: number | null
  readonly clientUsPerItem: number
  readonly idle: number
}

/**
 * `connections` workers, each one request at a time, for `seconds`. With `rate`, an open loop: request i is due
 * at start + i/rate and its latency counts from then (a late start is the server's delay, not hidden).
 */
export const drive = async (options: {
  readonly connections: number
  readonly seconds: number
  readonly request: () => Promise<Outcome>
  readonly rate?: number
  readonly pids?: ReadonlyArray<number>
  /** Count PostgreSQL's CPU too. */
  readonly database?: boolean
}): Promise<RunResult> => {
  const latencies: Array<number> = []
  const acknowledged = new Map<string, number>()
  let errors = 0
  let items = 0
  let slot = 0
  const cpu0 = options.pids === undefined ? 0 : cpuTicks(options.pids)
  const db0 = options.database === true ? databaseTicks() : 0
  const client0 = process.cpuUsage()
  const idle0 = machineIdle()
  const started = performance.now()
  const deadline = started + options.seconds * 1000
  const interval = options.rate === undefined ? 0 : 1000 / options.rate
  const worker = async () => {
    while (true) {
      let due = performance.now()
      if (options.rate !== undefined) {
        due = started + slot++ * interval
        if (due >= deadline) return
        const wait = due - performance.now()
        if (wait > 1) await sleep(wait)
      } else if (due >= deadline) return
      let outcome: Outcome
      try {
        outcome = await options.request()
      } catch (e) {
        noteFailure(String(e))
        outcome = { acknowledged: [], errors: 1 }
      }
      latencies.push(performance.now() - due)
      for (const customer of outcome.acknowledged) acknowledged.set(customer, (acknowledged.get(customer) ?? 0) + 1)
      items += outcome.acknowledged.length
      errors += outcome.errors
    }
  }
  await Promise.all(Array.from({ length: options.connections }, worker))
  const elapsed = (performance.now() - started) / 1000
  const idle1 = machineIdle()
  const cpu1 = options.pids === undefined ? 0 : cpuTicks(options.pids)
  const db1 = options.database === true ? databaseTicks() : 0
  const client = process.cpuUsage(client0)
  const sorted = Float64Array.from(latencies).sort()
  const serviceUs = options.pids === undefined ? null : (cpu1 - cpu0) * TICK_MS * 1000
  const dbUs = options.database === true ? (db1 - db0) * TICK_MS * 1000 : null
  const clientUs = client.user + client.system
  const per = (n: number) => (us: number | null) => (us === null ? null : us / Math.max(1, n))
  const [perRequest, perItem] = [per(latencies.length), per(items)]
  return {
    requests: latencies.length,
    rate: latencies.length / elapsed,
    items,
    itemRate: items / elapsed,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    errors,
    acknowledged,
    cpuUsPerRequest: perRequest(serviceUs),
    dbUsPerRequest: perRequest(dbUs),
    clientUsPerRequest: perRequest(clientUs)!,
    cpuUsPerItem: perItem(serviceUs),
    dbUsPerItem: perItem(dbUs),
    clientUsPerItem: perItem(clientUs)!,
    idle: (idle1.idle - idle0.idle) / Math.max(1, idle1.total - idle0.total)
  }
}

export const pad = (s: string | number, n: number) => String(s).padStart(n)
export const ms = (v: number) => v.toFixed(v < 10 ? 2 : 1)
export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
export const percent = (ratio: number) => `${(ratio * 100).toFixed(0)}%`
export const micros = (v: number | null) => (v === null ? "-" : v.toFixed(0))

// ---------------------------------------------------------------- set-up

/**
 * A scratch database for the service: PostgreSQL's `name` (dropped and created; dropped again at clean-up unless
 * `keep`) or a temporary SQLite data directory. The environment of the service and the CLI, the store to check it
 * with (once the service has migrated it), and the clean-ups to run at the end.
 */
export const scratchDatabase = async (
  kind: "pg" | "sqlite",
  options: { readonly name: string; readonly pg: string; readonly keep: boolean; readonly reuse?: boolean }
) => {
  const cleanups: Array<() => Promise<void> | void> = []
  if (kind === "pg") {
    if (!options.name.startsWith("billing_bench_")) throw new Error("refusing a database not named billing_bench_*")
    const admin = new SQL({ url: `${options.pg}/postgres`, max: 1 })
    const exists = (await admin.unsafe(`SELECT 1 FROM pg_database WHERE datname = '${options.name}'`)).length > 0
    const reused = options.reuse === true && exists
    if (!reused) {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${options.name} WITH (FORCE)`)
      await admin.unsafe(`CREATE DATABASE ${options.name}`)
    }
    const url = `${options.pg}/${options.name}`
    if (!options.keep) cleanups.push(() => admin.unsafe(`DROP DATABASE IF EXISTS ${options.name} WITH (FORCE)`))
    cleanups.push(() => admin.close())
    return { env: { DATABASE_URL: url }, pgUrl: url, cleanups, store: () => pgStore(url), reused }
  }
  const dir = mkdtempSync(join(tmpdir(), "billing-bench-"))
  if (!options.keep) cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const env: Record<string, string> = { DATABASE_URL: "", DATA_DIR: dir }
  return { env, pgUrl: "", cleanups, store: () => sqliteStore(join(dir, "billing.db")), reused: false }
}

/** The catalog: one metered feature `feature` with a limit of `limit` on the auto-enabled plan `bench`. */
export const syncCatalog = async (service: Service, feature: string, limit: number) => {
  const sync = await post(service, "/v1/sync", {
    features: [{ slug: feature, name: "Bench calls", type: "metered" }],
    plans: [{ slug: "bench", name: "Bench", autoEnable: true, features: [{ slug: feature, limit, reset: "monthly" }] }]
  })
  if (sync.status !== 200) throw new Error(`sync failed: ${JSON.stringify(sync.body)}`)
}

/**
 * Before a measured run, the writes that earlier work left behind done: PostgreSQL's dirty buffers (`CHECKPOINT`, if
 * `pg` is its store) and the OS's dirty pages (`sync`). Otherwise a run pays for the one before it: PostgreSQL's
 * checkpointer and the kernel's writeback kept writing GBs of a ceiling run, or of PostgreSQL's whole section before
 * SQLite's, during the next run, and slowed its syncs.
 */
export const quietDisk = async (pg?: Store) => {
  if (pg !== undefined) await pg.rows("CHECKPOINT")
  Bun.spawnSync(["sync"])
}

/**
 * A measured run: on PostgreSQL a VACUUM (ANALYZE) first (what autovacuum does for a database in service; it may be
 * off, as on this project's machines, where runs of 100,000s of balance updates and rollup upserts otherwise leave
 * every later run on bloated tables and indexes; pgbench, likewise, vacuums before each run), then the disk quiet
 * (`quietDisk`), then the run between two snapshots, and the number of customers whose balance or events disagree
 * with what it acknowledged. `onFailure` is called on any error or disagreement; the run's first distinct failures
 * are printed.
 */
export const measurer =
  (options: {
    readonly vacuum: boolean
    readonly store: Store
    /**
     * PostgreSQL's store, checkpointed before the run whichever database it measures (both share the disk); by
     * default `store` when `vacuum` stands for PostgreSQL.
     */
    readonly checkpoint?: Store
    readonly ids: Ids
    readonly value: number
    readonly onFailure: () => void
  }) =>
  async (run: () => Promise<RunResult>) => {
    if (options.vacuum) await options.store.rows("VACUUM (ANALYZE)")
    await quietDisk(options.checkpoint ?? (options.vacuum ? options.store : undefined))
    const before = await snapshot(options.store, options.ids)
    failures.clear()
    const result = await run()
    const wrong = verify(before, await snapshot(options.store, options.ids), result.acknowledged, options.value)
    if (wrong > 0 || result.errors > 0) options.onFailure()
    if (failures.size > 0) {
      console.log(
        `    failures: ${[...failures]
          .slice(0, 5)
          .map(([what, n]) => `${what} ×${n}`)
          .join("; ")}`
      )
    }
    return { result, wrong }
  }
