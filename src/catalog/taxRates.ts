import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Schema } from "effect"
import type { SyncChanges } from "../api/catalog.ts"
import type { Issue } from "../api/errors.ts"
import type { SyncTaxRate, TaxRate } from "../api/taxes.ts"
import { format, unsafeDecimal } from "../domain/money.ts"
import type { TaxRateTerms } from "../domain/taxes.ts"
import { decodeRows, Flag, Millis, recordSchema } from "../platform/db/rowSchemas.ts"
import { Ids } from "../platform/ids.ts"

/** A catalog tax rate as stored (decisions.md §16): `percentage` a decimal string. */
export interface TaxRateRecord {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly percentage: string
  readonly inclusive: boolean
  readonly country: string
  readonly state: string | null
  readonly createdAt: number
  readonly updatedAt: number
}

type Content = Omit<TaxRateRecord, "id" | "createdAt" | "updatedAt">

const contentOf = (r: SyncTaxRate): Content => ({
  slug: r.slug,
  name: r.name,
  percentage: format(unsafeDecimal(r.percentage)),
  inclusive: r.inclusive ?? false,
  country: r.country,
  state: r.state ?? null
})

const sameContent = (a: Content, b: Content) =>
  a.name === b.name &&
  a.percentage === b.percentage &&
  a.inclusive === b.inclusive &&
  a.country === b.country &&
  a.state === b.state

/** Problems of the sync's tax rates that the item schema cannot see: a slug given twice. */
export const validateTaxRates = (rates: ReadonlyArray<SyncTaxRate>): ReadonlyArray<Issue> => {
  const seen = new Set<string>()
  const problems: Array<Issue> = []
  rates.forEach((r, i) => {
    if (seen.has(r.slug)) problems.push({ path: `taxRates[${i}].slug`, message: `duplicate tax rate '${r.slug}'` })
    seen.add(r.slug)
  })
  return problems
}

export const toTerms = (r: TaxRateRecord): TaxRateTerms => ({
  slug: r.slug,
  name: r.name,
  percentage: unsafeDecimal(r.percentage),
  inclusive: r.inclusive,
  country: r.country,
  state: r.state
})

export const toWireTaxRate = (r: TaxRateRecord): TaxRate => ({
  id: r.id,
  slug: r.slug,
  name: r.name,
  percentage: Number(r.percentage),
  inclusive: r.inclusive,
  country: r.country,
  ...(r.state === null ? {} : { state: r.state }),
  createdAt: r.createdAt,
  updatedAt: r.updatedAt
})

export interface TaxRatesShape {
  readonly list: (org: string) => Effect.Effect<ReadonlyArray<TaxRateRecord>>
  /**
   * Upserts the sync's tax rates by slug, inside the sync's transaction (never deleting one); rates stored but
   * absent from the sync are kept and warned about, as every catalog item is (decisions.md §3).
   */
  readonly reconcile: (
    org: string,
    rates: ReadonlyArray<SyncTaxRate>,
    now: number
  ) => Effect.Effect<{ readonly changes: typeof SyncChanges.Type; readonly warnings: ReadonlyArray<string> }>
}

export class TaxRates extends Context.Tag("TaxRates")<TaxRates, TaxRatesShape>() {}

const TaxRateRow = recordSchema<TaxRateRecord>()(
  Schema.Struct({
    id: Schema.String,
    slug: Schema.String,
    name: Schema.String,
    percentage: Schema.String,
    inclusive: Flag,
    country: Schema.String,
    state: Schema.NullOr(Schema.String),
    createdAt: Millis,
    updatedAt: Millis
  })
)
const taxRateRows = decodeRows("tax_rates", TaxRateRow)

export const TaxRatesLive = Layer.effect(
  TaxRates,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids

    const list = (org: string) =>
      sql`SELECT id, slug, name, percentage, inclusive, country, state, created_at, updated_at FROM tax_rates
          WHERE organization_id = ${org} ORDER BY slug`.pipe(Effect.flatMap(taxRateRows), Effect.orDie)

    const reconcile: TaxRatesShape["reconcile"] = (org, rates, now) =>
      Effect.gen(function* () {
        const stored = new Map((yield* list(org)).map((r) => [r.slug, r]))
        const changes = { created: [] as Array<string>, updated: [] as Array<string>, unchanged: [] as Array<string> }
        for (const rate of rates) {
          const content = contentOf(rate)
          const current = stored.get(rate.slug)
          if (current === undefined) {
            yield* sql`INSERT INTO tax_rates ${sql.insert({
              organizationId: org,
              id: yield* ids.next("txr"),
              ...content,
              inclusive: content.inclusive ? 1 : 0,
              createdAt: now,
              updatedAt: now
            })}`
            changes.created.push(rate.slug)
          } else if (sameContent(current, content)) {
            changes.unchanged.push(rate.slug)
          } else {
            yield* sql`UPDATE tax_rates SET name = ${content.name}, percentage = ${content.percentage},
                inclusive = ${content.inclusive ? 1 : 0}, country = ${content.country}, state = ${content.state},
                updated_at = ${now}
              WHERE organization_id = ${org} AND id = ${current.id}`
            changes.updated.push(rate.slug)
          }
        }
        const given = new Set(rates.map((r) => r.slug))
        const warnings = [...stored.keys()]
          .filter((slug) => !given.has(slug))
          .map((slug) => `tax rate '${slug}' exists in the store but not in this sync; it was kept`)
        return { changes, warnings }
      }).pipe(Effect.orDie)

    return { list, reconcile }
  })
)
