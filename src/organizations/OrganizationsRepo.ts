import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import type { Organization } from "../api/security.ts"
import { keyRevocationsOf, REVOCATION_POLL_MS } from "./keyRevocations.ts"
import { AppConfig } from "../platform/config.ts"
import { listen } from "../platform/db/listen.ts"
import { PgPool } from "../platform/db/PgPool.ts"
import { decodeFirstRow, decodeRows, Millis, NullableMillis, recordSchema } from "../platform/db/rowSchemas.ts"

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

const OrganizationRow = recordSchema<OrganizationRecord>()(
  Schema.Struct({
    id: Schema.String,
    slug: Schema.String,
    name: Schema.String,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const ApiKeyRow = recordSchema<ApiKeyRecord>()(
  Schema.Struct({
    id: Schema.String,
    organizationId: Schema.String,
    displayPrefix: Schema.String,
    environment: Schema.String,
    createdAt: Millis,
    revokedAt: NullableMillis
  })
)

const organizations = decodeRows("organizations", OrganizationRow)
const organization = decodeFirstRow("organizations", OrganizationRow)
const apiKeys = decodeRows("api_keys", ApiKeyRow)
const apiKey = decodeFirstRow("api_keys", ApiKeyRow)

/**
 * How long this process trusts a key it has looked up (docs/decisions.md, "Performance"). A revocation through this
 * process empties the cache at once; on PostgreSQL every revocation is also announced (NOTIFY) to every process, so
 * elsewhere it takes effect within milliseconds; this bound is for SQLite's other processes (the CLI) and for a lost
 * notification.
 */
export const KEY_CACHE_MS = 5_000
const KEY_CACHE_MAX = 10_000
const KEY_CHANNEL = "billing_api_key_revoked"

type KeyLookup = { readonly organization: Organization; readonly environment: string }

export const OrganizationsRepoSql = Layer.scoped(
  OrganizationsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)

    // Found keys only (an unknown key is looked up every time). A lookup that raced a revocation is not cached.
    const keys = new Map<string, { readonly found: KeyLookup; readonly until: number }>()
    let generation = 0
    const forgetKeys = () => {
      keys.clear()
      generation++
    }
    // Revocations by other processes (another instance, the CLI). While a session is down the cache still expires
    // every KEY_CACHE_MS.
    const pool = yield* Effect.serviceOption(PgPool)
    const revocations = keyRevocationsOf(
      yield* AppConfig,
      Option.exists(pool, (p) => p.pooled)
    )
    if (revocations._tag === "Listen") yield* Effect.forkScoped(listen(revocations.url, KEY_CHANNEL, forgetKeys))
    if (revocations._tag === "Poll") {
      // A global read, like the lookup by hash: a revocation in any organization changes it. Keys are few (a handful
      // per organization): a scan of them a second is cheaper than an index every key insert would maintain.
      let seen: string | undefined
      const poll = sql<{ n: number; latest: number | null }>`
          SELECT COUNT(*) AS n, MAX(revoked_at) AS latest FROM api_keys WHERE revoked_at IS NOT NULL`.pipe(
        Effect.map((rows) => `${rows[0]?.n}/${rows[0]?.latest}`),
        Effect.tap((now) =>
          Effect.sync(() => {
            if (seen !== undefined && now !== seen) forgetKeys()
            seen = now
          })
        ),
        Effect.catchAllCause(() => Effect.sync(forgetKeys))
      )
      yield* poll.pipe(Effect.repeat(Schedule.spaced(Duration.millis(REVOCATION_POLL_MS))), Effect.forkScoped)
    }

    const lookupKey = (keyHash: string) =>
      sql<{ id: string; slug: string; name: string; environment: string }>`
          SELECT o.id, o.slug, o.name, k.environment
          FROM api_keys k JOIN organizations o ON o.id = k.organization_id
          WHERE k.key_hash = ${keyHash} AND k.revoked_at IS NULL`.pipe(
        Effect.map((rows) =>
          Option.fromNullable(rows[0]).pipe(
            Option.map((row): KeyLookup => ({
              organization: { id: row.id, slug: row.slug, name: row.name },
              environment: row.environment
            }))
          )
        ),
        Effect.orDie
      )

    return {
      insert: (org) =>
        sql<{
          id: string
        }>`INSERT INTO organizations ${sql.insert({ ...org })} ON CONFLICT DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      list: sql`SELECT * FROM organizations ORDER BY created_at, id`.pipe(Effect.flatMap(organizations), Effect.orDie),
      count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM organizations`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.orDie
      ),
      findByIdOrSlug: (ref) =>
        sql`SELECT * FROM organizations WHERE id = ${ref} OR slug = ${ref}`.pipe(
          Effect.flatMap(organization),
          Effect.orDie
        ),
      insertKey: (key) => sql`INSERT INTO api_keys ${sql.insert({ ...key })}`.pipe(Effect.asVoid, Effect.orDie),
      findKey: (keyId) => sql`SELECT * FROM api_keys WHERE id = ${keyId}`.pipe(Effect.flatMap(apiKey), Effect.orDie),
      listKeys: (organizationId) =>
        sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ORDER BY created_at, id`.pipe(
          Effect.flatMap(apiKeys),
          Effect.orDie
        ),
      revokeKey: (organizationId, keyId, at) =>
        sql<{ id: string }>`UPDATE api_keys SET revoked_at = ${at}
          WHERE organization_id = ${organizationId} AND id = ${keyId} AND revoked_at IS NULL
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.tap(() => Effect.sync(forgetKeys)),
          Effect.tap((revoked) =>
            // pg_notify: PgClient.notify sends `NOTIFY channel, $1`, which PostgreSQL does not accept.
            revoked && Option.isSome(pg)
              ? sql`SELECT pg_notify(${KEY_CHANNEL}, ${keyId})`.pipe(Effect.ignore)
              : Effect.void
          ),
          Effect.orDie
        ),
      findByKeyHash: (keyHash) =>
        Effect.suspend(() => {
          const hit = keys.get(keyHash)
          const now = performance.now()
          if (hit !== undefined && hit.until > now) return Effect.succeed(Option.some(hit.found))
          const started = generation
          return Effect.tap(lookupKey(keyHash), (found) =>
            Effect.sync(() => {
              keys.delete(keyHash)
              if (Option.isNone(found) || generation !== started) return
              if (keys.size >= KEY_CACHE_MAX) keys.delete(keys.keys().next().value!)
              keys.set(keyHash, { found: found.value, until: now + KEY_CACHE_MS })
            })
          )
        })
    }
  })
)
