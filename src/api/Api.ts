import { HttpApi, OpenApi } from "@effect/platform"
import { BillingGroup } from "./billing.ts"
import { BillingProfileGroup } from "./billingProfile.ts"
import { DocumentsGroup } from "./documents.ts"
import { CatalogGroup } from "./catalog.ts"
import { CustomersGroup } from "./customers.ts"
import { DiscountsGroup } from "./discounts.ts"
import { EntitiesGroup } from "./entities.ts"
import { EntitlementsGroup } from "./entitlements.ts"
import { EventsGroup } from "./events.ts"
import { HostedGroup } from "./hosted.ts"
import { HostedInvoicesGroup } from "./hostedInvoices.ts"
import { InternalErrorError, NotFoundError, PayloadTooLargeError, UnavailableError } from "./errors.ts"
import { transformDocument } from "./openapi.ts"
import { PaymentsGroup } from "./payments.ts"
import { PortalGroup } from "./portal.ts"
import { SubscriptionsGroup } from "./subscriptions.ts"
import { SystemGroup } from "./system.ts"
import { UsageGroup } from "./usage.ts"
import { WebhooksGroup } from "./webhooks.ts"

/**
 * The whole contract of the service (interface-spec.md part 4, decisions.md). This folder imports
 * nothing from the server: the OpenAPI document and the typed client are derived from it alone.
 */
export class BillingApi extends HttpApi.make("billing")
  .add(SystemGroup)
  .add(CustomersGroup)
  .add(DiscountsGroup)
  .add(EntitlementsGroup)
  .add(CatalogGroup)
  .add(EntitiesGroup)
  .add(SubscriptionsGroup)
  .add(BillingGroup)
  .add(BillingProfileGroup)
  .add(DocumentsGroup)
  .add(PaymentsGroup)
  .add(UsageGroup)
  .add(WebhooksGroup)
  .add(EventsGroup)
  .add(HostedGroup)
  .add(HostedInvoicesGroup)
  .add(PortalGroup)
  // Failures any route can produce, whatever its capability.
  .addError(NotFoundError)
  .addError(PayloadTooLargeError)
  .addError(InternalErrorError)
  .addError(UnavailableError)
  // Request bodies accept unknown fields, and the document says so (decisions.md §1); request defaults, error bodies
  // and titles as generators and linters read them (./openapi.ts): rules over the whole document, for every endpoint.
  .annotate(OpenApi.Transform, transformDocument)
  .annotate(OpenApi.Servers, [
    {
      url: "http://localhost:3000",
      description: "The service as `npm start` runs it; a deployment serves the same paths under its own origin"
    }
  ])
  .annotate(OpenApi.Title, "Billing, entitlement and usage service")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "Customers, catalog sync, entitlement checks and usage tracking, credit packs, invoices and payment-provider webhooks."
  ) {}
