import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import type { Organization } from "../api/security.ts"

export interface ApiKeyRecord {
  readonly id: string
  readonly organizationId: string
  readonly displayPrefix: string
  readonly environment: string
  readonly createdAt: number
  readonly revokedAt: number | null
}

export interface OrganizationRecord extends Organization {
  readonly createdAt: number
  readonly updatedAt: number
}

/**
 * Organizations and their API keys. Keys are stored only as SHA-256 hashes; the lookup by hash is
 * the one query not scoped by organization, because it is how the organization is learnt.
 */
export interface OrganizationsRepoShape {
  readonly insert: (org: OrganizationRecord) => Effect.Effect<boolean>
  readonly list: Effect.Effect<ReadonlyArray<OrganizationRecord>>
  readonly count: Effect.Effect<number>
  readonly findByIdOrSlug: (ref: string) => Effect.Effect<Option.Option<OrganizationRecord>>
  readonly insertKey: (key: ApiKeyRecord & { readonly keyHash: string }) => Effect.Effect<void>
  readonly findKey: (keyId: string) => Effect.Effect<Option.Option<ApiKeyRecord>>
  readonly listKeys: (organizationId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>>
  readonly revokeKey: (organizationId: string, keyId: string, at: number) => Effect.Effect<boolean>
  readonly findByKeyHash: (
    keyHash: string
  ) => Effect.Effect<Option.Option<{ readonly organization: Organization; readonly environment: string }>>
}

export class OrganizationsRepo extends Context.Tag("OrganizationsRepo")<OrganizationsRepo, OrganizationsRepoShape>() {}

const toOrganization = (row: any): OrganizationRecord => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

const toKey = (row: any): ApiKeyRecord => ({
  id: row.id,
  organizationId: row.organizationId,
  displayPrefix: row.displayPrefix,
  environment: row.environment,
  createdAt: Number(row.createdAt),
  revokedAt: row.revokedAt === null ? null : Number(row.revokedAt)
})

export const OrganizationsRepoSql = Layer.effect(
  OrganizationsRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    return {
      insert: (org) =>
        sql<{ id: string }>`INSERT INTO organizations ${sql.insert({ ...org })} ON CONFLICT DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      list: sql`SELECT * FROM organizations ORDER BY created_at, id`.pipe(
        Effect.map((rows) => rows.map(toOrganization)),
        Effect.orDie
      ),
      count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM organizations`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.orDie
      ),
      findByIdOrSlug: (ref) =>
        sql`SELECT * FROM organizations WHERE id = ${ref} OR slug = ${ref}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toOrganization))),
          Effect.orDie
        ),
      insertKey: (key) => sql`INSERT INTO api_keys ${sql.insert({ ...key })}`.pipe(Effect.asVoid, Effect.orDie),
      findKey: (keyId) =>
        sql`SELECT * FROM api_keys WHERE id = ${keyId}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toKey))),
          Effect.orDie
        ),
      listKeys: (organizationId) =>
        sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ORDER BY created_at, id`.pipe(
          Effect.map((rows) => rows.map(toKey)),
          Effect.orDie
        ),
      revokeKey: (organizationId, keyId, at) =>
        sql<{ id: string }>`UPDATE api_keys SET revoked_at = ${at}
          WHERE organization_id = ${organizationId} AND id = ${keyId} AND revoked_at IS NULL
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      findByKeyHash: (keyHash) =>
        sql<{ id: string; slug: string; name: string; environment: string }>`
          SELECT o.id, o.slug, o.name, k.environment
          FROM api_keys k JOIN organizations o ON o.id = k.organization_id
          WHERE k.key_hash = ${keyHash} AND k.revoked_at IS NULL`.pipe(
          Effect.map((rows) =>
            Option.fromNullable(rows[0]).pipe(
              Option.map((row) => ({
                organization: { id: row.id, slug: row.slug, name: row.name },
                environment: row.environment
              }))
            )
          ),
          Effect.orDie
        )
    }
  })
)
