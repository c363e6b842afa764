import { Effect, Option } from "effect"
import { makeApp } from "./app.ts"
import { serve } from "./http/server.ts"
import { Organizations } from "./organizations/Organizations.ts"
import { Payments } from "./payments/Payments.ts"
import { Renewals } from "./subscriptions/Renewals.ts"
import { AppConfig, AppConfigLive } from "./platform/config.ts"
import { parseLogLevel, writeLogLine } from "./platform/logging.ts"
import { LogLevel } from "effect"

const app = makeApp(AppConfigLive)

const startup = Effect.gen(function*() {
  const config = yield* AppConfig
  const organizations = yield* Organizations
  const demo = yield* organizations.seedDemo
  if (Option.isSome(demo)) {
    process.stdout.write(
      `\nCreated the 'demo' organization. Its API key, shown only this once:\n\n    ${demo.value.apiKey}\n\n`
    )
  }
  return config
})

const config = await app.runtime.runPromise(startup).catch(async (error: unknown) => {
  process.stderr.write(`The service could not start: ${error instanceof Error ? error.message : String(error)}\n`)
  await app.dispose().catch(() => undefined)
  process.exit(1)
})

await app.ready
const logLevel = parseLogLevel(config.logLevel)
const server = serve(app, { port: config.port, logLevel, requestTimeoutMs: config.requestTimeoutMs })
writeLogLine(logLevel, LogLevel.Info, "listening", {
  url: `http://localhost:${server.port}`,
  environment: config.appEnv,
  database: Option.isSome(config.databaseUrl) ? "postgresql" : "sqlite"
})

// Background work: renewals, past-due retries and cancellations at period end, then payment attempts whose outcome
// is not known yet (a lost answer, a pending charge, a hosted page whose webhook never came) settled by asking their
// provider. Safe to run in every process (claims use FOR UPDATE SKIP LOCKED); RENEWALS_INTERVAL_SECONDS=0 turns it
// off in this one.
const renewalsEvery = Number(process.env.RENEWALS_INTERVAL_SECONDS ?? "60")
const background = Effect.gen(function*() {
  const renewals = yield* Effect.flatMap(Renewals, (r) => r.runDue)
  if (renewals.renewed + renewals.pastDue + renewals.canceled > 0) {
    writeLogLine(logLevel, LogLevel.Info, "renewals", { ...renewals })
  }
  const payments = yield* Effect.flatMap(Payments, (p) => p.reconcile)
  if (payments.settled > 0 || payments.stillProcessing > 0) {
    writeLogLine(logLevel, LogLevel.Info, "payments reconciled", { ...payments })
  }
})
let backgroundRunning = false
const renewals = renewalsEvery > 0
  ? setInterval(() => {
    // One pass at a time in this process: a slow provider must not pile passes up.
    if (backgroundRunning) return
    backgroundRunning = true
    app.runtime.runPromise(background).then(
      () => undefined,
      () => writeLogLine(logLevel, LogLevel.Error, "background work failed", {})
    ).finally(() => {
      backgroundRunning = false
    })
  }, renewalsEvery * 1000)
  : undefined

let stopping = false
const shutdown = async (signal: string) => {
  if (stopping) return
  stopping = true
  writeLogLine(logLevel, LogLevel.Info, "shutting down", { signal })
  if (renewals !== undefined) clearInterval(renewals)
  // Stop accepting connections, let in-flight requests finish, then close the database pool.
  await server.stop(false)
  await app.dispose()
  process.exit(0)
}
process.on("SIGTERM", () => void shutdown("SIGTERM"))
process.on("SIGINT", () => void shutdown("SIGINT"))
