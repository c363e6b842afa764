import { BunRuntime } from "@effect/platform-bun"
import { Data, Duration, Effect, Exit, LogLevel, Option } from "effect"
import { makeApp } from "./app/App.ts"
import { serve } from "./http/server.ts"
import { describeKeyRevocations, keyRevocationsOf } from "./organizations/keyRevocations.ts"
import { Organizations } from "./organizations/Organizations.ts"
import { Payments } from "./payments/Payments.ts"
import { AppConfig, AppConfigLive } from "./platform/config.ts"
import { PgPool } from "./platform/db/PgPool.ts"
import { parseLogLevel, writeLogLine } from "./platform/logging.ts"
import { Renewals } from "./subscriptions/Renewals.ts"

/** Start-up failed: one line for a person, never a stack trace. */
class StartupFailed extends Data.TaggedError("StartupFailed")<{ readonly message: string }> {}

const startup = Effect.gen(function* () {
  const config = yield* AppConfig
  const pooled = Option.exists(yield* Effect.serviceOption(PgPool), (p) => p.pooled)
  const organizations = yield* Organizations
  const demo = yield* organizations.seedDemo
  if (Option.isSome(demo)) {
    // stdout is the log stream (JSON lines) and keys never enter logs: the log line says what happened, and the key
    // is shown once to the person at the terminal, on stderr.
    writeLogLine(parseLogLevel(config.logLevel), LogLevel.Info, "demo organization created", {
      organizationId: demo.value.organization.id,
      slug: demo.value.organization.slug
    })
    process.stderr.write(
      `\nCreated the 'demo' organization. Its API key, shown only this once:\n\n    ${demo.value.apiKey}\n\n` +
        `The dashboard: ${config.publicUrl}/dashboard (sign in with this key, or run ` +
        `\`npm run cli -- dashboard demo\` for a one-time link; \`npm run cli -- sample-data demo\` fills it with ` +
        `sample customers and usage)\n\n`
    )
  }
  return { ...config, pooled }
})

/**
 * The service: the application, its HTTP server and its background work, each released in reverse order when the
 * process is interrupted (SIGTERM, SIGINT): the background loop stops, the server stops accepting connections and
 * lets in-flight requests finish, then the database pool closes.
 */
const service = Effect.gen(function* () {
  const app = yield* Effect.acquireRelease(
    Effect.sync(() => makeApp(AppConfigLive)),
    (app) => Effect.promise(() => app.dispose()).pipe(Effect.ignore)
  )
  const config = yield* Effect.tryPromise({
    try: () => app.runtime.runPromise(startup),
    catch: (error) => new StartupFailed({ message: error instanceof Error ? error.message : String(error) })
  })
  yield* Effect.promise(() => app.ready)
  const logLevel = parseLogLevel(config.logLevel)

  const server = yield* Effect.acquireRelease(
    Effect.sync(() => serve(app, { port: config.port, logLevel, requestTimeoutMs: config.requestTimeoutMs })),
    (running) =>
      Effect.sync(() => writeLogLine(logLevel, LogLevel.Info, "shutting down", {})).pipe(
        Effect.zipRight(Effect.promise(() => running.stop(false)))
      )
  )
  writeLogLine(logLevel, LogLevel.Info, "listening", {
    url: `http://localhost:${server.port}`,
    environment: config.appEnv,
    database: Option.isSome(config.databaseUrl) ? "postgresql" : "sqlite",
    ...(Option.isSome(config.databaseUrl)
      ? {
          pooler: config.pooled ? "transaction (unnamed statements)" : "none (prepared statements)",
          keyRevocations: describeKeyRevocations(keyRevocationsOf(config, config.pooled))
        }
      : {})
  })

  // Background work: renewals, past-due retries and cancellations at period end, then payment attempts whose outcome
  // is not known yet (a lost answer, a pending charge, a hosted page whose webhook never came) settled by asking
  // their provider. Safe in every process (claims use FOR UPDATE SKIP LOCKED); one pass at a time in this one;
  // RENEWALS_INTERVAL_SECONDS=0 turns it off here.
  const every = Number(process.env.RENEWALS_INTERVAL_SECONDS ?? "60")
  const pass = Effect.gen(function* () {
    const renewals = yield* Effect.flatMap(Renewals, (r) => r.runDue)
    if (renewals.renewed + renewals.pastDue + renewals.canceled > 0) {
      writeLogLine(logLevel, LogLevel.Info, "renewals", { ...renewals })
    }
    const payments = yield* Effect.flatMap(Payments, (p) => p.reconcile)
    if (payments.settled > 0 || payments.stillProcessing > 0) {
      writeLogLine(logLevel, LogLevel.Info, "payments reconciled", { ...payments })
    }
  })
  // Outbound events: every process may deliver (claims use FOR UPDATE SKIP LOCKED); WEBHOOK_WORKER=false turns it
  // off here. Released first on shutdown: attempts in flight finish or are handed back.
  if (config.webhooks.worker) {
    yield* Effect.acquireRelease(
      Effect.promise(() => app.startDeliveries()),
      () => Effect.promise(() => app.stopDeliveries())
    )
  }
  if (every > 0) {
    const loop = Effect.promise(() =>
      app.runtime.runPromiseExit(pass).then((exit) => {
        if (Exit.isFailure(exit)) writeLogLine(logLevel, LogLevel.Error, "background work failed", {})
      })
    ).pipe(Effect.delay(Duration.seconds(every)), Effect.forever)
    yield* Effect.forkScoped(loop)
  }
  return yield* Effect.never
})

const program = Effect.scoped(service).pipe(
  Effect.tapErrorTag("StartupFailed", (e) =>
    Effect.sync(() => process.stderr.write(`The service could not start: ${e.message}\n`))
  )
)

// Interrupted by a signal: a clean stop (0). Failed to start: 1.
BunRuntime.runMain(program, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(Exit.isFailure(exit) && !Exit.isInterrupted(exit) ? 1 : 0)
})
