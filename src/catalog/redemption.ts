/**
 * Redeeming a coupon or promotion code (decisions.md §15), shared by a customer's discount and an attach's: finding
 * and checking it (read-only, so a preview refuses exactly what the attach would), then counting it with one guarded
 * UPDATE per counter inside the caller's transaction, so the limit holds under any concurrency.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Unprocessable } from "../domain/errors.ts"
import { codeKey, type CouponRecord, type CouponsShape } from "./coupons.ts"

export interface DiscountRequest {
  readonly coupon?: string | undefined
  readonly promotionCode?: string | undefined
}

/** A coupon found and checked, with the code it came by (if any). */
export interface Redeemable {
  readonly coupon: CouponRecord
  readonly codeId: string | null
  readonly codeText: string | null
}

/** What the discount is to apply to, when it is known (an attach's plan): checked for applicability too. */
export interface DiscountTarget {
  readonly plan: string
  readonly currency: string
}

export const couponInvalid = (reason: string) => new Unprocessable({ code: "coupon_invalid", message: reason })

/** Invoices a new discount covers: 1 for `once`, N for `repeating`, null (forever) for `forever`. */
export const invoicesOf = (coupon: CouponRecord): number | null =>
  coupon.duration === "forever" ? null : coupon.duration === "once" ? 1 : coupon.durationInCycles

const exhausted = (c: { readonly maxRedemptions: number | null; readonly redemptions: number }) =>
  c.maxRedemptions !== null && c.redemptions >= c.maxRedemptions

/**
 * The coupon a request names, checked: known, active, not expired (`expiresAt`, `redeemBy`), not exhausted (as last
 * read: the guarded count is what decides under concurrency) and, given a target, applicable to its plan and
 * currency. Refused with `coupon_invalid` and the reason; writes nothing.
 */
export const findRedeemable = (
  coupons: CouponsShape,
  org: string,
  request: DiscountRequest,
  now: number,
  target?: DiscountTarget
): Effect.Effect<Redeemable, Unprocessable> =>
  Effect.gen(function* () {
    if ((request.coupon === undefined) === (request.promotionCode === undefined)) {
      return yield* couponInvalid("give exactly one of coupon and promotionCode")
    }
    const all = yield* coupons.list(org)
    let coupon: CouponRecord | undefined
    let codeId: string | null = null
    let codeText: string | null = null
    if (request.promotionCode !== undefined) {
      const code = (yield* coupons.listCodes(org)).find((p) => codeKey(p.code) === codeKey(request.promotionCode!))
      if (code === undefined) return yield* couponInvalid(`unknown promotion code '${request.promotionCode}'`)
      if (!code.active) return yield* couponInvalid(`promotion code '${code.code}' is not active`)
      if (code.expiresAt !== null && code.expiresAt <= now) {
        return yield* couponInvalid(`promotion code '${code.code}' expired`)
      }
      if (exhausted(code)) return yield* couponInvalid(`promotion code '${code.code}' has no redemptions left`)
      coupon = all.find((c) => c.id === code.couponId)
      codeId = code.id
      codeText = code.code
    } else {
      coupon = all.find((c) => c.slug === request.coupon)
      if (coupon === undefined) return yield* couponInvalid(`unknown coupon '${request.coupon}'`)
    }
    if (coupon === undefined) return yield* couponInvalid("the promotion code's coupon no longer exists")
    if (coupon.redeemBy !== null && coupon.redeemBy <= now) {
      return yield* couponInvalid(`coupon '${coupon.slug}' can no longer be redeemed (redeemBy passed)`)
    }
    if (exhausted(coupon)) return yield* couponInvalid(`coupon '${coupon.slug}' has no redemptions left`)
    if (target !== undefined) {
      if (coupon.plans !== null && !coupon.plans.includes(target.plan)) {
        return yield* couponInvalid(`coupon '${coupon.slug}' does not apply to plan '${target.plan}'`)
      }
      if (coupon.amountOff !== null && (coupon.currency ?? "").toUpperCase() !== target.currency.toUpperCase()) {
        return yield* couponInvalid(
          `coupon '${coupon.slug}' is an amount off in ${coupon.currency} and plan '${target.plan}' is billed in ${target.currency.toUpperCase()}`
        )
      }
    }
    return { coupon, codeId, codeText }
  })

/**
 * Counts one redemption of the coupon and its code, in the caller's transaction: a row only comes back while the
 * limit has room, so 100 concurrent redemptions of a limit of 10 count 10 whatever the database (PostgreSQL
 * re-checks the WHERE on the locked row, SQLite serialises writers). A refusal fails the transaction, so a refused
 * code gives the coupon's count back and nothing the caller wrote stays.
 */
export const countRedemption = (sql: SqlClient.SqlClient, org: string, r: Redeemable) =>
  Effect.gen(function* () {
    const redeemed = yield* sql`UPDATE coupons SET redemptions = redemptions + 1
      WHERE organization_id = ${org} AND id = ${r.coupon.id}
        AND (max_redemptions IS NULL OR redemptions < max_redemptions) RETURNING id`
    if (redeemed.length === 0) return yield* couponInvalid(`coupon '${r.coupon.slug}' has no redemptions left`)
    if (r.codeId !== null) {
      const counted = yield* sql`UPDATE promotion_codes SET redemptions = redemptions + 1
        WHERE organization_id = ${org} AND id = ${r.codeId}
          AND (max_redemptions IS NULL OR redemptions < max_redemptions) RETURNING id`
      if (counted.length === 0) return yield* couponInvalid(`promotion code '${r.codeText}' has no redemptions left`)
    }
  })
