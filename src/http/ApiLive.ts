import { HttpApiBuilder, HttpApiScalar, HttpServer } from "@effect/platform"
import { Layer } from "effect"
import { BillingApi } from "../api/Api.ts"
import { BillingHttp } from "../billing/Http.ts"
import { BillingProfileHttp } from "../billing/profile/Http.ts"
import { DocumentsHttp } from "../billing/documents/Http.ts"
import { HostedInvoicesHttp } from "../billing/documents/HostedHttp.ts"
import { CatalogHttp } from "../catalog/Http.ts"
import { CustomersHttp } from "../customers/Http.ts"
import { DiscountsHttp } from "../discounts/Http.ts"
import { EntitiesHttp } from "../entities/Http.ts"
import { EntitlementsHttp } from "../entitlements/Http.ts"
import { EventsHttp } from "../events/Http.ts"
import { HostedHttp } from "../hosted/Http.ts"
import { PaymentsHttp } from "../payments/Http.ts"
import { PortalHttp } from "../portal/ApiHttp.ts"
import { SubscriptionsHttp } from "../subscriptions/Http.ts"
import { UsageHttp } from "../usage/Http.ts"
import { WebhooksHttp } from "../webhooks/Http.ts"
import { AuthenticationLive } from "./Authentication.ts"
import { ErrorMiddlewareLive } from "./errorMiddleware.ts"
import { SystemHttp } from "./SystemHttp.ts"

/** Every group's handlers, the bearer middleware, the error renderer, the OpenAPI document and docs. */
export const ApiLive = HttpApiBuilder.api(BillingApi).pipe(
  Layer.provide([
    SystemHttp,
    CustomersHttp,
    DiscountsHttp,
    EntitlementsHttp,
    CatalogHttp,
    EntitiesHttp,
    SubscriptionsHttp,
    BillingHttp,
    BillingProfileHttp,
    DocumentsHttp,
    PaymentsHttp,
    UsageHttp,
    WebhooksHttp,
    EventsHttp,
    HostedHttp,
    HostedInvoicesHttp,
    PortalHttp
  ]),
  // The security middleware must be provided after the groups that use it.
  Layer.provide(AuthenticationLive)
)

export const HttpLive = Layer.mergeAll(
  ErrorMiddlewareLive,
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  // Offline: the script is inlined and Scalar's web fonts (fonts.scalar.com) are off; see DOCS_CSP in server.ts.
  HttpApiScalar.layer({ path: "/docs", scalar: { withDefaultFonts: false } }),
  HttpServer.layerContext
).pipe(Layer.provideMerge(ApiLive))
