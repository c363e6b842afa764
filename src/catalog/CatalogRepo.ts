import { SqlClient, SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import type { CreditPack, CreditSystem, Feature, Plan } from "./model.ts"

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

const bool = (value: unknown): boolean => Number(value) === 1
const orNull = (value: unknown): string | null => (value === null || value === undefined || value === "" ? null : String(value))

const toFeature = (row: any): Feature => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  type: row.type,
  meterType: row.meterType,
  unit: row.unit ?? null,
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

const toCreditSystem = (row: any): CreditSystem => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description ?? null,
  features: JSON.parse(row.features),
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

const toCreditPack = (row: any): CreditPack => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description ?? null,
  credits: Number(row.credits),
  price: String(row.price),
  currency: row.currency,
  creditSystemId: row.creditSystemId,
  provider: row.provider ?? null,
  metadata: JSON.parse(row.metadata),
  isActive: bool(row.isActive),
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

/** `currency` and `interval` are NOT NULL columns (migration 0002): a plan without one stores ''. */
const toPlan = (row: any): Plan => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description ?? null,
  price: String(row.price),
  currency: orNull(row.currency),
  interval: orNull(row.interval) as Plan["interval"],
  billingType: row.billingType,
  autoEnable: bool(row.autoEnable),
  isAddon: bool(row.isAddon),
  planGroup: row.planGroup ?? null,
  trialDays: row.trialDays === null || row.trialDays === undefined ? null : Number(row.trialDays),
  provider: row.provider ?? null,
  metadata: JSON.parse(row.metadata),
  features: JSON.parse(row.features),
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

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
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const all = <A>(table: string, organizationId: string, decode: (row: any) => A) =>
      sql`SELECT * FROM ${sql(table)} WHERE organization_id = ${organizationId}`.pipe(
        // Sorted here, not in SQL: PostgreSQL's collation and SQLite's byte order disagree on slugs like "a-b".
        Effect.map((rows) => rows.map(decode).sort((a: any, b: any) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0)))
      )

    const write = (table: string, row: Record<string, unknown> & { organizationId: string; id: unknown }, mode: WriteMode) =>
      (mode === "insert"
        ? sql`INSERT INTO ${sql(table)} ${sql.insert(row)}`
        : sql`UPDATE ${sql(table)} SET ${sql.update(row, ["organizationId", "id", "slug", "createdAt"])}
            WHERE organization_id = ${row.organizationId} AND id = ${row.id as string}`).pipe(Effect.asVoid, Effect.orDie)

    return {
      load: (organizationId) =>
        Effect.all({
          features: all("features", organizationId, toFeature),
          creditSystems: all("credit_systems", organizationId, toCreditSystem),
          creditPacks: all("credit_packs", organizationId, toCreditPack),
          plans: all("plans", organizationId, toPlan)
        }, { concurrency: 1 }).pipe(Effect.orDie),
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
        sql.withTransaction(
          Effect.zipRight(
            sql.onDialectOrElse({
              pg: () => sql`SELECT id FROM organizations WHERE id = ${organizationId} FOR UPDATE`.pipe(Effect.asVoid),
              orElse: () => Effect.void
            }),
            effect
          )
        ).pipe(
          // Infrastructure failures (begin, commit, the lock) are defects, as everywhere else.
          Effect.catchAll((e) => e instanceof SqlError.SqlError ? Effect.die(e) : Effect.fail(e as E))
        )
    }
  })
)
