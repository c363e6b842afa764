import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { type Clock, Effect, Either, LogLevel, type ManagedRuntime, Option, Redacted } from "effect"
import { makeClient } from "../../src/api/client.ts"
import { type App, makeApp } from "../../src/app/App.ts"
import { serve } from "../../src/http/server.ts"
import { Organizations } from "../../src/organizations/Organizations.ts"
import { AppConfig, AppConfigTest, type AppConfigShape } from "../../src/platform/config.ts"

export interface Database {
  readonly name: "sqlite" | "postgresql"
  readonly config: Partial<AppConfigShape>
}

/**
 * The databases every contract suite runs on: SQLite in memory always, and PostgreSQL when
 * DATABASE_URL is set (`.ci/run` sets it). Tests on a shared PostgreSQL stay independent because
 * each creates its own organizations and every row is scoped by organization.
 */
export const databases = (): ReadonlyArray<Database> => {
  const url = process.env.DATABASE_URL?.trim()
  // TEST_DATABASES=postgresql: CI's second run, through PgBouncer, where SQLite has nothing new to show.
  const sqlite = process.env.TEST_DATABASES !== "postgresql" || !url
  return [
    ...(sqlite ? [{ name: "sqlite" as const, config: { dataDir: ":memory:" } }] : []),
    ...(url
      ? [{ name: "postgresql" as const, config: { databaseUrl: Option.some(Redacted.make(url)), ...pooler() } }]
      : [])
  ]
}

/**
 * The pooler settings of the environment, as the service would read them (`.ci/run`'s second PostgreSQL run:
 * DATABASE_URL is PgBouncer's, DATABASE_DIRECT_URL PostgreSQL's own, DATABASE_POOLER left to `auto`).
 */
const pooler = (): Partial<AppConfigShape> => {
  const direct = process.env.DATABASE_DIRECT_URL?.trim()
  return {
    ...(process.env.DATABASE_POOLER === "transaction" ? { databasePooler: "transaction" as const } : {}),
    ...(direct ? { databaseDirectUrl: Option.some(Redacted.make(direct)) } : {})
  }
}

/**
 * The time a suite's set-up or tear-down hook may take when it creates or drops a scratch PostgreSQL database or
 * closes a service: bun's 5 s default for hooks was passed by `DROP DATABASE … WITH (FORCE)` on a loaded machine.
 */
export const SLOW_HOOK_MS = 30_000

export const uniqueSlug = (prefix = "org") => `${prefix}-${crypto.randomUUID().slice(0, 12)}`

export interface TestServer {
  readonly app: App
  readonly baseUrl: string
  /** A new organization and a key for it. */
  readonly createOrg: (slug?: string) => Promise<{ id: string; slug: string; apiKey: string; keyId: string }>
  readonly client: (apiKey: string) => Promise<Client>
  /** Runs an effect against the application's own services (its database, its clock). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, AppServices>) => Promise<A>
  readonly fetch: (path: string, init?: RequestInit & { apiKey?: string }) => Promise<Response>
  readonly close: () => Promise<void>
}

type AppServices = ManagedRuntime.ManagedRuntime.Context<App["runtime"]>

export type Client = Effect.Effect.Success<ReturnType<typeof makeClient>>

/** A port nothing listens on now (the system's pick, released at once). */
const freePort = (): number => {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: () => undefined } })
  const port = probe.port
  probe.stop(true)
  return port
}

/** The service on a real port, as a vendor would reach it. */
export const startServer = async (
  config: Partial<AppConfigShape> = {},
  options: {
    readonly clock?: Clock.Clock
    readonly hotPath?: boolean
    /** Run the webhook delivery worker in the background (else tests drive it with `Deliveries.runOnce`). */
    readonly deliveries?: boolean
    /**
     * PUBLIC_URL is the server's own address (else `http://localhost`, which nothing listens on): for a browser that
     * follows the links the service makes (a portal session's, a provider's setup page) as a customer would.
     */
    readonly ownPublicUrl?: boolean
  } = {}
): Promise<TestServer> => {
  const port = options.ownPublicUrl === true ? freePort() : 0
  const app = makeApp(
    AppConfigTest(port === 0 ? config : { ...config, publicUrl: `http://127.0.0.1:${port}` }),
    options
  )
  // Build the layers (and run migrations) before the first request.
  const { requestTimeoutMs } = await app.runtime.runPromise(AppConfig)
  await app.ready
  if (options.deliveries === true) await app.startDeliveries()
  const server = serve(app, { port, hostname: "127.0.0.1", logLevel: LogLevel.None, requestTimeoutMs })
  const baseUrl = `http://127.0.0.1:${server.port}`
  const run = <A, E>(effect: Effect.Effect<A, E, AppServices>) => app.runtime.runPromise(effect)

  return {
    app,
    baseUrl,
    run,
    createOrg: (slug = uniqueSlug()) =>
      run(
        Effect.gen(function* () {
          const orgs = yield* Organizations
          const org = yield* orgs.create(slug)
          const { apiKey, key } = yield* orgs.createKey(org.id)
          return { id: org.id, slug: org.slug, apiKey, keyId: key.id }
        })
      ),
    client: (apiKey) =>
      Effect.runPromise(
        makeClient(baseUrl, {
          transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(apiKey))
        }).pipe(Effect.provide(FetchHttpClient.layer))
      ),
    fetch: (path, init = {}) => {
      const headers = new Headers(init.headers)
      if (init.apiKey !== undefined) headers.set("authorization", `Bearer ${init.apiKey}`)
      if (init.body !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json")
      return fetch(baseUrl + path, { ...init, headers })
    },
    close: async () => {
      server.stop(true)
      await app.dispose()
    }
  }
}

/** Runs a client call: its success, or its typed failure, for assertions on either. */
export const attempt = <A, E>(effect: Effect.Effect<A, E, never>): Promise<Either.Either<A, E>> =>
  Effect.runPromise(Effect.either(effect))

export const ok = async <A, E>(effect: Effect.Effect<A, E, never>): Promise<A> => {
  const result = await attempt(effect)
  if (Either.isLeft(result)) throw new Error(`expected success, got ${JSON.stringify(result.left)}`)
  return result.right
}

export const failure = async <A, E>(effect: Effect.Effect<A, E, never>): Promise<E> => {
  const result = await attempt(effect)
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}
