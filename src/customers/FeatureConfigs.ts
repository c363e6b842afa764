import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import type { FeatureConfig as WireFeatureConfig, SetFeatureConfig } from "../api/customers.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { type Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { COUNT_MAX, COUNT_MAX_MICRO, storedCapMicro } from "../domain/bounds.ts"
import { microParam, microToNumber, toMicro } from "../domain/quantity.ts"
import { decodeRows, Millis, recordSchema } from "../platform/db/rowSchemas.ts"
import { Customers } from "./Customers.ts"
import type { CustomerRecord } from "./CustomersRepo.ts"

/** A customer's per-feature override of the plan's overage terms, as stored (max in micro-units). */
type FeatureConfig = typeof WireFeatureConfig.Type

export interface FeatureConfigRecord {
  readonly featureId: string
  readonly featureSlug: string
  readonly featureName: string
  readonly overage: "block" | "charge"
  readonly maxOverageUnits: bigint | null
  readonly createdAt: number
  readonly updatedAt: number
}

export interface FeatureConfigsRepoShape {
  /** Every config of the customer, with its feature's slug and name, oldest first. */
  readonly list: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<FeatureConfigRecord>>
  /** Inserts, or updates overage, cap and `updatedAt` (the first `createdAt` is kept). */
  readonly upsert: (
    org: string,
    customerId: string,
    featureId: string,
    config: { readonly overage: "block" | "charge"; readonly maxOverageUnits: bigint | null },
    now: number
  ) => Effect.Effect<void>
}

export class FeatureConfigsRepo extends Context.Tag("FeatureConfigsRepo")<
  FeatureConfigsRepo,
  FeatureConfigsRepoShape
>() {}

/**
 * A BIGINT of micro-units read as at most its bound: a cap stored before the bounds, or a REAL that SQLite kept for
 * a number too big for its integers, is read as the bound (docs/decisions.md "Numbers").
 */
const StoredCap = Schema.transform(Schema.Union(Schema.Number, Schema.BigIntFromSelf), Schema.BigIntFromSelf, {
  strict: true,
  decode: (value) => storedCapMicro(value, COUNT_MAX_MICRO),
  encode: (micro) => micro
})

/** A config joined with its feature's slug and name. */
const FeatureConfigRow = recordSchema<FeatureConfigRecord>()(
  Schema.Struct({
    featureId: Schema.String,
    featureSlug: Schema.String,
    featureName: Schema.String,
    overage: Schema.Literal("block", "charge"),
    maxOverageUnits: Schema.NullOr(StoredCap),
    createdAt: Millis,
    updatedAt: Millis
  })
)

const configs = decodeRows("customer_feature_configs", FeatureConfigRow)

export const FeatureConfigsRepoSql = Layer.effect(
  FeatureConfigsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      list: (org, customerId) =>
        sql`SELECT c.feature_id, f.slug AS feature_slug, f.name AS feature_name, c.overage, c.max_overage_units,
              c.created_at, c.updated_at
            FROM customer_feature_configs c
            JOIN features f ON f.organization_id = c.organization_id AND f.id = c.feature_id
            WHERE c.organization_id = ${org} AND c.customer_id = ${customerId}
            ORDER BY c.created_at, f.slug`.pipe(Effect.flatMap(configs), Effect.orDie),
      upsert: (org, customerId, featureId, config, now) => {
        const max = config.maxOverageUnits === null ? null : microParam(config.maxOverageUnits)
        return sql`INSERT INTO customer_feature_configs
              (organization_id, customer_id, feature_id, overage, max_overage_units, created_at, updated_at)
            VALUES (${org}, ${customerId}, ${featureId}, ${config.overage}, ${max}, ${now}, ${now})
            ON CONFLICT (organization_id, customer_id, feature_id) DO UPDATE SET
              overage = excluded.overage, max_overage_units = excluded.max_overage_units,
              updated_at = excluded.updated_at`.pipe(Effect.asVoid, Effect.orDie)
      }
    }
  })
)

export const toWireFeatureConfig = (c: FeatureConfigRecord): FeatureConfig => ({
  feature: { id: c.featureId, slug: c.featureSlug, name: c.featureName },
  overage: c.overage,
  maxOverageUnits: c.maxOverageUnits === null ? null : microToNumber(c.maxOverageUnits),
  createdAt: c.createdAt,
  updatedAt: c.updatedAt
})

export interface FeatureConfigsShape {
  /** What `billing.featureConfigs` of the full customer object lists. */
  readonly list: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<FeatureConfig>>
  /** `POST /v1/customers/feature-config`: upserts the override; answers the customer it belongs to. */
  readonly set: (
    org: string,
    input: SetFeatureConfig
  ) => Effect.Effect<CustomerRecord, NotFound | Conflict | InvalidInput>
}

export class FeatureConfigs extends Context.Tag("FeatureConfigs")<FeatureConfigs, FeatureConfigsShape>() {}

const MAX_MESSAGE = `must be an integer from 0 to ${COUNT_MAX}`

export const FeatureConfigsLive = Layer.effect(
  FeatureConfigs,
  Effect.gen(function* () {
    const repo = yield* FeatureConfigsRepo
    const customers = yield* Customers
    const catalog = yield* Catalog

    const set = (org: string, input: SetFeatureConfig) =>
      Effect.gen(function* () {
        const max = input.maxOverageUnits ?? null
        // The schema refuses these already (src/api/numbers.ts); kept for callers that do not decode one.
        if (max !== null && !(Number.isInteger(max) && max >= 0 && max <= COUNT_MAX)) {
          return yield* new InvalidInput({
            message: `The request is invalid: maxOverageUnits: ${MAX_MESSAGE}`,
            issues: [{ path: "maxOverageUnits", message: MAX_MESSAGE }]
          })
        }
        const customer = yield* customers.resolve(org, input.customer)
        const snapshot = yield* catalog.snapshot(org)
        const feature = snapshot.features.get(input.feature) ?? snapshot.featuresById.get(input.feature)
        if (feature === undefined) {
          return yield* new NotFound({ code: "feature_not_found", message: `No feature '${input.feature}'` })
        }
        if (feature.type === "boolean") {
          const message = `'${feature.slug}' is a boolean feature: it has no usage to charge as overage`
          return yield* new InvalidInput({ message, issues: [{ path: "feature", message }] })
        }
        const next = { overage: input.overage, maxOverageUnits: max === null ? null : toMicro(max) }
        const current = (yield* repo.list(org, customer.id)).find((c) => c.featureId === feature.id)
        // A request that changes nothing leaves updatedAt alone (as customers do).
        const unchanged =
          current !== undefined && current.overage === next.overage && current.maxOverageUnits === next.maxOverageUnits
        if (!unchanged) yield* repo.upsert(org, customer.id, feature.id, next, yield* Clock.currentTimeMillis)
        return customer
      })

    return {
      list: (org, customerId) => Effect.map(repo.list(org, customerId), (rows) => rows.map(toWireFeatureConfig)),
      set
    }
  })
)
