/**
 * Random catalogs, customers and usage for the invoice checker (fast-check arbitraries), shaped so that every number
 * the service answers can be recomputed from §15–§16: each feature belongs to one plan (a line's feature names its
 * plan), usage features have no allowance (every unit is billed), and at most one inclusive rate can match a buyer.
 */
import fc from "fast-check"
import type { CouponTerms, Pricing, TaxRate, Tier } from "./rules.ts"

export const CURRENCIES = ["JPY", "NGN", "USD", "EUR", "KWD"] as const

export interface UsageFeature {
  readonly slug: string
  readonly pricing: Pricing
}

export interface PlanSpec {
  readonly slug: string
  readonly currency: string
  /** A fixed monthly price (attached, then renewed), or 0 for a usage plan every customer has. */
  readonly price: number
  readonly features: ReadonlyArray<UsageFeature>
}

export type Coupon = CouponTerms & {
  readonly duration: "once" | "repeating" | "forever"
  readonly durationInCycles?: number
  readonly code?: string
}

export interface CustomerSpec {
  readonly id: string
  readonly name: string
  readonly country?: string
  readonly state?: string
  readonly taxExempt: "none" | "exempt" | "reverse_charge"
  /** Index into the coupons, and whether it is applied by its promotion code. */
  readonly discount?: { readonly coupon: number; readonly byCode: boolean }
  /** After the first round and the renewal: the discount kept, removed (`DELETE`) or replaced by another coupon. */
  readonly change:
    { readonly kind: "keep" } | { readonly kind: "remove" } | { readonly kind: "replace"; readonly coupon: number }
  /** After the first round: the customer's new address and tax status (tax is decided when an invoice is finalized). */
  readonly moveTo?: {
    readonly country?: string
    readonly state?: string
    readonly taxExempt: CustomerSpec["taxExempt"]
  }
  readonly subscribes: boolean
  /** The coupon (index) the subscriber attaches the fixed plan with, if any (§15: `coupon` on `POST /v1/attach`). */
  readonly attachCoupon?: number
  /** Units per usage feature per round (0: nothing tracked). */
  readonly usage: ReadonlyArray<ReadonlyArray<number>>
}

export interface Scenario {
  readonly prefix: string
  readonly plans: ReadonlyArray<PlanSpec>
  readonly coupons: ReadonlyArray<Coupon>
  readonly taxRates: ReadonlyArray<TaxRate>
  readonly customers: ReadonlyArray<CustomerSpec>
}

/** A decimal with up to `places` places, as a vendor would write it (a JSON number). */
const decimal = (minUnits: number, maxUnits: number, places: number) =>
  fc.integer({ min: minUnits, max: maxUnits }).map((n) => Number((n / 10 ** places).toFixed(places)))

const tiers = fc
  .tuple(
    fc.integer({ min: 1, max: 200 }),
    fc.integer({ min: 1, max: 2000 }),
    fc.array(decimal(0, 30_000, 3), { minLength: 3, maxLength: 3 }),
    fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })), { minLength: 3, maxLength: 3 })
  )
  .map(([first, second, prices, fees]): ReadonlyArray<Tier> => [
    { upTo: first, unitPrice: prices[0]!, flatFee: fees[0]! },
    { upTo: first + second, unitPrice: prices[1]!, flatFee: fees[1]! },
    { upTo: null, unitPrice: prices[2]!, flatFee: fees[2]! }
  ])

const size = fc.constantFrom(undefined, undefined, 1, 100, 1000)
const withSize = <A extends object>(a: A, billingUnits: number | undefined) =>
  billingUnits === undefined ? a : { ...a, billingUnits }
const pricing: fc.Arbitrary<Pricing> = fc.oneof(
  fc
    .tuple(decimal(1, 500_000, 4), size)
    .map(([pricePerUnit, bu]) => withSize({ kind: "flat" as const, pricePerUnit }, bu)),
  fc.tuple(tiers, size).map(([t, bu]) => withSize({ kind: "graduated" as const, tiers: t }, bu)),
  fc.tuple(tiers, size).map(([t, bu]) => withSize({ kind: "volume" as const, tiers: t }, bu))
)

/** Tax jurisdictions; state rates are exclusive (US sales taxes), a country's state-less rate may be inclusive. */
const JURISDICTIONS: ReadonlyArray<{ country: string; state?: string }> = [
  { country: "NG" },
  { country: "DE" },
  { country: "US" },
  { country: "US", state: "NY" },
  { country: "US", state: "CA" },
  { country: "KW" },
  { country: "JP" }
]
export const BUYER_PLACES: ReadonlyArray<{ country?: string; state?: string }> = [
  { country: "NG" },
  { country: "DE" },
  { country: "US", state: "NY" },
  { country: "US", state: "NY" },
  { country: "US", state: "CA" },
  { country: "US", state: "TX" },
  { country: "KW" },
  { country: "JP" },
  { country: "FR" },
  {}
]
export const NAMES = [
  "Ọlájídé Àdìgún",
  "Olúwaṣeun Adéọlá",
  "Jürgen Müller",
  "山田 太郎",
  "Chidinma Okafor",
  "Zoë Østergaard"
]

export const scenario: fc.Arbitrary<Scenario> = fc
  .record({
    prefix: fc.constantFrom("INV", "OLA", "ACME2026", "MUE"),
    usagePlans: fc.array(
      fc.record({
        currency: fc.constantFrom(...CURRENCIES),
        features: fc.array(pricing, { minLength: 1, maxLength: 2 })
      }),
      { minLength: 1, maxLength: 3 }
    ),
    fixedPlans: fc.array(
      fc.record({ currency: fc.constantFrom(...CURRENCIES), price: fc.integer({ min: 1, max: 2_000_000 }) }),
      { minLength: 1, maxLength: 1 }
    ),
    coupons: fc.array(
      fc.record({
        percent: fc.option(fc.oneof(decimal(1, 10_000, 2), fc.constant(100)), { nil: undefined }),
        amountOff: fc.integer({ min: 1, max: 300_000 }),
        currencyIndex: fc.nat(),
        duration: fc.constantFrom("once" as const, "repeating" as const, "forever" as const),
        cycles: fc.integer({ min: 1, max: 3 }),
        planMask: fc.option(fc.integer({ min: 1, max: 15 }), { nil: undefined }),
        withCode: fc.boolean()
      }),
      { minLength: 1, maxLength: 4 }
    ),
    rates: fc.array(
      fc.record({
        jurisdiction: fc.nat({ max: JURISDICTIONS.length - 1 }),
        percentage: decimal(0, 1_000_000, 4),
        inclusive: fc.boolean()
      }),
      { minLength: 2, maxLength: 6 }
    ),
    customers: fc.array(
      fc.record({
        place: fc.nat({ max: BUYER_PLACES.length - 1 }),
        name: fc.constantFrom(...NAMES),
        taxExempt: fc.constantFrom(
          "none" as const,
          "none" as const,
          "none" as const,
          "exempt" as const,
          "reverse_charge" as const
        ),
        discount: fc.option(fc.record({ coupon: fc.nat(), byCode: fc.boolean() }), { nil: undefined }),
        change: fc.constantFrom("keep" as const, "keep" as const, "remove" as const, "replace" as const),
        replacement: fc.nat(),
        moveTo: fc.option(
          fc.record({
            place: fc.nat({ max: BUYER_PLACES.length - 1 }),
            taxExempt: fc.constantFrom("none" as const, "exempt" as const, "reverse_charge" as const)
          }),
          { nil: undefined, freq: 3 }
        ),
        subscribes: fc.boolean(),
        attachCoupon: fc.option(fc.nat(), { nil: undefined }),
        usage: fc.array(
          fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 }), decimal(1, 5_000_000, 3)), {
            minLength: 6,
            maxLength: 6
          }),
          {
            minLength: 2,
            maxLength: 2
          }
        )
      }),
      { minLength: 2, maxLength: 4 }
    )
  })
  .map((raw): Scenario => {
    const plans: Array<PlanSpec> = [
      ...raw.usagePlans.map((p, i) => ({
        slug: `usage-${i}`,
        currency: p.currency,
        price: 0,
        features: p.features.map((pricing, k) => ({ slug: `f-${i}-${k}`, pricing }))
      })),
      ...raw.fixedPlans.map((p, i) => ({ slug: `fixed-${i}`, currency: p.currency, price: p.price, features: [] }))
    ]
    const currencies = [...new Set(plans.map((p) => p.currency))]
    const coupons = raw.coupons.map((c, i): Coupon => {
      const plansCovered =
        c.planMask === undefined ? undefined : plans.filter((_, k) => (c.planMask! >> k) & 1).map((p) => p.slug)
      const restriction = plansCovered === undefined || plansCovered.length === 0 ? {} : { plans: plansCovered }
      const duration =
        c.duration === "repeating"
          ? { duration: "repeating" as const, durationInCycles: c.cycles }
          : { duration: c.duration }
      const code = c.withCode ? { code: `Promo${i}x` } : {}
      return c.percent !== undefined
        ? { slug: `cp-${i}`, percentOff: c.percent, ...restriction, ...duration, ...code }
        : {
            slug: `cp-${i}`,
            amountOff: c.amountOff,
            currency: currencies[c.currencyIndex % currencies.length]!,
            ...restriction,
            ...duration,
            ...code
          }
    })
    // At most one inclusive rate per country, and only a state-less one: §16's single-rate carve-out formula.
    const inclusiveTaken = new Set<string>()
    const taxRates = raw.rates.map((r, i): TaxRate => {
      const j = JURISDICTIONS[r.jurisdiction]!
      const inclusive = r.inclusive && j.state === undefined && !inclusiveTaken.has(j.country)
      if (inclusive) inclusiveTaken.add(j.country)
      return {
        slug: `rate-${i}`,
        name: inclusive ? "VAT incl" : j.state === undefined ? "VAT" : "Sales tax",
        percentage: r.percentage,
        inclusive,
        country: j.country,
        ...(j.state === undefined ? {} : { state: j.state })
      }
    })
    const featureCount = plans.reduce((n, p) => n + p.features.length, 0)
    const customers = raw.customers.map((c, i): CustomerSpec => ({
      id: `cust-${i}`,
      name: c.name,
      ...BUYER_PLACES[c.place]!,
      taxExempt: c.taxExempt,
      ...(c.discount === undefined
        ? {}
        : {
            discount: {
              coupon: c.discount.coupon % coupons.length,
              byCode: c.discount.byCode && coupons[c.discount.coupon % coupons.length]!.code !== undefined
            }
          }),
      change:
        c.change === "replace"
          ? { kind: "replace", coupon: c.replacement % coupons.length }
          : c.change === "remove" && c.discount !== undefined
            ? { kind: "remove" }
            : { kind: "keep" },
      ...(c.moveTo === undefined
        ? {}
        : { moveTo: { ...BUYER_PLACES[c.moveTo.place]!, taxExempt: c.moveTo.taxExempt } }),
      subscribes: c.subscribes && raw.fixedPlans.length > 0,
      ...(c.subscribes && raw.fixedPlans.length > 0 && c.attachCoupon !== undefined
        ? { attachCoupon: c.attachCoupon % coupons.length }
        : {}),
      usage: c.usage.map((round) => round.slice(0, featureCount))
    }))
    return { prefix: raw.prefix, plans, coupons, taxRates, customers }
  })

/** Whether §15 lets `coupon` be attached with `plan`: it covers the plan, and an amount off is in its currency. */
export const appliesToPlan = (coupon: Coupon, plan: PlanSpec): boolean =>
  (coupon.plans === undefined || coupon.plans.includes(plan.slug)) &&
  (!("amountOff" in coupon) || coupon.currency.toUpperCase() === plan.currency.toUpperCase())

/** The coupon a subscriber's fixed plan is bound to, when the attach could take it. */
export const attachedCoupon = (s: Scenario, c: CustomerSpec): Coupon | undefined => {
  const fixed = s.plans.find((p) => p.price > 0)
  if (c.attachCoupon === undefined || fixed === undefined) return undefined
  const coupon = s.coupons[c.attachCoupon]!
  return appliesToPlan(coupon, fixed) ? coupon : undefined
}

/** The catalog a vendor would sync for a scenario. */
export const catalogOf = (s: Scenario) => ({
  features: s.plans.flatMap((p) =>
    p.features.map((f) => ({ slug: f.slug, name: `Feature ${f.slug}`, type: "metered" }))
  ),
  plans: s.plans.map((p) =>
    p.price === 0
      ? {
          slug: p.slug,
          name: `Plan ${p.slug}`,
          currency: p.currency,
          autoEnable: true,
          planGroup: p.slug,
          features: p.features.map((f) =>
            f.pricing.kind === "flat"
              ? withSize(
                  { slug: f.slug, usageModel: "usage_based", pricePerUnit: f.pricing.pricePerUnit },
                  f.pricing.billingUnits
                )
              : withSize(
                  { slug: f.slug, usageModel: "usage_based", ratingModel: f.pricing.kind, tiers: f.pricing.tiers },
                  f.pricing.billingUnits
                )
          )
        }
      : {
          slug: p.slug,
          name: `Plan ${p.slug}`,
          currency: p.currency,
          price: p.price,
          interval: "monthly",
          planGroup: p.slug
        }
  ),
  coupons: s.coupons.map(({ code: _code, ...c }) => ({ name: `Coupon ${c.slug}`, ...c })),
  promotionCodes: s.coupons.flatMap((c) => (c.code === undefined ? [] : [{ code: c.code, coupon: c.slug }])),
  taxRates: s.taxRates
})
