import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { ApplyDiscount } from "../api/coupons.ts"
import { type CouponTerms } from "../domain/discounts.ts"
import type { Unprocessable } from "../domain/errors.ts"
import { unsafeDecimal } from "../domain/money.ts"
import { decodeRows, NullableDbInt } from "../platform/db/rowSchemas.ts"
import { Coupons, type CouponRecord } from "./coupons.ts"
import { countRedemption, findRedeemable, invoicesOf } from "./redemption.ts"

/** A customer's discount as invoices read it. */
export interface ActiveDiscount {
  readonly coupon: CouponRecord
  readonly promotionCode: string | null
  /** Invoices it still discounts; null: forever. */
  readonly invoicesLeft: number | null
}

export const couponTerms = (c: CouponRecord): CouponTerms => ({
  slug: c.slug,
  percentOff: c.percentOff === null ? null : unsafeDecimal(c.percentOff),
  amountOff: c.amountOff === null ? null : unsafeDecimal(c.amountOff),
  currency: c.currency,
  plans: c.plans
})

export interface CustomerDiscountsShape {
  /**
   * Redeems the coupon or code (one guarded UPDATE per counter: the limit holds under any concurrency) and makes it
   * the customer's discount, replacing any other, in one transaction; refused with `coupon_invalid` and its reason.
   */
  readonly apply: (
    org: string,
    customerId: string,
    request: ApplyDiscount,
    now: number
  ) => Effect.Effect<ActiveDiscount, Unprocessable>
  readonly remove: (org: string, customerId: string) => Effect.Effect<boolean>
  readonly active: (org: string, customerId: string) => Effect.Effect<Option.Option<ActiveDiscount>>
  /**
   * One invoice takes the discount (in the invoice's transaction): a `once` or `repeating` one has one fewer left.
   * `false` when none was left (a concurrent invoice took the last; PostgreSQL re-checks the guard on the locked row,
   * SQLite serializes writers): that invoice gets no discount. A `forever` one is always `true`.
   */
  readonly used: (org: string, customerId: string, invoicesLeft: number | null) => Effect.Effect<boolean>
}

export class CustomerDiscounts extends Context.Tag("CustomerDiscounts")<CustomerDiscounts, CustomerDiscountsShape>() {}

const DiscountRow = Schema.Struct({
  couponId: Schema.String,
  promotionCode: Schema.NullOr(Schema.String),
  invoicesLeft: NullableDbInt
})
const discountRows = decodeRows("customer_discounts", DiscountRow)

export const CustomerDiscountsLive = Layer.effect(
  CustomerDiscounts,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const coupons = yield* Coupons

    const apply: CustomerDiscountsShape["apply"] = (org, customerId, request, now) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const found = yield* findRedeemable(coupons, org, request, now)
            yield* countRedemption(sql, org, found)
            const { codeId, codeText, coupon } = found
            const invoicesLeft = invoicesOf(coupon)
            yield* sql`DELETE FROM customer_discounts WHERE organization_id = ${org} AND customer_id = ${customerId}`
            yield* sql`INSERT INTO customer_discounts ${sql.insert({
              organizationId: org,
              customerId,
              couponId: coupon.id,
              promotionCodeId: codeId,
              invoicesLeft,
              createdAt: now
            })}`
            return { coupon, promotionCode: codeText, invoicesLeft }
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const remove = (org: string, customerId: string) =>
      sql`DELETE FROM customer_discounts WHERE organization_id = ${org} AND customer_id = ${customerId}
          RETURNING customer_id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )

    const active = (org: string, customerId: string) =>
      Effect.gen(function* () {
        const rows = yield* sql`SELECT d.coupon_id, p.code AS promotion_code, d.invoices_left
            FROM customer_discounts d
            LEFT JOIN promotion_codes p ON p.organization_id = d.organization_id AND p.id = d.promotion_code_id
            WHERE d.organization_id = ${org} AND d.customer_id = ${customerId}
              AND (d.invoices_left IS NULL OR d.invoices_left > 0)`.pipe(Effect.flatMap(discountRows))
        const row = rows[0]
        if (row === undefined) return Option.none<ActiveDiscount>()
        const coupon = (yield* coupons.list(org)).find((c) => c.id === row.couponId)
        if (coupon === undefined) return Option.none<ActiveDiscount>()
        return Option.some<ActiveDiscount>({ coupon, promotionCode: row.promotionCode, invoicesLeft: row.invoicesLeft })
      }).pipe(Effect.orDie)

    const used = (org: string, customerId: string, invoicesLeft: number | null) =>
      invoicesLeft === null
        ? Effect.succeed(true)
        : sql`UPDATE customer_discounts SET invoices_left = invoices_left - 1
              WHERE organization_id = ${org} AND customer_id = ${customerId} AND invoices_left > 0
              RETURNING customer_id`.pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.orDie
          )

    return { apply, remove, active, used }
  })
)
