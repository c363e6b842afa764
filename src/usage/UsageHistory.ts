import { Clock, Context, Effect, Layer } from "effect"
import type { UsageHistory as WireUsageHistory, UsageHistoryQuery } from "../api/usage.ts"
import { Catalog } from "../catalog/Catalog.ts"
import type { Feature } from "../catalog/model.ts"
import { Customers } from "../customers/Customers.ts"
import { type Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { microToNumber } from "../domain/quantity.ts"
import { type Bucket, planBuckets } from "./buckets.ts"
import { type BucketSum, UsageRepo } from "./UsageRepo.ts"

export interface UsageHistoryShape {
  /** Spec 4.12 / decisions.md §9: the customer's usage in calendar buckets of the requested zone, from the rollups. */
  readonly history: (
    organizationId: string,
    customerRef: string,
    query: UsageHistoryQuery
  ) => Effect.Effect<WireUsageHistory, InvalidInput | NotFound | Conflict>
}

export class UsageHistory extends Context.Tag("UsageHistory")<UsageHistory, UsageHistoryShape>() {}

/** One feature's (or the total's) sums per bucket, in micro-units. */
interface Accumulator {
  readonly values: Array<bigint>
  records: number
}

const emptyAccumulator = (buckets: number): Accumulator => ({ values: new Array<bigint>(buckets).fill(0n), records: 0 })

const add = (acc: Accumulator, sum: BucketSum) => {
  acc.values[sum.bucket] = acc.values[sum.bucket]! + sum.value
  acc.records += sum.records
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * Micro-units to a wire number. Below 2^53 the division of two exact doubles is correctly rounded, so it is the
 * same number as `microToNumber` (the nearest double to the decimal), without building a decimal per bucket.
 */
const toWire = (micro: bigint): number =>
  micro <= SAFE && micro >= -SAFE ? Number(micro) / 1_000_000 : microToNumber(micro)

/** The wire totals and series: `usage` is the exact sum of the series (micro-units summed before converting). */
const render = (acc: Accumulator, buckets: ReadonlyArray<Bucket>) => ({
  totals: { usage: toWire(acc.values.reduce((a, b) => a + b, 0n)), records: acc.records },
  series: buckets.map((b, i) => ({ bucket: b.label, value: toWire(acc.values[i]!) }))
})

export const UsageHistoryLive = Layer.effect(
  UsageHistory,
  Effect.gen(function* () {
    const repo = yield* UsageRepo
    const customers = yield* Customers
    const catalog = yield* Catalog

    const history = (organizationId: string, customerRef: string, query: UsageHistoryQuery) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const granularity = query.granularity ?? "day"
        const groupBy = query.groupBy ?? "total"
        // `from`/`to` without a range read as a custom range (a preset with them is a 400, not silently ignored).
        const range = query.range ?? (query.from !== undefined || query.to !== undefined ? "custom" : "30d")
        const planned = planBuckets({
          range,
          granularity,
          timezone: query.timezone ?? "UTC",
          from: query.from,
          to: query.to,
          now
        })
        if (planned._tag === "Invalid") {
          const summary = planned.issues.map((i) => `${i.path}: ${i.message}`).join("; ")
          return yield* new InvalidInput({ message: `The request is invalid: ${summary}`, issues: planned.issues })
        }
        const plan = planned.plan

        const customer = yield* customers.resolve(organizationId, customerRef)
        const snapshot = yield* catalog.snapshot(organizationId)
        let filtered: Feature | undefined
        if (query.feature !== undefined) {
          filtered = snapshot.features.get(query.feature) ?? snapshot.featuresById.get(query.feature)
          if (filtered === undefined) {
            return yield* new NotFound({ code: "feature_not_found", message: `No feature '${query.feature}'` })
          }
        }
        const featureIds = filtered !== undefined ? [filtered.id] : [...snapshot.featuresById.keys()]
        const sums = yield* repo.sumByBucket(organizationId, customer.id, featureIds, plan.buckets)

        const buckets = plan.buckets
        const total = emptyAccumulator(buckets.length)
        const byFeature = new Map<string, Accumulator>()
        for (const sum of sums) {
          if (sum.bucket < 0 || sum.bucket >= buckets.length) continue // not reachable: the repository scopes the range
          add(total, sum)
          if (groupBy === "feature") {
            let acc = byFeature.get(sum.featureId)
            if (acc === undefined) {
              acc = emptyAccumulator(buckets.length)
              byFeature.set(sum.featureId, acc)
            }
            add(acc, sum)
          }
        }

        // Breakdown: every feature with events in the range, or the filtered one even without; by slug.
        const breakdown =
          groupBy === "total"
            ? []
            : (filtered !== undefined
                ? [filtered]
                : [...byFeature.keys()].flatMap((id) => {
                    const f = snapshot.featuresById.get(id)
                    return f === undefined ? [] : [f]
                  })
              )
                .sort((a, b) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0))
                .map((f) => ({
                  feature: { id: f.id, slug: f.slug, name: f.name, unit: f.unit ?? "" },
                  ...render(byFeature.get(f.id) ?? emptyAccumulator(buckets.length), buckets)
                }))

        const result: WireUsageHistory = {
          customer: { id: customer.id },
          query: {
            range: { from: plan.from, to: plan.to },
            granularity,
            ...(filtered === undefined ? {} : { feature: filtered.slug }),
            groupBy,
            timezone: plan.timezone
          },
          ...render(total, buckets),
          breakdown
        }
        return result
      })

    return { history }
  })
)
