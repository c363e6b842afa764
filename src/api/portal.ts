import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CustomerRef, IsoDateTime, UriString, Url } from "./common.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

/** decisions.md §17. */
export const CreatePortalSession = Schema.Struct({
  customer: CustomerRef,
  returnUrl: Schema.optionalWith(Url, { exact: true }).annotations({
    description: "Where the portal's back link and sign-out take the customer (the vendor's app)"
  })
}).annotations({ identifier: "CreatePortalSession", parseOptions: { errors: "all" } })
export type CreatePortalSession = typeof CreatePortalSession.Type

export const PortalSession = Schema.Struct({
  success: Schema.Boolean,
  url: UriString.annotations({
    description: "The portal link for this customer: opens a session once, until `expiresAt`"
  }),
  expiresAt: IsoDateTime.annotations({ description: "1 hour from creation; the session the link opens ends then too" })
}).annotations({ identifier: "PortalSession" })
export type PortalSession = typeof PortalSession.Type

export class PortalGroup extends HttpApiGroup.make("portal")
  .annotate(OpenApi.Description, "The customer portal: a page where one customer sees and changes their own billing")
  .add(
    HttpApiEndpoint.post("createPortalSession", "/v1/portal/sessions")
      .setPayload(CreatePortalSession)
      .addSuccess(PortalSession)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Create a customer portal session")
      .annotate(
        OpenApi.Description,
        "A one-time link to the customer portal for this customer, valid 1 hour: their plan, usage, invoices and payment methods, and the changes they may make themselves. Send the customer to `url`; do not share it."
      )
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
