import { SqlClient, SqlError } from "@effect/sql"
import { Context, Effect, Layer, Schema } from "effect"
import { BILLING_INTERVALS, RESET_INTERVALS } from "../domain/periods.ts"
import { RATING_MODELS } from "../domain/rating.ts"
import {
  decodeRows,
  Flag,
  JsonObjectText,
  JsonText,
  Millis,
  NullableDbInt,
  recordSchema
} from "../platform/db/rowSchemas.ts"
import type { CreditPack, CreditSystem, Feature, Plan, PlanFeature } from "./model.ts"

/** Everything an organization's catalog holds, each kind ordered by slug. */
export interface StoredCatalog {
  readonly features: ReadonlyArray<Feature>
  readonly creditSystems: ReadonlyArray<CreditSystem>
  readonly creditPacks: ReadonlyArray<CreditPack>
  readonly plans: ReadonlyArray<Plan>
}

/** `insert` for an item new to the store, `update` (by id; `createdAt` kept) for one it already holds. */
export type WriteMode = "insert" | "update"

export interface CatalogRepoShape {
  readonly load: (organizationId: string) => Effect.Effect<StoredCatalog>
  /** The organization's `catalog_version`: every sync that changes the catalog bumps it (0 for a new one). */
  readonly version: (organizationId: string) => Effect.Effect<number>
  /** Inside the sync's transaction, after its writes. */
  readonly bumpVersion: (organizationId: string) => Effect.Effect<void>
  readonly writeFeature: (organizationId: string, feature: Feature, mode: WriteMode) => Effect.Effect<void>
  readonly writeCreditSystem: (organizationId: string, system: CreditSystem, mode: WriteMode) => Effect.Effect<void>
  readonly writeCreditPack: (organizationId: string, pack: CreditPack, mode: WriteMode) => Effect.Effect<void>
  readonly writePlan: (organizationId: string, plan: Plan, mode: WriteMode) => Effect.Effect<void>
  /**
   * Runs `effect` in one transaction that no other sync of the same organization interleaves with: PostgreSQL
   * locks the organization's row; SQLite's client runs one transaction at a time anyway. A failure of `effect`
   * rolls everything back.
   */
  readonly transaction: <A, E, R>(organizationId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export class CatalogRepo extends Context.Tag("CatalogRepo")<CatalogRepo, CatalogRepoShape>() {}

// ---- rows as stored (src/platform/db/rowSchemas.ts); numbers inside JSON are read as stored, bounded later ----

const Text = Schema.String
const NullableText = Schema.NullOr(Schema.String)

/** `currency` and `interval` are NOT NULL columns (migration 0002): a plan without one stores ''. */
const emptyAsNull = <A extends string, I extends string>(schema: Schema.Schema<A, I, never>) =>
  Schema.transform(Schema.String, Schema.NullOr(schema), {
    strict: false,
    decode: (text) => (text === "" ? null : text),
    encode: (value) => value ?? ""
  })

const FeatureRow = recordSchema<Feature>()(
  Schema.Struct({
    id: Text,
    slug: Text,
    name: Text,
    type: Schema.Literal("metered", "boolean"),
    meterType: Schema.Literal("consumable", "non_consumable"),
    unit: NullableText,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const CreditSystemRow = recordSchema<CreditSystem>()(
  Schema.Struct({
    id: Text,
    slug: Text,
    name: Text,
    description: NullableText,
    features: JsonText(Schema.Array(Schema.Struct({ feature: Text, creditCost: Schema.Number }))),
    createdAt: Millis,
    updatedAt: Millis
  })
)

const CreditPackRow = recordSchema<CreditPack>()(
  Schema.Struct({
    id: Text,
    slug: Text,
    name: Text,
    description: NullableText,
    /** A decimal TEXT column. */
    credits: Schema.NumberFromString,
    price: Text,
    currency: Text,
    creditSystemId: Text,
    provider: NullableText,
    metadata: JsonObjectText,
    isActive: Flag,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const PlanFeatureJson = recordSchema<PlanFeature>()(
  Schema.Struct({
    slug: Text,
    enabled: Schema.Boolean,
    limit: Schema.NullOr(Schema.Number),
    trialLimit: Schema.NullOr(Schema.Number),
    reset: Schema.Literal(...RESET_INTERVALS),
    usageModel: Schema.Literal("included", "usage_based", "prepaid"),
    ratingModel: Schema.Literal(...RATING_MODELS),
    pricePerUnit: NullableText,
    billingUnits: Schema.Number,
    tiers: Schema.NullOr(
      Schema.Array(Schema.Struct({ upTo: Schema.NullOr(Schema.Number), unitPrice: Text, flatFee: Text }))
    ),
    overage: Schema.Literal("block", "charge"),
    overagePrice: NullableText,
    maxOverageUnits: Schema.NullOr(Schema.Number),
    creditCost: Schema.NullOr(Schema.Number)
  })
)

const PlanRow = recordSchema<Plan>()(
  Schema.Struct({
    id: Text,
    slug: Text,
    name: Text,
    description: NullableText,
    price: Text,
    currency: emptyAsNull(Schema.String),
    interval: emptyAsNull(Schema.Literal(...BILLING_INTERVALS)),
    billingType: Schema.Literal("recurring", "one_time"),
    autoEnable: Flag,
    isAddon: Flag,
    portal: Flag,
    planGroup: NullableText,
    trialDays: NullableDbInt,
    provider: NullableText,
    metadata: JsonObjectText,
    features: JsonText(Schema.Array(PlanFeatureJson)),
    createdAt: Millis,
    updatedAt: Millis
  })
)

const featureRow = (organizationId: string, f: Feature) => ({
  organizationId,
  id: f.id,
  slug: f.slug,
  name: f.name,
  type: f.type,
  meterType: f.meterType,
  unit: f.unit,
  createdAt: f.createdAt,
  updatedAt: f.updatedAt
})

const creditSystemRow = (organizationId: string, s: CreditSystem) => ({
  organizationId,
  id: s.id,
  slug: s.slug,
  name: s.name,
  description: s.description,
  features: JSON.stringify(s.features),
  createdAt: s.createdAt,
  updatedAt: s.updatedAt
})

const creditPackRow = (organizationId: string, p: CreditPack) => ({
  organizationId,
  id: p.id,
  slug: p.slug,
  name: p.name,
  description: p.description,
  credits: String(p.credits),
  price: p.price,
  currency: p.currency,
  creditSystemId: p.creditSystemId,
  provider: p.provider,
  metadata: JSON.stringify(p.metadata),
  isActive: p.isActive ? 1 : 0,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt
})

const planRow = (organizationId: string, p: Plan) => ({
  organizationId,
  id: p.id,
  slug: p.slug,
  name: p.name,
  description: p.description,
  price: p.price,
  currency: p.currency ?? "",
  interval: p.interval ?? "",
  billingType: p.billingType,
  autoEnable: p.autoEnable ? 1 : 0,
  isAddon: p.isAddon ? 1 : 0,
  portal: p.portal ? 1 : 0,
  planGroup: p.planGroup,
  trialDays: p.trialDays,
  provider: p.provider,
  metadata: JSON.stringify(p.metadata),
  features: JSON.stringify(p.features),
  createdAt: p.createdAt,
  updatedAt: p.updatedAt
})

export const CatalogRepoSql = Layer.effect(
  CatalogRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const all = <A extends { readonly slug: string }, I>(table: string, schema: Schema.Schema<A, I, never>) => {
      const decode = decodeRows(table, schema)
      return (organizationId: string) =>
        sql`SELECT * FROM ${sql(table)} WHERE organization_id = ${organizationId}`.pipe(
          Effect.flatMap(decode),
          // Sorted here, not in SQL: PostgreSQL's collation and SQLite's byte order disagree on slugs like "a-b".
          Effect.map((items) => [...items].sort((a, b) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0)))
        )
    }
    const features = all("features", FeatureRow)
    const creditSystems = all("credit_systems", CreditSystemRow)
    const creditPacks = all("credit_packs", CreditPackRow)
    const plans = all("plans", PlanRow)

    const write = (
      table: string,
      row: Record<string, unknown> & { organizationId: string; id: unknown },
      mode: WriteMode
    ) =>
      (mode === "insert"
        ? sql`INSERT INTO ${sql(table)} ${sql.insert(row)}`
        : sql`UPDATE ${sql(table)} SET ${sql.update(row, ["organizationId", "id", "slug", "createdAt"])}
            WHERE organization_id = ${row.organizationId} AND id = ${row.id as string}`
      ).pipe(Effect.asVoid, Effect.orDie)

    return {
      load: (organizationId) =>
        Effect.all(
          {
            features: features(organizationId),
            creditSystems: creditSystems(organizationId),
            creditPacks: creditPacks(organizationId),
            plans: plans(organizationId)
          },
          { concurrency: 1 }
        ).pipe(Effect.orDie),
      version: (organizationId) =>
        sql<{ catalogVersion: number }>`SELECT catalog_version FROM organizations WHERE id = ${organizationId}`.pipe(
          Effect.map((rows) => Number(rows[0]?.catalogVersion ?? 0)),
          Effect.orDie
        ),
      bumpVersion: (organizationId) =>
        sql`UPDATE organizations SET catalog_version = catalog_version + 1 WHERE id = ${organizationId}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      writeFeature: (organizationId, feature, mode) => write("features", featureRow(organizationId, feature), mode),
      writeCreditSystem: (organizationId, system, mode) =>
        write("credit_systems", creditSystemRow(organizationId, system), mode),
      writeCreditPack: (organizationId, pack, mode) => write("credit_packs", creditPackRow(organizationId, pack), mode),
      writePlan: (organizationId, plan, mode) => write("plans", planRow(organizationId, plan), mode),
      transaction: <A, E, R>(organizationId: string, effect: Effect.Effect<A, E, R>) =>
        sql
          .withTransaction(
            Effect.zipRight(
              sql.onDialectOrElse({
                pg: () => sql`SELECT id FROM organizations WHERE id = ${organizationId} FOR UPDATE`.pipe(Effect.asVoid),
                orElse: () => Effect.void
              }),
              effect
            )
          )
          .pipe(
            // Infrastructure failures (begin, commit, the lock) are defects, as everywhere else.
            Effect.catchAll((e) => (e instanceof SqlError.SqlError ? Effect.die(e) : Effect.fail(e as E)))
          )
    }
  })
)
