import { Schema } from "effect"

/**
 * The range and scale of every number a request may carry (decisions.md §1, docs/decisions.md "Numbers"), declared
 * once. Each schema checks the range first (so 1e308 reads "must be at most …", not "must be an integer"), then the
 * scale; the OpenAPI document shows `minimum`/`maximum` (`exclusiveMinimum` where 0 is refused), `type: integer` for
 * whole numbers, and the decimals rule in the description (`multipleOf: 0.000001` is not exact in binary floating
 * point, so validators would refuse valid values with it).
 *
 * A JSON number reaches the service as a double: the range and the number of decimals are those of its shortest
 * decimal form (`String(n)`), which is exactly what is stored. Up to 15 significant digits, that is what was sent.
 */

/** A `value` of one check, track or batch item. 9e9 × 10^6 micro-units stays below 2^53. */
export const VALUE_MAX = 9_000_000_000
/** Limits, credit amounts, credit costs and credit balances; also a window's usage and overage. */
export const AMOUNT_MAX = 1_000_000_000_000
/** Money in minor units: prices, fees, unit prices, caps. */
export const MONEY_MAX = 1_000_000_000_000
/** Pack `quantity` of one purchase. */
export const PACK_QUANTITY_MAX = 1_000
/** Entity counts, `maxOverageUnits`, list offsets. */
export const COUNT_MAX = 1_000_000_000
/** A plan's `trialDays`: ten years (an instant past JavaScript's dates would be a defect, not a trial). */
export const TRIAL_DAYS_MAX = 3_650
/** Decimal places of quantities and unit prices (micro-units). */
export const MAX_DECIMALS = 6

/**
 * Decimal places of a number's shortest round-trip form: 0.1 → 1, 1.5e-7 → 8, 1e21 → 0. Exact for every finite
 * double (it reads the digits JavaScript prints, not the binary fraction).
 */
export const decimalPlaces = (n: number): number => {
  const text = String(Math.abs(n))
  const e = text.indexOf("e")
  const mantissa = e === -1 ? text : text.slice(0, e)
  const exponent = e === -1 ? 0 : Number(text.slice(e + 1))
  const dot = mantissa.indexOf(".")
  return Math.max(0, (dot === -1 ? 0 : mantissa.length - dot - 1) - exponent)
}

export interface NumberRange {
  readonly min: number
  /** `min` itself is refused (0 credits in a pack, a spend cap of 0). */
  readonly exclusiveMin?: boolean
  readonly max: number
  /** 0 = an integer. */
  readonly decimals: number
  /** Shown in the OpenAPI document with the bounds. */
  readonly what: string
  /** The OpenAPI `title`. */
  readonly title: string
}

/** The bound as a decimal with no exponent, as the message and a JSON document write it. */
const show = (n: number) => n.toLocaleString("en-US", { useGrouping: false, maximumFractionDigits: 20 })

/** The rule in words: "1 to 1000, an integer", "0 to 1000000000000, at most 6 decimal places". */
export const rangeText = (r: Omit<NumberRange, "what" | "title">): string => {
  const from = `${r.exclusiveMin === true ? "more than " : ""}${show(r.min)}`
  const scale = r.decimals === 0 ? "an integer" : `at most ${r.decimals} decimal places`
  return `${from} to ${show(r.max)}, ${scale}`
}

/** What the field is and its rule, as the OpenAPI document describes it. */
export const describeRange = (r: NumberRange): string => `${r.what}: ${rangeText(r)}`

/** Whether a number keeps a rule (what the schema checks, for values read back from storage). */
export const inRange = (r: Omit<NumberRange, "what" | "title">, n: number): boolean =>
  Number.isFinite(n) &&
  (r.exclusiveMin === true ? n > r.min : n >= r.min) &&
  n <= r.max &&
  (r.decimals === 0 ? Number.isInteger(n) : decimalPlaces(n) <= r.decimals)

/**
 * A number with a declared range and scale. Decoding also reads -0 as 0, so it can never be stored or echoed as
 * "-0" (0 and -0 are the same value to every consumer, but not to `Object.is` or a strict reader of the text).
 */
export const boundedNumber = (r: NumberRange): Schema.Schema<number> => {
  const finite = Schema.Number.annotations({ message: () => "must be a number" }).pipe(
    Schema.finite({ message: () => "must be a finite number" })
  )
  const lower =
    r.exclusiveMin === true
      ? finite.pipe(Schema.greaterThan(r.min, { message: () => `must be greater than ${show(r.min)}` }))
      : finite.pipe(Schema.greaterThanOrEqualTo(r.min, { message: () => `must be at least ${show(r.min)}` }))
  const upper = lower.pipe(Schema.lessThanOrEqualTo(r.max, { message: () => `must be at most ${show(r.max)}` }))
  const checked = (
    r.decimals === 0
      ? upper.pipe(Schema.int({ message: () => "must be an integer" }))
      : upper.pipe(
          Schema.filter((n: number) => decimalPlaces(n) <= r.decimals, {
            message: () => `must have at most ${r.decimals} decimal places`,
            jsonSchema: {}
          })
        )
  ).annotations({ title: r.title, description: describeRange(r) })
  return Schema.transform(checked, Schema.Number, {
    strict: true,
    decode: (n) => (n === 0 ? 0 : n),
    encode: (n) => n
  }).annotations({ title: r.title, description: describeRange(r) })
}

/** The ranges, each with a generic `what`; a field may say what it is with `boundedNumber({ ...RANGE, what })`. */
export const USAGE_VALUE: NumberRange = {
  min: 0,
  max: VALUE_MAX,
  decimals: MAX_DECIMALS,
  what: "Units used",
  title: "UsageValue"
}
export const AMOUNT: NumberRange = { min: 0, max: AMOUNT_MAX, decimals: MAX_DECIMALS, what: "Units", title: "Amount" }
export const POSITIVE_AMOUNT: NumberRange = { ...AMOUNT, exclusiveMin: true, title: "PositiveAmount" }
export const MONEY: NumberRange = {
  min: 0,
  max: MONEY_MAX,
  decimals: 0,
  what: "Whole minor currency units (kobo, cents)",
  title: "Money"
}
export const POSITIVE_MONEY: NumberRange = { ...MONEY, exclusiveMin: true, title: "PositiveMoney" }
export const UNIT_PRICE: NumberRange = {
  min: 0,
  max: MONEY_MAX,
  decimals: MAX_DECIMALS,
  what: "Minor currency units per unit",
  title: "UnitPrice"
}
export const PACK_QUANTITY: NumberRange = {
  min: 1,
  max: PACK_QUANTITY_MAX,
  decimals: 0,
  what: "Packs",
  title: "PackQuantity"
}
export const COUNT: NumberRange = { min: 0, max: COUNT_MAX, decimals: 0, what: "Count", title: "Count" }
export const TRIAL_DAYS: NumberRange = { min: 0, max: TRIAL_DAYS_MAX, decimals: 0, what: "Days", title: "TrialDays" }

/** `value` of check and track: 0 to 9,000,000,000, at most 6 decimals. */
export const UsageValue = boundedNumber(USAGE_VALUE)
/** A limit, a credit cost: 0 to 1,000,000,000,000, at most 6 decimals. */
export const Amount = boundedNumber(AMOUNT)
/** Credits of a pack, a tier's upper bound, a package size: as `Amount`, but more than 0. */
export const PositiveAmount = boundedNumber(POSITIVE_AMOUNT)
/** A price, a fee: whole minor units, 0 to 1,000,000,000,000. */
export const Money = boundedNumber(MONEY)
/** A cap in money that must be more than 0 (`maxOverageAmount`). */
export const PositiveMoney = boundedNumber(POSITIVE_MONEY)
/** A price per unit: minor units, 0 to 1,000,000,000,000, at most 6 decimals (0.25 kobo per token). */
export const UnitPrice = boundedNumber(UNIT_PRICE)
/** Packs bought at once. */
export const PackQuantity = boundedNumber(PACK_QUANTITY)
/** `maxOverageUnits`, entity counts. */
export const Count = boundedNumber(COUNT)
export const TrialDays = boundedNumber(TRIAL_DAYS)

/**
 * An integer query parameter with a range. The document shows it as OpenAPI describes query values, an integer
 * with `minimum`/`maximum` (every query value is text on the wire: "a string to be decoded into a number").
 */
export const boundedIntegerFromQuery = (r: Omit<NumberRange, "decimals">) => {
  const range = { ...r, decimals: 0 }
  const description = `${describeRange(range)} (a string to be decoded into a number)`
  return Schema.NumberFromString.pipe(Schema.compose(boundedNumber(range))).annotations({
    description,
    jsonSchema: {
      type: "integer",
      ...(r.exclusiveMin === true ? { exclusiveMinimum: r.min } : { minimum: r.min }),
      maximum: r.max,
      description
    }
  })
}
