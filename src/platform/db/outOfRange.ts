import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option } from "effect"
import {
  AMOUNT,
  COUNT,
  inRange,
  MAX_DECIMALS,
  MONEY,
  type NumberRange,
  PACK_QUANTITY,
  POSITIVE_AMOUNT,
  POSITIVE_MONEY,
  rangeText,
  TRIAL_DAYS,
  UNIT_PRICE
} from "../../api/numbers.ts"
import { AMOUNT_MAX_MICRO, COUNT_MAX_MICRO, INT64_MAX, WINDOW_MAX, WINDOW_MAX_MICRO } from "../../domain/bounds.ts"
import { parseDecimal } from "../../domain/money.ts"

/**
 * Values stored before numbers had bounds (decisions.md §1, docs/decisions.md "Numbers"): a limit of 1e100 in a
 * plan's features, a spend cap of "1e+100", a SQLite balance kept as a REAL. The service reads each as its bound
 * (never a defect); this finds them so that someone fixes them at the source (a sync, a new cap). Found by migration
 * 0010 at the upgrade, and on demand by `npm run cli -- out-of-range`.
 */
export interface OutOfRange {
  readonly organizationId: string
  readonly table: string
  /** The row: its id, or its key columns joined by "/". */
  readonly id: string
  /** The column, or the path inside a JSON column: `features[0].limit`. */
  readonly field: string
  readonly value: string
  /** The rule it breaks, e.g. "0 to 1000000000000, at most 6 decimal places". */
  readonly bound: string
}

/** The rules of the request fields (src/api/numbers.ts), and the one of a window's counters (storage only). */
type Rule = Omit<NumberRange, "what" | "title">
const WINDOW: Rule = { min: 0, max: WINDOW_MAX, decimals: MAX_DECIMALS }

/** Whether a stored value (a JSON number, or a decimal string of money) keeps its rule. */
const fits = (value: unknown, r: Rule): boolean => {
  if (typeof value === "number") return inRange(r, value)
  if (typeof value === "string") {
    const parsed = parseDecimal(value)
    if (Option.isNone(parsed)) return false
    const scale = Math.max(0, BigDecimal.normalize(parsed.value).scale)
    const n = Number(value)
    return inRange({ ...r, decimals: Infinity }, n) && scale <= r.decimals
  }
  return false
}

const json = (text: unknown): unknown => {
  try {
    return typeof text === "string" ? JSON.parse(text) : text
  } catch {
    return undefined
  }
}

/** A BIGINT of micro-units: exact (an integer within 64 bits) and within [0, max]. */
const microFits = (value: unknown, max: bigint, whole = false): boolean => {
  let micro: bigint
  if (typeof value === "bigint") micro = value
  else if (typeof value === "number" && Number.isSafeInteger(value)) micro = BigInt(value)
  else if (typeof value === "string" && /^-?\d{1,19}$/.test(value)) micro = BigInt(value)
  else return false
  return micro >= 0n && micro <= max && micro <= INT64_MAX && (!whole || micro % 1_000_000n === 0n)
}

/** Every stored value outside its bound, in a stable order (table, organization, row, field). */
export const findOutOfRange: Effect.Effect<ReadonlyArray<OutOfRange>, unknown, SqlClient.SqlClient> = Effect.gen(
  function* () {
    const sql = yield* SqlClient.SqlClient
    const found: Array<OutOfRange> = []
    const check = (organizationId: string, table: string, id: string, field: string, value: unknown, rule: Rule) => {
      if (value === null || value === undefined || fits(value, rule)) return
      found.push({ organizationId, table, id, field, value: String(value), bound: rangeText(rule) })
    }

    // The catalog: few rows per organization, numbers inside JSON columns.
    for (const row of yield* sql<any>`SELECT organization_id, id, price, trial_days, features FROM plans`) {
      check(row.organizationId, "plans", row.id, "price", String(row.price), MONEY)
      if (row.trialDays !== null)
        check(row.organizationId, "plans", row.id, "trial_days", Number(row.trialDays), TRIAL_DAYS)
      const features = json(row.features)
      if (!Array.isArray(features)) continue
      features.forEach((pf: any, i: number) => {
        const at = (f: string) => `features[${i}].${f}`
        const plain = (f: string, rule: Rule) => check(row.organizationId, "plans", row.id, at(f), pf?.[f], rule)
        plain("limit", AMOUNT)
        plain("trialLimit", AMOUNT)
        plain("pricePerUnit", UNIT_PRICE)
        plain("billingUnits", POSITIVE_AMOUNT)
        plain("overagePrice", UNIT_PRICE)
        plain("maxOverageUnits", COUNT)
        plain("creditCost", AMOUNT)
        if (Array.isArray(pf?.tiers)) {
          pf.tiers.forEach((t: any, j: number) => {
            const tier = (f: string, rule: Rule) =>
              check(row.organizationId, "plans", row.id, at(`tiers[${j}].${f}`), t?.[f], rule)
            tier("upTo", POSITIVE_AMOUNT)
            tier("unitPrice", UNIT_PRICE)
            tier("flatFee", MONEY)
          })
        }
      })
    }
    for (const row of yield* sql<any>`SELECT organization_id, id, features FROM credit_systems`) {
      const features = json(row.features)
      if (!Array.isArray(features)) continue
      features.forEach((f: any, i: number) =>
        check(row.organizationId, "credit_systems", row.id, `features[${i}].creditCost`, f?.creditCost, AMOUNT)
      )
    }
    for (const row of yield* sql<any>`SELECT organization_id, id, credits, price FROM credit_packs`) {
      check(row.organizationId, "credit_packs", row.id, "credits", Number(row.credits), POSITIVE_AMOUNT)
      check(row.organizationId, "credit_packs", row.id, "price", String(row.price), MONEY)
    }

    // Customers' caps: only those that have one.
    for (const row of yield* sql<any>`SELECT organization_id, id, overage_max_amount FROM customers
        WHERE overage_max_amount IS NOT NULL`)
      check(row.organizationId, "customers", row.id, "overage_max_amount", String(row.overageMaxAmount), POSITIVE_MONEY)

    // Micro-unit BIGINTs, read as text so a SQLite REAL shows as what it is ("1.0e+22"): a whole count up to 1e9.
    const text = (column: string) =>
      sql.onDialectOrElse({
        pg: () => sql.literal(`${column}::text`),
        orElse: () => sql.literal(`CAST(${column} AS TEXT)`)
      })
    for (const row of yield* sql<any>`SELECT organization_id, customer_id, feature_id, ${text(
      "max_overage_units"
    )} AS max_overage_units FROM customer_feature_configs WHERE max_overage_units IS NOT NULL`) {
      if (!microFits(row.maxOverageUnits, COUNT_MAX_MICRO, true)) {
        found.push({
          organizationId: row.organizationId,
          table: "customer_feature_configs",
          id: `${row.customerId}/${row.featureId}`,
          field: "max_overage_units",
          value: String(row.maxOverageUnits),
          bound: `micro-units of ${rangeText(COUNT)}`
        })
      }
    }

    // Balances: a table as big as customers × features, so the database picks the candidates. Credits (bonus,
    // purchased) hold at most 1e12; a window's usage and overage at most 9e12.
    const columns = [
      ["used", WINDOW_MAX_MICRO, WINDOW],
      ["overage", WINDOW_MAX_MICRO, WINDOW],
      ["bonus", AMOUNT_MAX_MICRO, AMOUNT],
      ["addon", AMOUNT_MAX_MICRO, AMOUNT]
    ] as const
    const candidates = yield* sql<any>`SELECT organization_id, customer_id, subject_id, ${text("used")} AS used,
        ${text("overage")} AS overage, ${text("bonus")} AS bonus, ${text("addon")} AS addon FROM balances
      WHERE ${sql.literal(columns.map(([c, max]) => `${c} > ${max} OR ${c} < 0`).join(" OR "))}`
    for (const row of candidates) {
      for (const [column, max, rule] of columns) {
        if (microFits(row[column], max)) continue
        found.push({
          organizationId: row.organizationId,
          table: "balances",
          id: `${row.customerId}/${row.subjectId}`,
          field: column,
          value: String(row[column]),
          bound: `micro-units of ${rangeText(rule)}`
        })
      }
    }

    // Checkouts of packs bought before `quantity` had a bound (one could still be paid).
    for (const row of yield* sql<any>`SELECT organization_id, id, ${text("quantity")} AS quantity FROM checkouts
        WHERE quantity > ${PACK_QUANTITY.max} OR quantity < ${PACK_QUANTITY.min}`) {
      found.push({
        organizationId: row.organizationId,
        table: "checkouts",
        id: row.id,
        field: "quantity",
        value: String(row.quantity),
        bound: rangeText(PACK_QUANTITY)
      })
    }

    const order = (f: OutOfRange) => `${f.table}\u0000${f.organizationId}\u0000${f.id}\u0000${f.field}`
    return found.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0))
  }
)

/** One warning per finding (organization, table, row, field, value, bound); start-up goes on. */
export const reportOutOfRange = Effect.gen(function* () {
  const found = yield* findOutOfRange
  for (const f of found) {
    yield* Effect.logWarning("stored value out of range").pipe(
      Effect.annotateLogs({
        organizationId: f.organizationId,
        table: f.table,
        id: f.id,
        field: f.field,
        value: f.value,
        bound: f.bound,
        readAs: "its bound (docs/decisions.md, Numbers)"
      })
    )
  }
  return found
})
