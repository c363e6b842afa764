import type { Pricing } from "../domain/rating.ts"
import type { PlanFeature } from "./model.ts"

/** How billable units of a plan feature are priced: overage at `overagePrice` when set, else the feature's pricing. */
export const pricingOf = (terms: PlanFeature): Pricing => ({
  ratingModel: terms.overagePrice !== null && terms.usageModel === "included" ? "package" : terms.ratingModel,
  pricePerUnit: terms.overagePrice ?? terms.pricePerUnit ?? "0",
  billingUnits: terms.billingUnits,
  tiers:
    terms.usageModel === "included" && terms.overagePrice !== null
      ? undefined
      : terms.tiers?.map((t) => ({ upTo: t.upTo, unitPrice: t.unitPrice, flatFee: t.flatFee }))
})
