import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NonEmptyString, oneOf, withDefault } from "./common.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

export const UsageRange = oneOf("UsageRange", "7d", "30d", "90d", "custom")
export const UsageGranularity = oneOf("UsageGranularity", "day", "week", "month")
export const UsageGroupBy = oneOf("UsageGroupBy", "total", "feature")

const CalendarDate = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}$/, { message: () => "must be a date YYYY-MM-DD" })
).annotations({ format: "date" })

/** Spec 4.12, decisions.md §9. Calendar checks (custom bounds, from ≤ to, 366 days, timezone) are the service's. */
export const UsageHistoryQuery = Schema.Struct({
  range: withDefault(UsageRange, "30d"),
  granularity: withDefault(UsageGranularity, "day"),
  feature: Schema.optionalWith(NonEmptyString, { exact: true }),
  groupBy: withDefault(UsageGroupBy, "total"),
  timezone: withDefault(NonEmptyString.pipe(Schema.maxLength(64)), "UTC", "IANA time zone, e.g. Africa/Lagos"),
  from: Schema.optionalWith(CalendarDate, { exact: true }),
  to: Schema.optionalWith(CalendarDate, { exact: true })
}).annotations({ parseOptions: { errors: "all" } })
export type UsageHistoryQuery = typeof UsageHistoryQuery.Type

export const UsageTotals = Schema.Struct({
  usage: Schema.Number,
  records: Schema.Number.annotations({ description: "Number of usage events" })
}).annotations({ identifier: "UsageTotals" })

export const UsageBucket = Schema.Struct({
  bucket: Schema.String.annotations({ description: "First day of the bucket, YYYY-MM-DD" }),
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
    feature: Schema.optional(Schema.String).annotations({ description: "Present when filtered by feature" }),
    groupBy: UsageGroupBy,
    timezone: Schema.String
  }),
  totals: UsageTotals,
  series: Schema.Array(UsageBucket),
  breakdown: Schema.Array(UsageBreakdown).annotations({ description: "Per feature; empty unless groupBy=feature" })
}).annotations({ identifier: "UsageHistory" })
export type UsageHistory = typeof UsageHistory.Type

const idParam = HttpApiSchema.param("id", Schema.String)

export class UsageGroup extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("getUsageHistory")`/v1/customers/${idParam}/usage/history`
      .setUrlParams(UsageHistoryQuery)
      .addSuccess(UsageHistory)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Get customer usage history")
  )
  .addError(BadRequestError)
  .middleware(Authentication)
{}
