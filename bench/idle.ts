/**
 * What idleness costs on this machine: the CPU of one `SELECT 1` through the service's driver (`pg`, one connection,
 * a named statement), back to back and with idle gaps between queries. A quiet service pays the gapped price for
 * every statement and wake-up (docs/benchmarks.md, the quiet rows of bench/track.ts).
 *
 *   node_modules/.bin/bun bench/idle.ts [--pg postgres://postgres@127.0.0.1:5432/test] [--queries 2000]
 */
import pg from "pg"
import { parseArgs } from "node:util"

const { values: args } = parseArgs({
  options: {
    pg: { type: "string", default: process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test" },
    queries: { type: "string", default: "2000" }
  }
})
const n = Number(args.queries)
const pool = new pg.Pool({ connectionString: args.pg, max: 1 })
const query = () => pool.query({ name: "idle-one", text: "SELECT 1 AS x" })
for (let i = 0; i < 500; i++) await query()
console.log(`bench/idle.ts ${new Date().toISOString()}: ${n} queries a line, CPU of this process per query`)
for (const gapMs of [0, 0.5, 1, 2]) {
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) {
    await query()
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs))
  }
  const used = process.cpuUsage(before)
  console.log(
    `  idle ${String(gapMs).padStart(3)} ms between queries: ${((used.user + used.system) / n).toFixed(0)} µs ` +
      `(user ${(used.user / n).toFixed(0)}, system ${(used.system / n).toFixed(0)})`
  )
}
await pool.end()
