import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ApplyDiscount, CustomerDiscount, DiscountRemoved } from "./coupons.ts"
import { BadRequestError, ConflictError, NotFoundError, UnprocessableError } from "./errors.ts"
import { Authentication } from "./security.ts"

const idParam = HttpApiSchema.param("id", Schema.String)

/** A customer's discount (decisions.md §15). */
export class DiscountsGroup extends HttpApiGroup.make("discounts")
  .annotate(OpenApi.Description, "Coupons and promotion codes applied to a customer's later invoices")
  .add(
    HttpApiEndpoint.post("applyDiscount")`/v1/customers/${idParam}/discount`
      .setPayload(ApplyDiscount)
      .addSuccess(CustomerDiscount)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .annotate(OpenApi.Summary, "Apply a coupon or promotion code to a customer (its redemption is counted)")
  )
  .add(
    HttpApiEndpoint.del("removeDiscount")`/v1/customers/${idParam}/discount`
      .addSuccess(DiscountRemoved)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Remove a customer's discount")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
