import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { decodeRows, Millis, NullableDbInt, NullableMillis } from "../platform/db/rowSchemas.ts"
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
  /**
   * The customer's live subscriptions (active, trialing, past due) that have a discount bound, spent or not, oldest
   * first: what a usage invoice reads to cover each subscription's usage lines (docs/decisions.md h19).
   */
  readonly ofCustomer: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<BoundDiscount>>
}

/** A live subscription's bound discount, with what a usage invoice needs to know whether it is still in force. */
export interface BoundDiscount {
  readonly subscriptionId: string
  readonly planId: string
  readonly currentPeriodStart: number
  readonly currentPeriodEnd: number | null
  /** Epoch ms the coupon was bound: only the subscription's invoices from then on can have spent it. */
  readonly boundAt: number
  readonly discount: ActiveDiscount
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

const BoundRow = Schema.Struct({
  subscriptionId: Schema.String,
  planId: Schema.String,
  currentPeriodStart: Millis,
  currentPeriodEnd: NullableMillis,
  couponId: Schema.String,
  promotionCode: Schema.NullOr(Schema.String),
  invoicesLeft: NullableDbInt,
  createdAt: Millis
})
const boundRows = decodeRows("subscription_discounts", BoundRow)

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

    const ofCustomer: SubscriptionDiscountsShape["ofCustomer"] = (org, customerId) =>
      Effect.gen(function* () {
        const found =
          yield* sql`SELECT s.id AS subscription_id, s.plan_id, s.current_period_start, s.current_period_end, d.coupon_id,
              p.code AS promotion_code, d.invoices_left, d.created_at
            FROM subscriptions s
            JOIN subscription_discounts d ON d.organization_id = s.organization_id AND d.subscription_id = s.id
            LEFT JOIN promotion_codes p ON p.organization_id = d.organization_id AND p.id = d.promotion_code_id
            WHERE s.organization_id = ${org} AND s.customer_id = ${customerId}
              AND s.status IN ('active', 'trialing', 'past_due')
            ORDER BY s.started_at, s.id`.pipe(Effect.flatMap(boundRows))
        if (found.length === 0) return []
        const all = yield* coupons.list(org)
        return found.flatMap((row): Array<BoundDiscount> => {
          const coupon = all.find((c) => c.id === row.couponId)
          if (coupon === undefined) return []
          return [
            {
              subscriptionId: row.subscriptionId,
              planId: row.planId,
              currentPeriodStart: row.currentPeriodStart,
              currentPeriodEnd: row.currentPeriodEnd,
              boundAt: row.createdAt,
              discount: { coupon, promotionCode: row.promotionCode, invoicesLeft: row.invoicesLeft }
            }
          ]
        })
      }).pipe(Effect.orDie)

    return {
      bind,
      ofCustomer,
      find: (org, id) => read(org, id, false),
      active: (org, id) => read(org, id, true),
      used
    }
  })
)
