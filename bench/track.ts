/**
 * Drives `POST /v1/track` over HTTP at a fixed concurrency against a running service and prints throughput and
 * latency, then checks that every acknowledged event is in the balances.
 *
 *   API_KEY=sk_test_... bun bench/track.ts [--url http://localhost:3000] [--concurrency 32] [--seconds 10] [--customers 100]
 *
 * It syncs a small bench catalog into the key's organization (an unlimited `bench-calls` feature on an
 * auto-enabled plan) and creates the customers it needs; run it against a sandbox organization.
 */
import { parseArgs } from "node:util"

const { values } = parseArgs({
  options: {
    url: { type: "string", default: process.env.BASE_URL ?? "http://localhost:3000" },
    concurrency: { type: "string", default: "32" },
    seconds: { type: "string", default: "10" },
    customers: { type: "string", default: "100" }
  }
})
const apiKey = process.env.API_KEY
if (!apiKey) {
  console.error("Set API_KEY to a key of the organization to load (e.g. the demo key printed at start-up).")
  process.exit(2)
}
const baseUrl = values.url!
const concurrency = Number(values.concurrency)
const seconds = Number(values.seconds)
const customerCount = Number(values.customers)
const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }

const call = async (path: string, body: unknown) => {
  const response = await fetch(baseUrl + path, { method: "POST", headers, body: JSON.stringify(body) })
  return { status: response.status, body: await response.json() as any }
}

const setup = async () => {
  const sync = await call("/v1/sync", {
    features: [{ slug: "bench-calls", name: "Bench calls", type: "metered" }],
    plans: [{ slug: "bench", name: "Bench", autoEnable: true, features: [{ slug: "bench-calls", limit: null, reset: "none" }] }]
  })
  if (sync.status !== 200) throw new Error(`sync failed: ${JSON.stringify(sync.body)}`)
  for (let i = 0; i < customerCount; i++) {
    const created = await call("/v1/customers", { id: `bench-${i}`, email: `bench-${i}@example.com` })
    if (created.status !== 200) throw new Error(`customer failed: ${JSON.stringify(created.body)}`)
  }
}

const usageOf = async (i: number) =>
  (await call("/v1/check", { customer: `bench-${i}`, feature: "bench-calls", value: 0 })).body.usage as number

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

const main = async () => {
  await setup()
  const before = await Promise.all(Array.from({ length: customerCount }, (_, i) => usageOf(i)))
  const latencies: Array<number> = []
  const acknowledged = new Array<number>(customerCount).fill(0)
  let errors = 0
  const deadline = performance.now() + seconds * 1000
  let next = 0
  const worker = async () => {
    while (performance.now() < deadline) {
      const i = next++ % customerCount
      const started = performance.now()
      try {
        const r = await call("/v1/track", { customer: `bench-${i}`, feature: "bench-calls", value: 1 })
        latencies.push(performance.now() - started)
        if (r.status === 200 && r.body.allowed === true) acknowledged[i]!++
        else errors++
      } catch {
        errors++
      }
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsed = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  const after = await Promise.all(Array.from({ length: customerCount }, (_, i) => usageOf(i)))
  const inconsistent = after.filter((u, i) => u - before[i]! !== acknowledged[i]).length
  console.log(`track: ${concurrency} connections, ${seconds}s, ${customerCount} customers`)
  console.log(`  requests   ${latencies.length}`)
  console.log(`  req/s      ${(latencies.length / elapsed).toFixed(0)}`)
  console.log(`  p50        ${percentile(latencies, 50).toFixed(2)} ms`)
  console.log(`  p99        ${percentile(latencies, 99).toFixed(2)} ms`)
  console.log(`  errors     ${errors}`)
  console.log(`  balances that differ from acknowledged events: ${inconsistent}`)
  if (errors > 0 || inconsistent > 0) process.exit(1)
}

await main()
