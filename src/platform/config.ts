import { Config, Context, Layer, Option, Redacted } from "effect"

export type AppEnv = "sandbox" | "live"

/**
 * `transaction`: DATABASE_URL is a transaction-mode pooler (PgBouncer): nothing may outlive a transaction. `auto` (the
 * default): a pooler is recognised at start-up (src/platform/db/Database.ts) and taken for one. `none`: PostgreSQL's
 * own sessions (or a session-mode pooler): statements are prepared once per connection.
 */
export type DatabasePooler = "auto" | "none" | "transaction"

/** Everything the service reads from its environment, decoded once at start-up. */
export interface AppConfigShape {
  readonly port: number
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  /** What DATABASE_URL reaches (README, "Sizing"): PostgreSQL itself, or a pooler that lends connections per transaction. */
  readonly databasePooler: DatabasePooler
  /** A session of its own on PostgreSQL itself (no pooler) for LISTEN; none = poll behind a transaction pooler. */
  readonly databaseDirectUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly appEnv: AppEnv
  readonly logLevel: string
  readonly encryptionKey: Option.Option<Redacted.Redacted>
  /** Requests per second per API key (token bucket, per process); 0 = no limit. */
  readonly rateLimitRps: number
  /** Bucket size: how many requests a key may make at once after a pause; 0 = 2 × rateLimitRps. */
  readonly rateLimitBurst: number
  /** A request still running after this long is stopped and answered 503 `unavailable`; 0 = no limit. */
  readonly requestTimeoutMs: number
  /** Every call to a payment provider ends by then, before the request that made it (decisions.md §7). */
  readonly providerTimeoutMs: number
  readonly otlpEndpoint: Option.Option<string>
  /** OTEL_TRACES_SAMPLER_ARG: the share of root spans exported (parent-based: children follow their parent). */
  readonly traceSampleRatio: number
  /** Public address of this service, used in hosted-page links. */
  readonly publicUrl: string
  /** The service's own test accounts, used on sandbox by organizations without an account of their own. */
  readonly sandboxAccounts: {
    readonly paystack: Option.Option<Redacted.Redacted>
    readonly stripe: Option.Option<Redacted.Redacted>
    readonly stripeWebhookSecret: Option.Option<Redacted.Redacted>
  }
  /** Provider API addresses (a proxy, or a fake in tests); unset = the provider's own. */
  readonly providerBaseUrls: {
    readonly paystack: Option.Option<string>
    readonly stripe: Option.Option<string>
  }
  /** Outbound events' delivery (decisions.md §11). */
  readonly webhooks: WebhookSettings
}

export interface WebhookSettings {
  /** Waits before each retry after a failed attempt; past the last one the delivery has `failed`. */
  readonly retryScheduleMs: ReadonlyArray<number>
  /** An attempt without a complete answer by then has failed. */
  readonly timeoutMs: number
  /** A claimed delivery belongs to its process this long; a process that died leaves it due again after it. */
  readonly leaseMs: number
  /** How often an idle worker looks for due deliveries. */
  readonly pollMs: number
  /** Attempts in flight at once, per process. */
  readonly concurrency: number
  /** Whether the service runs the delivery worker (every process may). */
  readonly worker: boolean
}

/** About 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (decisions.md §11). */
export const DEFAULT_RETRY_SCHEDULE_MS: ReadonlyArray<number> = [
  5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000
]

export class AppConfig extends Context.Tag("AppConfig")<AppConfig, AppConfigShape>() {}

const appConfig = Config.all({
  port: Config.port("PORT").pipe(Config.withDefault(3000)),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  databasePooler: Config.literal(
    "auto",
    "none",
    "transaction"
  )("DATABASE_POOLER").pipe(Config.withDefault("auto" as const)),
  databaseDirectUrl: Config.option(Config.redacted("DATABASE_DIRECT_URL")),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  appEnv: Config.literal("sandbox", "live")("APP_ENV").pipe(Config.withDefault("sandbox" as const)),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info")),
  encryptionKey: Config.option(Config.redacted("ENCRYPTION_KEY")),
  rateLimitRps: Config.integer("RATE_LIMIT_RPS").pipe(
    Config.withDefault(0),
    Config.validate({
      message: "RATE_LIMIT_RPS must be 0 (off) or a positive integer",
      validation: (n) => n >= 0
    })
  ),
  rateLimitBurst: Config.integer("RATE_LIMIT_BURST").pipe(
    Config.withDefault(0),
    Config.validate({
      message: "RATE_LIMIT_BURST must be 0 (2 × RATE_LIMIT_RPS) or a positive integer",
      validation: (n) => n >= 0
    })
  ),
  requestTimeoutMs: Config.integer("REQUEST_TIMEOUT_MS").pipe(
    Config.withDefault(30_000),
    Config.validate({
      message: "REQUEST_TIMEOUT_MS must be 0 (off) or a positive number of milliseconds",
      validation: (n) => n >= 0
    })
  ),
  providerTimeoutMs: Config.integer("PROVIDER_TIMEOUT_MS").pipe(
    Config.withDefault(10_000),
    Config.validate({
      message: "PROVIDER_TIMEOUT_MS must be a positive number of milliseconds",
      validation: (n) => n > 0
    })
  ),
  otlpEndpoint: Config.option(Config.nonEmptyString("OTEL_EXPORTER_OTLP_ENDPOINT")),
  traceSampleRatio: Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
    Config.withDefault(1),
    Config.validate({
      message: "OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1",
      validation: (n) => n >= 0 && n <= 1
    })
  ),
  publicUrl: Config.option(Config.string("PUBLIC_URL")),
  sandboxAccounts: Config.all({
    paystack: Config.option(Config.redacted("PAYSTACK_SANDBOX_SECRET_KEY")),
    stripe: Config.option(Config.redacted("STRIPE_SANDBOX_SECRET_KEY")),
    stripeWebhookSecret: Config.option(Config.redacted("STRIPE_SANDBOX_WEBHOOK_SECRET"))
  }),
  providerBaseUrls: Config.all({
    paystack: Config.option(Config.nonEmptyString("PAYSTACK_BASE_URL")),
    stripe: Config.option(Config.nonEmptyString("STRIPE_BASE_URL"))
  }),
  webhooks: Config.all({
    retryScheduleMs: Config.string("WEBHOOK_RETRY_SCHEDULE_MS").pipe(
      Config.withDefault(DEFAULT_RETRY_SCHEDULE_MS.join(",")),
      Config.map((text) => text.split(",").map((part) => Number(part.trim()))),
      Config.validate({
        message: "WEBHOOK_RETRY_SCHEDULE_MS must be a comma-separated list of non-negative integers (milliseconds)",
        validation: (list) => list.length > 0 && list.every((n) => Number.isSafeInteger(n) && n >= 0)
      })
    ),
    timeoutMs: Config.integer("WEBHOOK_TIMEOUT_MS").pipe(
      Config.withDefault(10_000),
      Config.validate({
        message: "WEBHOOK_TIMEOUT_MS must be a positive number of milliseconds",
        validation: (n) => n > 0
      })
    ),
    leaseMs: Config.integer("WEBHOOK_LEASE_MS").pipe(Config.withDefault(60_000)),
    pollMs: Config.integer("WEBHOOK_POLL_MS").pipe(
      Config.withDefault(1_000),
      Config.validate({
        message: "WEBHOOK_POLL_MS must be a positive number of milliseconds",
        validation: (n) => n > 0
      })
    ),
    concurrency: Config.integer("WEBHOOK_CONCURRENCY").pipe(
      Config.withDefault(8),
      Config.validate({
        message: "WEBHOOK_CONCURRENCY must be a positive integer",
        validation: (n) => n > 0
      })
    ),
    worker: Config.boolean("WEBHOOK_WORKER").pipe(Config.withDefault(true))
  }).pipe(
    Config.validate({
      message: "WEBHOOK_LEASE_MS must exceed WEBHOOK_TIMEOUT_MS (an attempt ends before its lease does)",
      validation: (w) => w.leaseMs > w.timeoutMs
    })
  )
}).pipe(
  Config.map((c): AppConfigShape => ({
    ...c,
    // An empty DATABASE_URL means "not set": the embedded database.
    databaseUrl: Option.filter(c.databaseUrl, (u) => Redacted.value(u).trim() !== ""),
    databaseDirectUrl: Option.filter(c.databaseDirectUrl, (u) => Redacted.value(u).trim() !== ""),
    publicUrl: Option.getOrElse(c.publicUrl, () => `http://localhost:${c.port}`)
  }))
)

export const AppConfigLive = Layer.effect(AppConfig, appConfig)

export const makeTestConfig = (overrides: Partial<AppConfigShape> = {}): AppConfigShape => ({
  port: 0,
  databaseUrl: Option.none(),
  databasePooler: "auto",
  databaseDirectUrl: Option.none(),
  dataDir: ":memory:",
  appEnv: "sandbox",
  logLevel: "none",
  encryptionKey: Option.some(Redacted.make("0".repeat(64))),
  rateLimitRps: 0,
  rateLimitBurst: 0,
  requestTimeoutMs: 30_000,
  providerTimeoutMs: 10_000,
  otlpEndpoint: Option.none(),
  traceSampleRatio: 1,
  publicUrl: "http://localhost",
  sandboxAccounts: { paystack: Option.none(), stripe: Option.none(), stripeWebhookSecret: Option.none() },
  providerBaseUrls: { paystack: Option.none(), stripe: Option.none() },
  webhooks: {
    retryScheduleMs: DEFAULT_RETRY_SCHEDULE_MS,
    timeoutMs: 10_000,
    leaseMs: 60_000,
    pollMs: 1_000,
    concurrency: 8,
    worker: false
  },
  ...overrides
})

export const AppConfigTest = (overrides: Partial<AppConfigShape> = {}) =>
  Layer.succeed(AppConfig, makeTestConfig(overrides))
