import { Effect, Layer } from "effect"
import { makeApp } from "../app/App.ts"
import { seedSample, type Send } from "../dashboard/sample.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { AppConfig } from "../platform/config.ts"
import { makeShiftedClock } from "../platform/shiftedClock.ts"
import { flag, need, type Output, type Parsed, UsageError } from "./args.ts"

const count = (args: Parsed, name: string, fallback: number, max: number) =>
  Effect.suspend(() => {
    const text = flag(args, name)
    const value = text === undefined ? fallback : Number(text)
    return Number.isInteger(value) && value >= 0 && value <= max
      ? Effect.succeed(value)
      : Effect.fail(new UsageError(`--${name} must be an integer from 0 to ${max}`))
  })

/**
 * `sample-data <org>`: a sample catalog, customers, paid plans and 30 days of usage in an organization, made through
 * `/v1` by the service's own handler in this process (src/dashboard/sample.ts), so the dashboard has something to
 * show. Sandbox only. A key is made for the run and revoked at its end.
 */
export const sampleCommand = (args: Parsed) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (config.appEnv !== "sandbox") return yield* Effect.fail(new UsageError("sample-data is for sandbox deployments"))
    const orgs = yield* Organizations
    const org = yield* orgs.get(yield* need(args.positional[1], "<org>"))
    const customers = yield* count(args, "customers", 200, 10_000)
    const events = yield* count(args, "events", 5_000, 1_000_000)
    const { apiKey, key } = yield* orgs.createKey(org.id)
    const movable = makeShiftedClock()
    const sampled = yield* Effect.acquireUseRelease(
      Effect.sync(() => makeApp(Layer.succeed(AppConfig, { ...config, logLevel: "none" }), { clock: movable.clock })),
      (app) =>
        Effect.promise(async () => {
          await app.runtime.runPromise(Effect.void)
          const send: Send = async (method, path, body) => {
            const response = await app.handler(
              new Request(`http://localhost${path}`, {
                method,
                headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
                ...(body === undefined ? {} : { body: JSON.stringify(body) })
              })
            )
            const text = await response.text()
            return { status: response.status, body: text.startsWith("{") ? JSON.parse(text) : text }
          }
          return seedSample(send, { customers, events, clock: movable, invoices: 5 })
        }),
      (app) => Effect.promise(() => app.dispose())
    ).pipe(Effect.ensuring(Effect.ignore(orgs.revokeKey(key.id))))
    return {
      json: {
        organization: org.slug,
        customers: sampled.customers.length,
        paid: sampled.paid.length,
        tracked: sampled.tracked,
        invoices: sampled.invoices.length
      },
      text:
        `Sample data in ${org.slug}: ${sampled.customers.length} customers (${sampled.paid.length} on paid plans), ` +
        `${sampled.tracked} usage events over 30 days, ${sampled.invoices.length} invoices.`
    } satisfies Output
  })
