import { Effect, Option } from "effect"
import { type CouponRecord, Coupons, type PromotionCodeRecord } from "../catalog/coupons.ts"
import { CustomerDiscounts } from "../catalog/customerDiscounts.ts"

// The coupons and a customer's discount as the dashboard shows them (decisions.md §15). No `/v1` route lists coupons
// or reads a customer's discount (sync writes them, POST/DELETE /v1/customers/{id}/discount change it), so these are
// reads of the same services, scoped by the session's organization. Instants go out as ISO strings, money as the
// stored minor units (a decimal string), for the page to format as §13 says.

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const couponView = (c: CouponRecord) => ({
  slug: c.slug,
  name: c.name,
  percentOff: c.percentOff,
  amountOff: c.amountOff,
  currency: c.currency,
  duration: c.duration,
  durationInCycles: c.durationInCycles,
  plans: c.plans,
  redeemBy: iso(c.redeemBy),
  redemptions: c.redemptions,
  maxRedemptions: c.maxRedemptions
})

const codeView = (p: PromotionCodeRecord) => ({
  code: p.code,
  active: p.active,
  expiresAt: iso(p.expiresAt),
  redemptions: p.redemptions,
  maxRedemptions: p.maxRedemptions
})

/** Every coupon with its promotion codes, by slug; a code whose coupon is gone is not shown (it redeems nothing). */
export const catalogCoupons = (org: string) =>
  Effect.gen(function* () {
    const coupons = yield* Coupons
    const [all, codes] = yield* Effect.all([coupons.list(org), coupons.listCodes(org)])
    return [...all]
      .sort((a, b) => a.slug.localeCompare(b.slug))
      .map((c) => ({
        ...couponView(c),
        promotionCodes: codes
          .filter((p) => p.couponId === c.id)
          .sort((a, b) => a.code.localeCompare(b.code))
          .map(codeView)
      }))
  })

/** The customer's current discount: its coupon's terms and how many invoices it still takes (null: forever). */
export const customerDiscount = (org: string, customerId: string) =>
  Effect.flatMap(CustomerDiscounts, (d) => d.active(org, customerId)).pipe(
    Effect.map(
      Option.match({
        onNone: () => null,
        onSome: (a) => ({
          coupon: couponView(a.coupon),
          promotionCode: a.promotionCode,
          invoicesLeft: a.invoicesLeft
        })
      })
    )
  )
