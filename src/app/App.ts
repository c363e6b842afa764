import { FetchHttpClient, HttpApiBuilder } from "@effect/platform"
import { Clock, Context, Effect, Exit, Layer, ManagedRuntime, Option, Scope } from "effect"
import { InvoicesLive } from "../billing/Invoices.ts"
import { InvoicesRepoSql } from "../billing/InvoicesRepo.ts"
import { BillingProfilesLive } from "../billing/profile/BillingProfiles.ts"
import { InvoiceLinksLive } from "../billing/documents/links.ts"
import { InvoiceDocumentsLive } from "../billing/documents/InvoiceDocuments.ts"
import { CreditNotesLive } from "../billing/creditNotes/CreditNotes.ts"
import { BillingDetailsRepoSql } from "../customers/BillingDetailsRepo.ts"
import { CatalogLive } from "../catalog/CatalogLive.ts"
import { CatalogRepoSql } from "../catalog/CatalogRepo.ts"
import { CreditBalanceLive } from "../creditBalance/CreditBalance.ts"
import { TaxRatesLive } from "../catalog/taxRates.ts"
import { CouponsLive } from "../catalog/coupons.ts"
import { CustomerDiscountsLive } from "../catalog/customerDiscounts.ts"
import { SubscriptionDiscountsLive } from "../catalog/subscriptionDiscounts.ts"
import { CustomersLive } from "../customers/Customers.ts"
import { CustomersRepoSql } from "../customers/CustomersRepo.ts"
import { FeatureConfigsLive, FeatureConfigsRepoSql } from "../customers/FeatureConfigs.ts"
import { EntitiesLive } from "../entities/Entities.ts"
import { EntitiesRepoSql } from "../entities/EntitiesRepo.ts"
import { CreditsLive } from "../entitlements/Credits.ts"
import { EntitlementsLive } from "../entitlements/Engine.ts"
import { EntitlementsRepoSql } from "../entitlements/EntitlementsRepo.ts"
import { assets } from "../dashboard/assets.ts"
import { makeDashboard } from "../dashboard/Http.ts"
import { DashboardSessionsLive } from "../dashboard/Sessions.ts"
import { PortalSessionsLive } from "../portal/Sessions.ts"
import { portalAssets } from "../portal/assets.ts"
import { makePortal } from "../portal/Http.ts"
import { Deliveries, DeliveriesLive } from "../events/Deliveries.ts"
import { EventsLive } from "../events/Events.ts"
import { OutboxLive } from "../events/Outbox.ts"
import { HttpLive } from "../http/ApiLive.ts"
import { AuthenticatorLive } from "../organizations/Authenticator.ts"
import { type HotPath, makeHotPath } from "../http/hotPath.ts"
import { makeRateLimitGate } from "../http/rateLimit.ts"
import { RequestFiber } from "../http/RequestFiber.ts"
import { RequestId } from "../http/RequestId.ts"
import { OrganizationsLive } from "../organizations/Organizations.ts"
import { OrganizationsRepoSql } from "../organizations/OrganizationsRepo.ts"
import { AppConfig } from "../platform/config.ts"
import { DatabaseLive } from "../platform/db/Database.ts"
import { AddonsLive } from "../payments/Addons.ts"
import { InvoicePaymentsLive } from "../billing/InvoicePayments.ts"
import { RenewalsLive } from "../subscriptions/Renewals.ts"
import { makeAdaptersLayer } from "../payments/Adapters.ts"
import { PaymentEffectsLive } from "../wiring/paymentEffects.ts"
import { PaymentsLive } from "../payments/Payments.ts"
import { PaymentsRepoSql } from "../payments/PaymentsRepo.ts"
import { makePaystackAdapterEffect } from "../payments/paystack/PaystackAdapter.ts"
import { ProviderAccountsLive } from "../payments/ProviderAccounts.ts"
import { makeStripeAdapter } from "../payments/stripe/StripeAdapter.ts"
import { EncryptionLive } from "../platform/encryption.ts"
import { IdsLive } from "../platform/ids.ts"
import { LoggingLive } from "../platform/logging.ts"
import { TracingLive } from "../platform/tracing.ts"
import { EventCustomersLive } from "../wiring/eventCustomers.ts"
import { SubscriptionHooksLive } from "../wiring/subscriptionHooks.ts"
import { PlanChangesLive } from "../subscriptions/changes.ts"
import { SubscriptionsLive } from "../subscriptions/Subscriptions.ts"
import { SubscriptionsRepoSql } from "../subscriptions/SubscriptionsRepo.ts"
import { UsageHistoryLive } from "../usage/UsageHistory.ts"
import { UsageRepoSql } from "../usage/UsageRepo.ts"
import { WebhooksLive } from "../webhooks/Webhooks.ts"

/** Repositories over whichever SqlClient the database layer chose. */
const ReposLive = Layer.mergeAll(
  OrganizationsRepoSql,
  CustomersRepoSql,
  BillingDetailsRepoSql,
  CatalogRepoSql,
  SubscriptionsRepoSql,
  EntitlementsRepoSql,
  EntitiesRepoSql,
  FeatureConfigsRepoSql,
  UsageRepoSql,
  InvoicesRepoSql,
  PaymentsRepoSql,
  TaxRatesLive,
  CouponsLive
)

/** Payment adapters: Paystack over Effect's HttpClient, Stripe's SDK, and the sandbox's simulated provider. */
const AdaptersLive = makeAdaptersLayer([
  Effect.flatMap(AppConfig, (c) => makePaystackAdapterEffect({ timeoutMs: c.providerTimeoutMs })).pipe(
    Effect.provide(FetchHttpClient.layer)
  ),
  // Stripe's hosted pages return the customer here when the request named no callback.
  Effect.map(AppConfig, (c) =>
    makeStripeAdapter({ timeoutMs: c.providerTimeoutMs, defaultReturnUrl: `${c.publicUrl}/` })
  )
])

/** Domain services with everything beneath them (repositories, ids, the migrated database), in dependency order. */
export const ServicesLive = Layer.mergeAll(
  EntitlementsLive,
  SubscriptionHooksLive,
  EntitiesLive,
  FeatureConfigsLive,
  UsageHistoryLive,
  PaymentEffectsLive,
  WebhooksLive,
  InvoicePaymentsLive,
  InvoiceDocumentsLive,
  RenewalsLive,
  EventCustomersLive,
  DashboardSessionsLive.pipe(Layer.provide(AuthenticatorLive)),
  PortalSessionsLive
).pipe(
  Layer.provideMerge(Layer.mergeAll(SubscriptionsLive, AddonsLive, CreditNotesLive)),
  Layer.provideMerge(PlanChangesLive),
  Layer.provideMerge(Layer.mergeAll(PaymentsLive, CreditsLive, InvoicesLive)),
  Layer.provideMerge(Layer.mergeAll(ProviderAccountsLive, AdaptersLive)),
  Layer.provideMerge(Layer.mergeAll(EventsLive, DeliveriesLive)),
  Layer.provideMerge(InvoiceLinksLive),
  Layer.provideMerge(EncryptionLive),
  Layer.provideMerge(
    Layer.mergeAll(
      OrganizationsLive,
      CustomersLive,
      CatalogLive,
      CreditBalanceLive,
      BillingProfilesLive,
      CustomerDiscountsLive,
      SubscriptionDiscountsLive
    )
  ),
  Layer.provideMerge(Layer.merge(ReposLive, OutboxLive)),
  Layer.provideMerge(IdsLive),
  Layer.provideMerge(DatabaseLive)
)

/**
 * The application for one configuration: a runtime of its services (for start-up work and the CLI)
 * and a fetch handler serving the API. Both share one memo map, so one database pool serves both.
 */
export const makeApp = <E>(
  config: Layer.Layer<AppConfig, E>,
  options: {
    readonly clock?: Clock.Clock
    /** false: check/track through HttpApi too (tests hold the two paths to the same answers). */
    readonly hotPath?: boolean
  } = {}
) => {
  const memoMap = Effect.runSync(Layer.makeMemoMap)
  // A clock of the caller's (tests that move time) replaces the default one for the whole application.
  const clock = options.clock === undefined ? Layer.empty : Layer.setClock(options.clock)
  const services = Layer.mergeAll(ServicesLive, LoggingLive, TracingLive).pipe(
    Layer.provideMerge(config),
    Layer.provideMerge(clock)
  )
  const runtime = ManagedRuntime.make(services, memoMap)
  const web = HttpApiBuilder.toWebHandler(
    Layer.mergeAll(HttpLive, LoggingLive, TracingLive).pipe(Layer.provide(services)),
    {
      memoMap
    }
  )
  // The pipeline's gates that need the configuration (the rate limit) and the direct check/track endpoint
  // (src/http/hotPath.ts), ready with the runtime; until then, HttpApi alone.
  const hotRuntime = ManagedRuntime.make(AuthenticatorLive.pipe(Layer.provideMerge(services)), memoMap)
  let hot: Option.Option<HotPath> = Option.none()
  let rateLimit: ((request: Request) => Response | undefined) | undefined
  let hotAnswers = 0
  const now = () => (options.clock === undefined ? Date.now() : options.clock.unsafeCurrentTimeMillis())
  const hotReady = hotRuntime
    .runPromise(
      Effect.gen(function* () {
        const config = yield* AppConfig
        if (config.rateLimitRps > 0) {
          rateLimit = makeRateLimitGate({ rps: config.rateLimitRps, burst: config.rateLimitBurst }, now)
        }
        if (options.hotPath !== false) hot = Option.some(yield* makeHotPath(hotRuntime.runFork))
      })
    )
    .catch(() => undefined)
  // The dashboard (src/dashboard/): its pages, assets and JSON routes; its `/v1` reads and changes go through
  // HttpApi's handlers with the session's organization. Its script is built now, not on the first page.
  const dashboard = makeDashboard({
    run: (effect) => runtime.runPromiseExit(effect),
    v1: (request, context) => web.handler(request, context)
  })
  void assets().catch(() => undefined)
  // The customer portal (src/portal/): the same arrangement for one customer of one organization.
  const portal = makePortal({
    run: (effect) => runtime.runPromiseExit(effect),
    v1: (request, context) => web.handler(request, context),
    assets: portalAssets
  })
  const handler = async (request: Request, context?: Context.Context<never>): Promise<Response> => {
    const path = request.url.slice(request.url.indexOf("/", request.url.indexOf("//") + 2))
    if (path === "/dashboard" || path.startsWith("/dashboard/") || path.startsWith("/dashboard?")) {
      return dashboard(request, context)
    }
    if (path === "/portal" || path.startsWith("/portal/") || path.startsWith("/portal?")) {
      return portal(request, context)
    }
    const limited = rateLimit?.(request)
    if (limited !== undefined) return limited
    if (Option.isNone(hot)) return web.handler(request, context)
    const route = hot.value.routeOf(request.method, new URL(request.url).pathname)
    if (route === undefined) return web.handler(request, context)
    const text = await request.text()
    const answer = await hot.value.handle(
      route,
      request,
      text,
      context === undefined ? undefined : Option.getOrUndefined(Context.getOption(context, RequestId)),
      context === undefined ? undefined : Option.getOrUndefined(Context.getOption(context, RequestFiber))
    )
    if (answer !== undefined) {
      hotAnswers++
      return answer
    }
    // Refused before the engine: HttpApi renders the refusal, from the same body.
    return web.handler(
      new Request(request.url, { method: request.method, headers: request.headers, body: text }),
      context
    )
  }
  // The webhook delivery worker, when this process runs one (the service does; tests choose).
  let stopDeliveries: (() => Promise<void>) | undefined
  const startDeliveries = async () => {
    if (stopDeliveries !== undefined) return
    const scope = await runtime.runPromise(Scope.make())
    await runtime.runPromise(Effect.flatMap(Deliveries, (d) => d.start).pipe(Scope.extend(scope)))
    stopDeliveries = () => runtime.runPromise(Scope.close(scope, Exit.void))
  }
  return {
    runtime,
    handler,
    /** Runs the delivery worker in the background until `stopDeliveries` or `dispose`. */
    startDeliveries,
    /** Stops claiming, lets attempts in flight finish for a moment, hands the rest back. */
    stopDeliveries: async () => {
      const stop = stopDeliveries
      stopDeliveries = undefined
      await stop?.()
    },
    /** Resolves once check/track can take the path in front of HttpApi (or know they cannot). */
    ready: hotReady,
    /** How many requests the path in front of HttpApi has answered. */
    hotPathAnswers: () => hotAnswers,
    dispose: async () => {
      const stop = stopDeliveries
      stopDeliveries = undefined
      await stop?.()
      await web.dispose()
      await hotRuntime.dispose()
      await runtime.dispose()
    }
  }
}
export type App = ReturnType<typeof makeApp<unknown>>
