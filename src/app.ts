import { HttpApiBuilder } from "@effect/platform"
import { type Clock, Effect, Layer, ManagedRuntime } from "effect"
import { CatalogLive } from "./catalog/CatalogLive.ts"
import { CatalogRepoSql } from "./catalog/CatalogRepo.ts"
import { CustomersLive } from "./customers/Customers.ts"
import { CustomersRepoSql } from "./customers/CustomersRepo.ts"
import { FeatureConfigsLive, FeatureConfigsRepoSql } from "./customers/FeatureConfigs.ts"
import { EntitiesLive } from "./entities/Entities.ts"
import { EntitiesRepoSql } from "./entities/EntitiesRepo.ts"
import { CreditsLive } from "./entitlements/Credits.ts"
import { EntitlementsLive } from "./entitlements/Engine.ts"
import { EntitlementsRepoSql } from "./entitlements/EntitlementsRepo.ts"
import { HttpLive } from "./http/ApiLive.ts"
import { OrganizationsLive } from "./organizations/Organizations.ts"
import { OrganizationsRepoSql } from "./organizations/OrganizationsRepo.ts"
import type { AppConfig } from "./platform/config.ts"
import { DatabaseLive } from "./platform/db/Database.ts"
import { IdsLive } from "./platform/ids.ts"
import { LoggingLive } from "./platform/logging.ts"
import { TracingLive } from "./platform/tracing.ts"
import { SubscriptionHooksLive } from "./subscriptions/hooks.ts"
import { SubscriptionsLive } from "./subscriptions/Subscriptions.ts"
import { SubscriptionsRepoSql } from "./subscriptions/SubscriptionsRepo.ts"

/** Repositories over whichever SqlClient the database layer chose. */
const ReposLive = Layer.mergeAll(
  OrganizationsRepoSql,
  CustomersRepoSql,
  CatalogRepoSql,
  SubscriptionsRepoSql,
  EntitlementsRepoSql,
  EntitiesRepoSql,
  FeatureConfigsRepoSql
)

/** Domain services with everything beneath them (repositories, ids, the migrated database). */
export const ServicesLive = Layer.mergeAll(EntitlementsLive, CreditsLive, SubscriptionHooksLive, EntitiesLive, FeatureConfigsLive).pipe(
  Layer.provideMerge(SubscriptionsLive),
  Layer.provideMerge(Layer.mergeAll(OrganizationsLive, CustomersLive, CatalogLive)),
  Layer.provideMerge(ReposLive),
  Layer.provideMerge(IdsLive),
  Layer.provideMerge(DatabaseLive)
)

/**
 * The application for one configuration: a runtime of its services (for start-up work and the CLI)
 * and a fetch handler serving the API. Both share one memo map, so one database pool serves both.
 */
export const makeApp = <E>(config: Layer.Layer<AppConfig, E>, options: { readonly clock?: Clock.Clock } = {}) => {
  const memoMap = Effect.runSync(Layer.makeMemoMap)
  // A clock of the caller's (tests that move time) replaces the default one for the whole application.
  const clock = options.clock === undefined ? Layer.empty : Layer.setClock(options.clock)
  const services = Layer.mergeAll(ServicesLive, LoggingLive, TracingLive).pipe(
    Layer.provideMerge(config),
    Layer.provideMerge(clock)
  )
  const runtime = ManagedRuntime.make(services, memoMap)
  const web = HttpApiBuilder.toWebHandler(Layer.mergeAll(HttpLive, LoggingLive, TracingLive).pipe(Layer.provide(services)), {
    memoMap
  })
  return {
    runtime,
    handler: web.handler,
    dispose: async () => {
      await web.dispose()
      await runtime.dispose()
    }
  }
}
export type App = ReturnType<typeof makeApp<unknown>>
