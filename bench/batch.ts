/**
 * Throughput of `POST /v1/track/batch` (issue 15): one run measures, per database, the database ceiling of a batch's
 * work and the service over HTTP, and checks every balance against the events after every run.
 *
 *   node_modules/.bin/bun bench/batch.ts [--db pg,sqlite] [--seconds 10] [--warmup 2] [--customers 10000] [--connections 4]
 *     [--sizes 100,1000] [--pg postgres://postgres@127.0.0.1:5432] [--keep] [--reuse]
 *
 * It starts and stops everything it needs (bench/support.ts): a scratch PostgreSQL database `billing_bench_batch`
 * and/or a temporary SQLite data directory; the service as a subprocess with `npm start`'s environment; an
 * organization created by the CLI; a catalog (one metered feature with a huge limit on an auto-enabled plan); and
 * `--customers` customers plus one hot one, created by batches of 100 items carrying `customerData`, one at a time. Then ANALYZE
 * (PostgreSQL), and before every measured run VACUUM (ANALYZE) of PostgreSQL's when it is the one measured, as
 * bench/track.ts does; then, on either database, the disk quiet (bench/support.ts `quietDisk`: PostgreSQL's CHECKPOINT,
 * the OS's `sync`), so that no run pays for the writes an earlier one left behind (a ceiling run's, or the other
 * database's run just before).
 *
 * Both databases are set up and served first, side by side. Then, line by line (over `--customers` balances, each item
 * a random customer, and over one hot balance, every item the same customer; for each batch size of `--sizes`),
 * closed loop from `--connections` concurrent clients, 1. then 2. on both services; 3. follows for every line:
 * 1. ceiling (PostgreSQL): a raw driver (`Bun.sql`, `--connections` connections) doing the batch's work per item:
 *    - `set-based`: one transaction per batch: the batch's balances locked in key order (`SELECT … FOR UPDATE`, the
 *      versions the guards expect and the states the new ones are decided from), one guarded
 *      `UPDATE balances … FROM unnest(…) WHERE version = expected`, one `INSERT INTO usage_events … SELECT FROM
 *      unnest(…)` of every event and one `INSERT INTO usage_rollups … ON CONFLICT DO UPDATE` of every balance's
 *      rollup; the hot balance: one row moved by the batch's sum, and N events;
 *    - `locked, as the service`: the statements the service sends for a batch that takes its locked transaction
 *      (src/entitlements/batchLocked.ts `transactLocked`: batches with idempotency keys, a spend cap or a count; before
 *      7567c22, every batch): the organization's versions (`contextVersions`: every reference's read is kept once the
 *      set-up has read it), then one transaction: the balances locked in key order (`LOCK_BALANCES_SELECT_PG`; they
 *      all exist, so the service creates none) and written with their events and rollups set-based (`COMMIT_LOCKED`,
 *      parameters built by the service's `commitLockedParameters`). A batch without those (every batch measured
 *      here) is written by one guarded statement instead (src/entitlements/guardedBatch.ts), which this line does not
 *      replay: its speed comes from deciding over states still being written, which a replay without the service
 *      cannot do.
 * 2. service: `POST /v1/track/batch` over HTTP, items without idempotency keys; ratio = events/s over the higher of
 *    the two ceilings of the same line, measured just before it (the target: ≥ 50%);
 * 3. keys: the same with a unique `idempotencyKey` on every item (no target; ratio over the unkeyed service's rate).
 * On SQLite (no ceiling: the database is inside the service) the ratio of the service's lines is over PostgreSQL's
 * service rate of the same line (the target: ≥ 100%), measured right before or after it: each line of 2. and 3. runs
 * on both services in turn, in an order that alternates from line to line, so that the machine's drift over the
 * minutes a run takes falls on both sides of the ratio; for the same reason a line's ceiling runs just before its
 * services. (Until 2026-11-25 each database's lines ran as one section, and SQLite's ratio compared rates measured ~8
 * minutes apart; until the same day's morning the ceilings ran as one section before the services, 2–9 minutes before
 * the lines they divide.) Before every measured run, on either database, PostgreSQL takes a CHECKPOINT and the OS
 * syncs.
 *
 * Every run follows `--warmup` seconds (2) of the same load, unmeasured: compiled code, caches, and what the service
 * knows of balances the run before it (a ceiling's raw writes) changed behind its back (src/entitlements/guardedBatch.ts
 * relearns them). After every run: every customer's balance equals the sum of its events, its event count grew by
 * exactly its acknowledged items, and the rollups add up to the events. Any mismatch or error (warm-up included)
 * exits 1.
 *
 * Columns: batch/s; events/s = acknowledged items per second; p50/p99 latency of a batch; errors = failed items
 * (a non-200 answer fails all of its batch's items; an item not allowed fails); ratio (above); cpu µs/event = CPU time
 * per acknowledged item of the service (all its processes), of PostgreSQL (all its processes) and of this bench
 * process (the HTTP client; in the ceiling runs, the raw driver); idle = the machine's idle CPU during the run.
 *
 * Narrower runs (profiling; their ratios need the lines they divide by): `--service-only`, `--scenarios many|hot`,
 * `--keyed false|true`.
 * `--keep` keeps PostgreSQL's scratch database and writes its organization's key beside the OS's temporary files;
 * `--reuse` then starts from them without the set-up (a profiling loop; the figures of record come from a fresh one).
 *
 * BENCH_SERVICE_FLAGS, BENCH_SERVICE, BENCH_SERVICE_LOG: as in bench/track.ts (e.g. a CPU profile of the service).
 */
import { SQL } from "bun"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import {
  COMMIT_LOCKED,
  commitLockedParameters,
  contextVersions,
  LOCK_BALANCES_SELECT_PG,
  pgArrayLiteral,
  ROLLUP_MS,
  ROLLUP_SUM_PG,
  rollupsOf,
  type UsageEventRow
} from "../src/entitlements/hotStatements.ts"
import { eventId } from "./ceiling.ts"
import {
  createOrganization,
  drive,
  type Ids,
  loadIds,
  measurer,
  ms,
  noteFailure,
  type Outcome,
  pad,
  post,
  processTree,
  type RunResult,
  type Service,
  scratchDatabase,
  startService,
  type Store,
  syncCatalog
} from "./support.ts"

const { values: args } = parseArgs({
  options: {
    db: { type: "string", default: "pg,sqlite" },
    seconds: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    customers: { type: "string", default: "10000" },
    connections: { type: "string", default: "4" },
    sizes: { type: "string", default: "100,1000" },
    pg: { type: "string", default: process.env.BENCH_PG ?? "postgres://postgres@127.0.0.1:5432" },
    keep: { type: "boolean", default: false },
    reuse: { type: "boolean", default: false },
    "service-only": { type: "boolean", default: false },
    scenarios: { type: "string", default: "many,hot" },
    keyed: { type: "string", default: "false,true" }
  }
})

const SECONDS = Number(args.seconds)
const WARMUP = Number(args.warmup)
const CUSTOMERS = Number(args.customers)
const CONNECTIONS = Number(args.connections)
const SIZES = args.sizes!.split(",").map(Number)
for (const size of SIZES) if (!(size >= 1 && size <= 1000)) throw new Error("--sizes: 1 to 1,000 items a batch")
const SCRATCH_DB = "billing_bench_batch"
const FEATURE = "bench-calls"
const HOT = "bench-hot"
const VALUE = 1
const VALUE_MICRO = BigInt(VALUE * 1_000_000)
const VERSIONS = contextVersions("pg")

type Scenario = "many" | "hot"
const SCENARIOS = args.scenarios!.split(",") as ReadonlyArray<Scenario>
const customerName = (i: number) => `bench-${i}`
const picker = (scenario: Scenario) =>
  scenario === "hot" ? () => HOT : () => customerName(Math.floor(Math.random() * CUSTOMERS))
const pickBatch = (scenario: Scenario, size: number) => Array.from({ length: size }, picker(scenario))

let failed = false

// ---------------------------------------------------------------- set-up

/**
 * Customers a set-up batch creates, one batch at a time. (Batches of 1,000 new customers, 4 at a time, ran past the
 * service's 30 s request deadline on PostgreSQL on the shared machine, and batches of 100, 4 at a time, were answered
 * 503 "temporarily unavailable".)
 */
const SETUP_BATCH = 100
const SETUP_CLIENTS = 1

/** The catalog, then every customer (and its balance) through its item of a set-up batch (`customerData`). */
const setUp = async (service: Service) => {
  await syncCatalog(service, FEATURE, 1_000_000_000_000)
  const names = [HOT, ...Array.from({ length: CUSTOMERS }, (_, i) => customerName(i))]
  const started = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: SETUP_CLIENTS }, async () => {
      while (next < names.length) {
        const chunk = names.slice(next, next + SETUP_BATCH)
        next += chunk.length
        const events = chunk.map((customer) => ({ customer, feature: FEATURE, value: VALUE, customerData: {} }))
        const r = await post(service, "/v1/track/batch", { events })
        const refused = r.status !== 200 ? [r.body] : (r.body.results as Array<any>).filter((x) => x.allowed !== true)
        if (refused.length > 0) throw new Error(`set-up batch failed: ${JSON.stringify(refused[0])}`)
      }
    })
  )
  return (performance.now() - started) / 1000
}

// ---------------------------------------------------------------- the ceiling (PostgreSQL)

interface Context {
  readonly ids: Ids
  readonly valueMicro: bigint
}

/** A batch's items per balance: each distinct customer's id and number of items, in key (customer id) order. */
const perBalance = (ctx: Context, customers: ReadonlyArray<string>) => {
  const counts = new Map<string, number>()
  for (const name of customers) {
    const id = ctx.ids.customers.get(name)!
    counts.set(id, (counts.get(id) ?? 0) + 1)
  }
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}
/** The locked rows in the order of `balances` (the database sorts by its collation, which may not be JS's order). */
const aligned = (balances: ReadonlyArray<readonly [string, number]>, rows: ReadonlyArray<LockedRow>) => {
  const byId = new Map(rows.map((row) => [row.customer_id, row]))
  return balances.map(([id]) => {
    const row = byId.get(id)
    if (row === undefined) throw new Error(`balance of ${id} is missing`)
    return row
  })
}
/** A PostgreSQL array literal of plain tokens (ids of [0-9a-z_], decimal numbers). */
const array = (values: ReadonlyArray<string | number | bigint>) => `{${values.join(",")}}`

interface LockedRow {
  readonly customer_id: string
  readonly window_start: string | number
  readonly window_end: string | number | null
  readonly used: string | number
  readonly overage: string | number
  readonly bonus: string | number
  readonly addon: string | number
  readonly version: string | number
}
const LOCK = `SELECT customer_id, window_start, window_end, used, overage, bonus, addon, version FROM balances
  WHERE organization_id = $1 AND subject_id = $2 AND customer_id = ANY($3::text[])
  ORDER BY customer_id, subject_id FOR UPDATE`

type CeilingScript = (db: SQL, ctx: Context, customers: ReadonlyArray<string>) => Promise<void>

/** The batch's work set-based: lock, one guarded UPDATE, one INSERT of the events, one upsert of the rollups. */
const setBased: CeilingScript = async (db, ctx, customers) => {
  const { organizationId: org, featureId: f, planId } = ctx.ids
  const balances = perBalance(ctx, customers)
  const ids = balances.map(([id]) => id)
  await db.begin(async (tx) => {
    const locked = aligned(balances, await tx.unsafe(LOCK, [org, f, array(ids)]))
    const now = Date.now()
    const used = locked.map((row, i) => BigInt(row.used) + BigInt(balances[i]![1]) * ctx.valueMicro)
    const updated = await tx.unsafe(
      `UPDATE balances b SET used = v.used, updated_at = $3, version = b.version + 1
       FROM unnest($4::text[], $5::bigint[], $6::bigint[]) AS v(customer_id, used, expected)
       WHERE b.organization_id = $1 AND b.subject_id = $2 AND b.customer_id = v.customer_id
         AND b.version = v.expected`,
      [org, f, now, array(ids), array(used), array(locked.map((row) => row.version))]
    )
    if (updated.count !== balances.length) throw new Error("a guard failed on a locked balance")
    const eventCustomers = balances.flatMap(([id, n]) => Array.from({ length: n }, () => id))
    const v = String(ctx.valueMicro)
    await tx.unsafe(
      `INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
         from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
       SELECT $1, e.id, e.customer_id, $2, $2, NULL, $3, $3, $3, 0, 0, 0, 0, $4, '{}', $5
       FROM unnest($6::text[], $7::text[]) AS e(id, customer_id)`,
      [org, f, v, planId, now, array(eventCustomers.map(() => eventId(now))), array(eventCustomers)]
    )
    await tx.unsafe(
      `INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
       SELECT $1, r.customer_id, $2, $3, r.value, r.records
       FROM unnest($4::text[], $5::bigint[], $6::int[]) AS r(customer_id, value, records)
       ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
       DO UPDATE SET value = ${ROLLUP_SUM_PG}, records = usage_rollups.records + excluded.records`,
      [
        org,
        f,
        now - (now % ROLLUP_MS),
        array(ids),
        array(balances.map(([, n]) => BigInt(n) * ctx.valueMicro)),
        array(balances.map(([, n]) => n))
      ]
    )
  })
}

/** The service's statements for a batch: the versions its kept reads are checked against, the lock and the write. */
const asTheService: CeilingScript = async (db, ctx, customers) => {
  const { organizationId: org, featureId: f, planId } = ctx.ids
  await db.unsafe(VERSIONS, [org])
  const balances = perBalance(ctx, customers)
  await db.begin(async (tx) => {
    const now = Date.now()
    const [lockedRows] = await tx.unsafe(LOCK_BALANCES_SELECT_PG, [
      org,
      pgArrayLiteral(balances.map(([c]) => c)),
      pgArrayLiteral(balances.map(() => f))
    ])
    const locked = aligned(
      balances,
      (lockedRows.balances as Array<Record<string, string | number | null>>).map((b) => ({
        customer_id: b.customerId as string,
        window_start: b.windowStart as number,
        window_end: b.windowEnd ?? null,
        used: b.used as string,
        overage: b.overage as string,
        bonus: b.bonus as string,
        addon: b.addon as string,
        version: b.version as number
      }))
    )
    const items = locked.map((row, i) => {
      const n = balances[i]![1]
      const events: Array<UsageEventRow> = Array.from({ length: n }, () => ({
        organizationId: org,
        id: eventId(now),
        customerId: row.customer_id,
        featureId: f,
        subjectId: f,
        entityId: null,
        value: ctx.valueMicro,
        cost: ctx.valueMicro,
        fromPlan: ctx.valueMicro,
        fromBonus: 0n,
        fromAddon: 0n,
        overage: 0n,
        billable: 0n,
        planId,
        metadata: {},
        createdAt: now
      }))
      return {
        org,
        customer: row.customer_id,
        subject: f,
        expected: Number(row.version),
        windowStart: Number(row.window_start),
        windowEnd: row.window_end === null ? null : Number(row.window_end),
        used: BigInt(row.used) + BigInt(n) * ctx.valueMicro,
        overage: BigInt(row.overage),
        bonus: BigInt(row.bonus),
        addon: BigInt(row.addon),
        now,
        events,
        rollups: rollupsOf(events)
      }
    })
    const [written] = await tx.unsafe(COMMIT_LOCKED, commitLockedParameters(org, items))
    if ((written.versions as Array<number | null>).some((v) => v === null)) throw new Error("a guard failed")
  })
}

const CEILINGS: ReadonlyArray<readonly [string, CeilingScript]> = [
  ["set-based", setBased],
  ["locked, as the service", asTheService]
]

// ---------------------------------------------------------------- the service

/** A batch of `size` items over `scenario`'s customers; with `keyed`, every item carries a key of its own. */
const batchRequest = (service: Service, scenario: Scenario, size: number, keyed: boolean) => {
  const headers = { authorization: `Bearer ${service.apiKey}`, "content-type": "application/json" }
  const url = `${service.baseUrl}/v1/track/batch`
  const run = crypto.randomUUID()
  let key = 0
  return async (): Promise<Outcome> => {
    const customers = pickBatch(scenario, size)
    const events = customers.map((customer) =>
      keyed
        ? { customer, feature: FEATURE, value: VALUE, idempotencyKey: `${run}-${key++}` }
        : { customer, feature: FEATURE, value: VALUE }
    )
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify({ events }) })
    const answer = (await response.json()) as { results?: Array<{ allowed?: boolean; code?: string }>; code?: string }
    if (response.status !== 200 || answer.results === undefined) {
      noteFailure(`batch ${response.status} ${answer.code}`)
      return { acknowledged: [], errors: size }
    }
    const acknowledged: Array<string> = []
    let errors = 0
    answer.results.forEach((result, i) => {
      if (result.allowed === true) acknowledged.push(customers[i]!)
      else {
        errors++
        noteFailure(`item ${result.code}`)
      }
    })
    return { acknowledged, errors }
  }
}

// ---------------------------------------------------------------- printing

const header = () =>
  console.log(
    `  ${"what".padEnd(48)}${pad("size", 5)}${pad("conns", 6)}${pad("batch/s", 8)}${pad("events/s", 9)}` +
      `${pad("p50 ms", 9)}${pad("p99 ms", 9)}${pad("errors", 7)}${pad("ratio", 7)}` +
      `${pad("cpu µs/event svc/db/client", 28)}${pad("idle", 6)}  exact`
  )
const line = (what: string, size: number, r: RunResult, ratio: number | null, wrong: number) => {
  const cpu = [r.cpuUsPerItem, r.dbUsPerItem, r.clientUsPerItem].map((v) => (v === null ? "-" : v.toFixed(0)))
  console.log(
    `  ${what.padEnd(48)}${pad(size, 5)}${pad(CONNECTIONS, 6)}${pad(r.rate.toFixed(1), 8)}${pad(r.itemRate.toFixed(0), 9)}` +
      `${pad(ms(r.p50), 9)}${pad(ms(r.p99), 9)}${pad(r.errors, 7)}` +
      `${pad(ratio === null ? "-" : `${(ratio * 100).toFixed(0)}%`, 7)}${pad(cpu.join("/"), 28)}` +
      `${pad(`${(r.idle * 100).toFixed(0)}%`, 6)}  ${wrong === 0 ? "ok" : `${wrong} WRONG`}`
  )
}
const label = (scenario: Scenario) => (scenario === "hot" ? "1 hot balance" : `${CUSTOMERS} balances`)

// ---------------------------------------------------------------- the databases

type Kind = "pg" | "sqlite"
const NAME: Record<Kind, string> = { pg: "PostgreSQL", sqlite: "SQLite" }

/** A database set up and served, ready for measured runs. */
interface Served {
  readonly kind: Kind
  readonly service: Service
  readonly ids: Ids
  readonly pgUrl: string
  readonly store: Store
  /** The service's processes, whose CPU a run counts. */
  readonly pids: ReadonlyArray<number>
}

/** The scratch database, the service on it, the organization, the catalog and every customer. */
const serve = async (kind: Kind, cleanups: Array<() => Promise<void> | void>): Promise<Served> => {
  const keyFile = join(tmpdir(), `${SCRATCH_DB}-${CUSTOMERS}.key`)
  const scratch = await scratchDatabase(kind, {
    name: SCRATCH_DB,
    pg: args.pg!,
    keep: args.keep!,
    reuse: kind === "pg" && args.reuse! && existsSync(keyFile)
  })
  cleanups.unshift(...scratch.cleanups)
  const reuse = scratch.reused
  // A key file stands for a set-up that finished on the kept database; a new set-up voids it until it finishes.
  if (!reuse) rmSync(keyFile, { force: true })
  const apiKey = reuse ? readFileSync(keyFile, "utf8") : await createOrganization(scratch.env)
  const service = await startService(scratch.env, apiKey)
  cleanups.unshift(() => service.stop())
  const setupSeconds = reuse ? 0 : await setUp(service)
  if (kind === "pg" && args.keep!) writeFileSync(keyFile, apiKey)
  const store = scratch.store()
  cleanups.unshift(() => store.close())
  if (kind === "pg") await store.rows("ANALYZE")
  const ids = await loadIds(store, apiKey, FEATURE)
  const pids = processTree(service.pid)
  console.log(
    `${NAME[kind]}${kind === "sqlite" ? " (embedded default)" : ""}: ${CUSTOMERS} balances + 1 hot; ` +
      `service ${pids.length === 1 ? "1 process" : `${pids.length} processes`}; set-up ${setupSeconds.toFixed(0)} s`
  )
  return { kind, service, ids, pgUrl: scratch.pgUrl, store, pids }
}

/**
 * `--connections` clients sending `request` for `--warmup` seconds unmeasured (caches, compiled code, and what the
 * service knows of the balances the previous run changed), then for `--seconds`, measured and checked. The check
 * starts after the warm-up: every balance must still equal its events, and the measured items are counted exactly.
 * `pg`: PostgreSQL's store, quieted before the run whichever database it measures (the two share the disk).
 */
const closedLoop = async (
  db: Served,
  pg: Store | undefined,
  request: () => Promise<Outcome>,
  pids?: ReadonlyArray<number>
) => {
  if (WARMUP > 0) {
    const warm = await drive({ connections: CONNECTIONS, seconds: WARMUP, request })
    if (warm.errors > 0) {
      console.log(`    warm-up: ${warm.errors} failed items`)
      failed = true
    }
  }
  const measured = measurer({
    vacuum: db.kind === "pg",
    store: db.store,
    ...(pg === undefined ? {} : { checkpoint: pg }),
    ids: db.ids,
    value: VALUE,
    onFailure: () => void (failed = true)
  })
  const database = db.kind === "pg"
  return measured(() =>
    drive({ connections: CONNECTIONS, seconds: SECONDS, request, database, ...(pids === undefined ? {} : { pids }) })
  )
}

const ceilingKey = (scenario: Scenario, size: number) => `${scenario} ${size}`

/**
 * 1. PostgreSQL's ceiling of a line: both scripts over the same balances and size, the higher of their rates. Measured
 * right before the line's service runs, for the reason SQLite's ratio is (`services`).
 */
const makeCeiling = (pg: Served, cleanups: Array<() => Promise<void> | void>) => {
  const ctx: Context = { ids: pg.ids, valueMicro: VALUE_MICRO }
  const db = new SQL({ url: pg.pgUrl, max: CONNECTIONS })
  cleanups.unshift(() => db.close())
  return async (scenario: Scenario, size: number) => {
    let best = 0
    for (const [name, script] of CEILINGS) {
      const { result, wrong } = await closedLoop(pg, pg.store, async () => {
        const customers = pickBatch(scenario, size)
        await script(db, ctx, customers)
        return { acknowledged: customers, errors: 0 }
      })
      best = Math.max(best, result.itemRate)
      line(`ceiling ${name}, ${label(scenario)}`, size, result, null, wrong)
    }
    return best
  }
}

const summary: Array<string> = []

/**
 * 2. and 3. The services over HTTP, without and with idempotency keys. A line's runs on the two databases follow each
 * other, in an order that alternates from line to line: SQLite's ratio divides by PostgreSQL's rate of the same line,
 * and on a shared machine whose speed drifts by a fifth within minutes, two rates measured a whole section apart
 * (as until this bench measured them) compare the machine's moments as much as the databases.
 */
const services = async (
  served: ReadonlyArray<Served>,
  ceilingOf: ((scenario: Scenario, size: number) => Promise<number>) | undefined
) => {
  const pg = served.find((db) => db.kind === "pg")?.store
  const unkeyed = new Map<string, number>()
  let turn = 0
  for (const keyed of args.keyed!.split(",").map((k) => k === "true")) {
    console.log(
      keyed
        ? "\nservice over HTTP, every item with its own idempotencyKey (ratio = events/s over the database's unkeyed line)"
        : "\nservice over HTTP, POST /v1/track/batch (ratio: PostgreSQL's over the higher of the two ceilings just " +
            "before it; SQLite's over PostgreSQL's service line just before or after it)" +
            (ceilingOf === undefined
              ? ""
              : `\n(ceiling: PostgreSQL by Bun.sql, ${CONNECTIONS} connections, a batch's work per item: set-based; locked, as the service)`)
    )
    header()
    for (const scenario of SCENARIOS) {
      for (const size of SIZES) {
        const ceiling = keyed || ceilingOf === undefined ? undefined : await ceilingOf(scenario, size)
        const order = turn++ % 2 === 0 ? served : [...served].reverse()
        const results = new Map<Kind, Awaited<ReturnType<typeof closedLoop>>>()
        for (const db of order) {
          results.set(db.kind, await closedLoop(db, pg, batchRequest(db.service, scenario, size, keyed), db.pids))
        }
        const k = ceilingKey(scenario, size)
        for (const db of served) {
          const { result, wrong } = results.get(db.kind)!
          const key = `${db.kind} ${k}`
          const pgRate = results.get("pg")?.result.itemRate
          const reference = keyed ? unkeyed.get(key) : db.kind === "pg" ? ceiling : pgRate
          const ratio = reference === undefined ? null : result.itemRate / reference
          if (!keyed) {
            unkeyed.set(key, result.itemRate)
            const target = db.kind === "pg" ? "≥ 50% of the ceiling" : "≥ 100% of PostgreSQL's service"
            summary.push(
              `  ${db.kind.padEnd(6)} ${label(scenario).padEnd(16)} ${pad(size, 4)}: ${pad(result.itemRate.toFixed(0), 6)} ` +
                `events/s, ${ratio === null ? "no reference" : `${(ratio * 100).toFixed(0)}%`} (target ${target}` +
                `${ratio === null ? "" : ratio >= (db.kind === "pg" ? 0.5 : 1) ? ": met" : ": MISSED"}); service ` +
                `${(result.cpuUsPerItem ?? 0).toFixed(0)} µs/event` +
                (result.dbUsPerItem === null ? "" : `, PostgreSQL ${result.dbUsPerItem.toFixed(0)} µs/event`)
            )
          }
          line(`${NAME[db.kind]} ${keyed ? "keyed" : "batch"}, ${label(scenario)}`, size, result, ratio, wrong)
        }
      }
    }
  }
}

const started = performance.now()
console.log(`bench/batch.ts ${new Date().toISOString()}: ${args.db}; ${SECONDS} s a run; sizes ${SIZES.join(", ")}`)
const cleanups: Array<() => Promise<void> | void> = []
try {
  const served: Array<Served> = []
  for (const kind of args.db!.split(",") as Array<Kind>) served.push(await serve(kind, cleanups))
  const pg = served.find((db) => db.kind === "pg")
  await services(served, pg === undefined || args["service-only"] ? undefined : makeCeiling(pg, cleanups))
} finally {
  for (const cleanup of cleanups) await Promise.resolve(cleanup()).catch((e) => console.error("cleanup:", e))
}
console.log(`\nsummary (events/s of the service without keys):\n${summary.join("\n")}`)
console.log(`\nbench: ${((performance.now() - started) / 60_000).toFixed(1)} minutes`)
if (failed) {
  console.error("\nFAILED: errors or a balance that differs from the acknowledged events (see above)")
  process.exit(1)
}
