import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { decodeRows, NullableDbInt } from "../platform/db/rowSchemas.ts"
import { Coupons } from "./coupons.ts"
import type { ActiveDiscount } from "./customerDiscounts.ts"
import type { Redeemable } from "./redemption.ts"

/**
 * A subscription's discount (decisions.md §15, docs/decisions.md "Coupons on attach"): the coupon an attach redeemed,
 * bound to the subscription it created or changed. Its invoices (renewals, plan changes) take it while
 * `invoicesLeft` lasts; a new paid subscription's first charge takes it too (and has already used one of them).
 */
export interface SubscriptionDiscountsShape {
  /** Binds a redeemed coupon to the subscription, replacing any other; in the caller's transaction. */
  readonly bind: (
    org: string,
    subscriptionId: string,
    redeemed: Redeemable,
    invoicesLeft: number | null,
    now: number
  ) => Effect.Effect<void>
  /** The discount bound to the subscription, whether or not it has invoices left (the first charge's). */
  readonly find: (org: string, subscriptionId: string) => Effect.Effect<Option.Option<ActiveDiscount>>
  /** The discount while it still has invoices left. */
  readonly active: (org: string, subscriptionId: string) => Effect.Effect<Option.Option<ActiveDiscount>>
  /** One invoice of the subscription took the discount (in the invoice's transaction). */
  readonly used: (org: string, subscriptionId: string) => Effect.Effect<void>
}

export class SubscriptionDiscounts extends Context.Tag("SubscriptionDiscounts")<
  SubscriptionDiscounts,
  SubscriptionDiscountsShape
>() {}

const Row = Schema.Struct({
  couponId: Schema.String,
  promotionCode: Schema.NullOr(Schema.String),
  invoicesLeft: NullableDbInt
})
const rows = decodeRows("subscription_discounts", Row)

export const SubscriptionDiscountsLive = Layer.effect(
  SubscriptionDiscounts,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const coupons = yield* Coupons

    const bind: SubscriptionDiscountsShape["bind"] = (org, subscriptionId, redeemed, invoicesLeft, now) =>
      Effect.gen(function* () {
        yield* sql`DELETE FROM subscription_discounts
          WHERE organization_id = ${org} AND subscription_id = ${subscriptionId}`
        yield* sql`INSERT INTO subscription_discounts ${sql.insert({
          organizationId: org,
          subscriptionId,
          couponId: redeemed.coupon.id,
          promotionCodeId: redeemed.codeId,
          invoicesLeft,
          createdAt: now
        })}`
      }).pipe(Effect.orDie)

    const read = (org: string, subscriptionId: string, onlyActive: boolean) =>
      Effect.gen(function* () {
        const found = yield* sql`SELECT d.coupon_id, p.code AS promotion_code, d.invoices_left
            FROM subscription_discounts d
            LEFT JOIN promotion_codes p ON p.organization_id = d.organization_id AND p.id = d.promotion_code_id
            WHERE d.organization_id = ${org} AND d.subscription_id = ${subscriptionId}`.pipe(Effect.flatMap(rows))
        const row = found[0]
        if (row === undefined) return Option.none<ActiveDiscount>()
        if (onlyActive && row.invoicesLeft !== null && row.invoicesLeft <= 0) return Option.none<ActiveDiscount>()
        const coupon = (yield* coupons.list(org)).find((c) => c.id === row.couponId)
        if (coupon === undefined) return Option.none<ActiveDiscount>()
        return Option.some<ActiveDiscount>({ coupon, promotionCode: row.promotionCode, invoicesLeft: row.invoicesLeft })
      }).pipe(Effect.orDie)

    const used = (org: string, subscriptionId: string) =>
      sql`UPDATE subscription_discounts SET invoices_left = invoices_left - 1
          WHERE organization_id = ${org} AND subscription_id = ${subscriptionId} AND invoices_left > 0`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    return {
      bind,
      find: (org, id) => read(org, id, false),
      active: (org, id) => read(org, id, true),
      used
    }
  })
)
