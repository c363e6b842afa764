import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Schema } from "effect"
import type { SyncChanges } from "../api/catalog.ts"
import type { SyncCoupon, SyncPromotionCode } from "../api/coupons.ts"
import type { Issue } from "../api/errors.ts"
import { format, unsafeDecimal } from "../domain/money.ts"
import { decodeRows, Flag, Millis, NullableDbInt, NullableMillis, recordSchema } from "../platform/db/rowSchemas.ts"
import { Ids } from "../platform/ids.ts"

/** A catalog coupon as stored (decisions.md §15): `percentOff` a decimal string, `amountOff` whole minor units. */
export interface CouponRecord {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly percentOff: string | null
  readonly amountOff: string | null
  readonly currency: string | null
  readonly duration: "once" | "repeating" | "forever"
  readonly durationInCycles: number | null
  readonly maxRedemptions: number | null
  readonly redemptions: number
  readonly redeemBy: number | null
  /** Plan slugs, or null for every plan. */
  readonly plans: ReadonlyArray<string> | null
}

export interface PromotionCodeRecord {
  readonly id: string
  readonly code: string
  readonly couponId: string
  readonly maxRedemptions: number | null
  readonly redemptions: number
  readonly expiresAt: number | null
  readonly active: boolean
}

type CouponContent = Omit<CouponRecord, "id" | "redemptions">
type CodeContent = Omit<PromotionCodeRecord, "id" | "redemptions" | "couponId"> & { readonly coupon: string }

const couponContent = (c: SyncCoupon): CouponContent => ({
  slug: c.slug,
  name: c.name,
  percentOff: c.percentOff === undefined ? null : format(unsafeDecimal(c.percentOff)),
  amountOff: c.amountOff === undefined ? null : String(c.amountOff),
  currency: c.currency === undefined ? null : c.currency.toUpperCase(),
  duration: c.duration,
  durationInCycles: c.durationInCycles ?? null,
  maxRedemptions: c.maxRedemptions ?? null,
  redeemBy: c.redeemBy === undefined ? null : Date.parse(c.redeemBy),
  plans: c.plans === undefined ? null : [...c.plans]
})

const codeContent = (p: SyncPromotionCode): CodeContent => ({
  code: p.code,
  coupon: p.coupon,
  maxRedemptions: p.maxRedemptions ?? null,
  expiresAt: p.expiresAt === undefined ? null : Date.parse(p.expiresAt),
  active: p.active ?? true
})

/** The key a code is unique and found by: codes are case-insensitive (decisions.md §15). */
export const codeKey = (code: string) => code.toLowerCase()

/**
 * Problems the item schemas cannot see: a slug or code given twice, a coupon with both or neither kind of amount,
 * an amount without its currency, cycles without `repeating` (or `repeating` without them), unknown plans or coupons.
 */
export const validateCoupons = (
  coupons: ReadonlyArray<SyncCoupon>,
  codes: ReadonlyArray<SyncPromotionCode>,
  planSlugs: ReadonlySet<string>
): ReadonlyArray<Issue> => {
  const problems: Array<Issue> = []
  const slugs = new Set<string>()
  coupons.forEach((c, i) => {
    const at = (field: string, message: string) => problems.push({ path: `coupons[${i}]${field}`, message })
    if (slugs.has(c.slug)) at(".slug", `duplicate coupon '${c.slug}'`)
    slugs.add(c.slug)
    if ((c.percentOff === undefined) === (c.amountOff === undefined)) {
      at("", "must have exactly one of percentOff and amountOff")
    }
    if (c.amountOff !== undefined && c.currency === undefined) at(".currency", "is required with amountOff")
    if (c.amountOff === undefined && c.currency !== undefined) at(".currency", "is only allowed with amountOff")
    if (c.duration === "repeating" && c.durationInCycles === undefined) {
      at(".durationInCycles", "is required when duration is 'repeating'")
    }
    if (c.duration !== "repeating" && c.durationInCycles !== undefined) {
      at(".durationInCycles", "is only allowed when duration is 'repeating'")
    }
    c.plans?.forEach((p, j) => {
      if (!planSlugs.has(p)) at(`.plans[${j}]`, `unknown plan '${p}'`)
    })
  })
  const keys = new Set<string>()
  codes.forEach((p, i) => {
    if (keys.has(codeKey(p.code))) {
      problems.push({ path: `promotionCodes[${i}].code`, message: `duplicate promotion code '${p.code}'` })
    }
    keys.add(codeKey(p.code))
    if (!slugs.has(p.coupon)) {
      problems.push({ path: `promotionCodes[${i}].coupon`, message: `unknown coupon '${p.coupon}' (not in this sync)` })
    }
  })
  return problems
}

export interface CouponsShape {
  readonly list: (org: string) => Effect.Effect<ReadonlyArray<CouponRecord>>
  readonly listCodes: (org: string) => Effect.Effect<ReadonlyArray<PromotionCodeRecord>>
  /**
   * Upserts the sync's coupons by slug and promotion codes by code (case-insensitive), inside the sync's transaction;
   * redemption counts are kept across syncs, and items absent from the sync are kept and warned about (§3).
   */
  readonly reconcile: (
    org: string,
    coupons: ReadonlyArray<SyncCoupon>,
    codes: ReadonlyArray<SyncPromotionCode>,
    now: number
  ) => Effect.Effect<{
    readonly coupons: typeof SyncChanges.Type
    readonly promotionCodes: typeof SyncChanges.Type
    readonly warnings: ReadonlyArray<string>
  }>
}

export class Coupons extends Context.Tag("Coupons")<Coupons, CouponsShape>() {}

const CouponRow = recordSchema<CouponRecord>()(
  Schema.Struct({
    id: Schema.String,
    slug: Schema.String,
    name: Schema.String,
    percentOff: Schema.NullOr(Schema.String),
    amountOff: Schema.NullOr(Schema.String),
    currency: Schema.NullOr(Schema.String),
    duration: Schema.Literal("once", "repeating", "forever"),
    durationInCycles: NullableDbInt,
    maxRedemptions: NullableDbInt,
    redemptions: Millis,
    redeemBy: NullableMillis,
    plans: Schema.NullOr(Schema.parseJson(Schema.Array(Schema.String)))
  })
)
const couponRows = decodeRows("coupons", CouponRow)

const CodeRow = recordSchema<PromotionCodeRecord>()(
  Schema.Struct({
    id: Schema.String,
    code: Schema.String,
    couponId: Schema.String,
    maxRedemptions: NullableDbInt,
    redemptions: Millis,
    expiresAt: NullableMillis,
    active: Flag
  })
)
const codeRows = decodeRows("promotion_codes", CodeRow)

const sameCoupon = (a: CouponContent, b: CouponContent) =>
  a.name === b.name &&
  a.percentOff === b.percentOff &&
  a.amountOff === b.amountOff &&
  a.currency === b.currency &&
  a.duration === b.duration &&
  a.durationInCycles === b.durationInCycles &&
  a.maxRedemptions === b.maxRedemptions &&
  a.redeemBy === b.redeemBy &&
  JSON.stringify(a.plans) === JSON.stringify(b.plans)

export const CouponsLive = Layer.effect(
  Coupons,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids

    const list = (org: string) =>
      sql`SELECT id, slug, name, percent_off, amount_off, currency, duration, duration_in_cycles, max_redemptions,
            redemptions, redeem_by, plans
          FROM coupons WHERE organization_id = ${org} ORDER BY slug`.pipe(Effect.flatMap(couponRows), Effect.orDie)

    const listCodes = (org: string) =>
      sql`SELECT id, code, coupon_id, max_redemptions, redemptions, expires_at, active
          FROM promotion_codes WHERE organization_id = ${org} ORDER BY code_key`.pipe(
        Effect.flatMap(codeRows),
        Effect.orDie
      )

    const reconcile: CouponsShape["reconcile"] = (org, coupons, codes, now) =>
      Effect.gen(function* () {
        const stored = new Map((yield* list(org)).map((c) => [c.slug, c]))
        const couponChanges = {
          created: [] as Array<string>,
          updated: [] as Array<string>,
          unchanged: [] as Array<string>
        }
        const couponIds = new Map([...stored.values()].map((c) => [c.slug, c.id]))
        for (const coupon of coupons) {
          const content = couponContent(coupon)
          const row = { ...content, plans: content.plans === null ? null : JSON.stringify(content.plans) }
          const current = stored.get(coupon.slug)
          if (current === undefined) {
            const id = yield* ids.next("cpn")
            yield* sql`INSERT INTO coupons ${sql.insert({
              organizationId: org,
              id,
              ...row,
              redemptions: 0,
              createdAt: now,
              updatedAt: now
            })}`
            couponIds.set(coupon.slug, id)
            couponChanges.created.push(coupon.slug)
          } else if (sameCoupon(current, content)) {
            couponChanges.unchanged.push(coupon.slug)
          } else {
            yield* sql`UPDATE coupons SET name = ${row.name}, percent_off = ${row.percentOff},
                amount_off = ${row.amountOff}, currency = ${row.currency}, duration = ${row.duration},
                duration_in_cycles = ${row.durationInCycles}, max_redemptions = ${row.maxRedemptions},
                redeem_by = ${row.redeemBy}, plans = ${row.plans}, updated_at = ${now}
              WHERE organization_id = ${org} AND id = ${current.id}`
            couponChanges.updated.push(coupon.slug)
          }
        }

        const storedCodes = new Map((yield* listCodes(org)).map((p) => [codeKey(p.code), p]))
        const codeChanges = {
          created: [] as Array<string>,
          updated: [] as Array<string>,
          unchanged: [] as Array<string>
        }
        for (const promotion of codes) {
          const content = codeContent(promotion)
          const couponId = couponIds.get(content.coupon)!
          const current = storedCodes.get(codeKey(content.code))
          if (current === undefined) {
            yield* sql`INSERT INTO promotion_codes ${sql.insert({
              organizationId: org,
              id: yield* ids.next("promo"),
              code: content.code,
              codeKey: codeKey(content.code),
              couponId,
              maxRedemptions: content.maxRedemptions,
              redemptions: 0,
              expiresAt: content.expiresAt,
              active: content.active ? 1 : 0,
              createdAt: now,
              updatedAt: now
            })}`
            codeChanges.created.push(content.code)
          } else if (
            current.code === content.code &&
            current.couponId === couponId &&
            current.maxRedemptions === content.maxRedemptions &&
            current.expiresAt === content.expiresAt &&
            current.active === content.active
          ) {
            codeChanges.unchanged.push(content.code)
          } else {
            yield* sql`UPDATE promotion_codes SET code = ${content.code}, coupon_id = ${couponId},
                max_redemptions = ${content.maxRedemptions}, expires_at = ${content.expiresAt},
                active = ${content.active ? 1 : 0}, updated_at = ${now}
              WHERE organization_id = ${org} AND id = ${current.id}`
            codeChanges.updated.push(content.code)
          }
        }

        const givenSlugs = new Set(coupons.map((c) => c.slug))
        const givenCodes = new Set(codes.map((p) => codeKey(p.code)))
        const warnings = [
          ...[...stored.keys()]
            .filter((slug) => !givenSlugs.has(slug))
            .map((slug) => `coupon '${slug}' exists in the store but not in this sync; it was kept`),
          ...[...storedCodes.values()]
            .filter((p) => !givenCodes.has(codeKey(p.code)))
            .map((p) => `promotion code '${p.code}' exists in the store but not in this sync; it was kept`)
        ]
        return { coupons: couponChanges, promotionCodes: codeChanges, warnings }
      }).pipe(Effect.orDie)

    return { list, listCodes, reconcile }
  })
)
