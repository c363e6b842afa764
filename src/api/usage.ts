import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NonEmptyString, oneOf, optionalWithServerDefault } from "./common.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

export const UsageRange = oneOf("UsageRange", "7d", "30d", "90d", "custom")
export const UsageGranularity = oneOf("UsageGranularity", "day", "week", "month")
export const UsageGroupBy = oneOf("UsageGroupBy", "total", "feature")

const CalendarDate = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}$/, { message: () => "must be a date YYYY-MM-DD" })
).annotations({ format: "date" })

/**
 * Spec 4.12, decisions.md §9. Defaults are applied by the service (documented here), so the typed client need not
 * send them. Calendar checks (custom bounds, from ≤ to, 366 days, the time zone) are the service's: every problem is
 * a 400 `invalid_request` with `details`.
 */
export const UsageHistoryQuery = Schema.Struct({
  range: optionalWithServerDefault(
    UsageRange,
    "30d",
    "The last 7/30/90 calendar days in `timezone`, today included, or `custom` (`from` and `to`). Omitted with " +
      "`from`/`to` given: custom."
  ),
  granularity: optionalWithServerDefault(UsageGranularity, "day", "Buckets: days, weeks starting Monday, or months"),
  feature: Schema.optionalWith(NonEmptyString, { exact: true }).annotations({
    description: "Only this feature (slug or id)"
  }),
  groupBy: optionalWithServerDefault(UsageGroupBy, "total", "`feature` fills `breakdown` with one entry per feature"),
  timezone: optionalWithServerDefault(
    NonEmptyString.pipe(Schema.maxLength(64)),
    "UTC",
    "IANA time zone of the buckets' day boundaries, e.g. Africa/Lagos"
  ),
  from: Schema.optionalWith(CalendarDate, { exact: true }).annotations({
    description: "First day of a custom range, inclusive"
  }),
  to: Schema.optionalWith(CalendarDate, { exact: true }).annotations({
    description: "Last day of a custom range, inclusive (at most 366 days after from, counting both)"
  })
}).annotations({ parseOptions: { errors: "all" } })
export type UsageHistoryQuery = typeof UsageHistoryQuery.Type

export const UsageTotals = Schema.Struct({
  usage: Schema.Number.annotations({ description: "Sum of the series" }),
  records: Schema.Number.annotations({ description: "Number of usage events" })
}).annotations({ identifier: "UsageTotals" })

export const UsageBucket = Schema.Struct({
  bucket: Schema.String.annotations({
    description: "First day of the bucket within the range, YYYY-MM-DD (the first week or month may start at `from`)"
  }),
  value: Schema.Number
}).annotations({ identifier: "UsageBucket" })

export const UsageBreakdown = Schema.Struct({
  feature: Schema.Struct({
    id: Schema.String,
    slug: Schema.String,
    name: Schema.String,
    unit: Schema.String.annotations({ description: "Empty when the feature has no unit" })
  }),
  totals: UsageTotals,
  series: Schema.Array(UsageBucket)
}).annotations({ identifier: "UsageBreakdown" })

export const UsageHistory = Schema.Struct({
  customer: Schema.Struct({ id: Schema.String }),
  query: Schema.Struct({
    range: Schema.Struct({ from: Schema.String, to: Schema.String }).annotations({
      description: "The resolved inclusive dates, YYYY-MM-DD"
    }),
    granularity: UsageGranularity,
    feature: Schema.optionalWith(Schema.String, { exact: true }).annotations({
      description: "The filtered feature's slug; absent when not filtered"
    }),
    groupBy: UsageGroupBy,
    timezone: Schema.String.annotations({ description: "The zone's canonical name" })
  }),
  totals: UsageTotals,
  series: Schema.Array(UsageBucket),
  breakdown: Schema.Array(UsageBreakdown).annotations({ description: "Per feature; empty unless groupBy=feature" })
}).annotations({ identifier: "UsageHistory" })
export type UsageHistory = typeof UsageHistory.Type

const idParam = HttpApiSchema.param("id", Schema.String)

export class UsageGroup extends HttpApiGroup.make("usage")
  .annotate(OpenApi.Description, "Usage history over time")
  .add(
    HttpApiEndpoint.get("getUsageHistory")`/v1/customers/${idParam}/usage/history`
      .setUrlParams(UsageHistoryQuery)
      .addSuccess(UsageHistory)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Get customer usage history")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
