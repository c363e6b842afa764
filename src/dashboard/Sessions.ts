import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Organization } from "../api/security.ts"
import { Authenticator } from "../organizations/Authenticator.ts"
import { Organizations, type OrganizationError } from "../organizations/Organizations.ts"
import { randomToken, sha256Hex } from "../platform/crypto.ts"
import { Ids, makeMonotonicIds } from "../platform/ids.ts"
import { Unauthorized } from "../api/errors.ts"
import { splitToken } from "../web/pages.ts"
import { endSession, recordAudit } from "../web/sessionRows.ts"

/** decisions.md §13: a session lives 12 hours; a one-time link 10 minutes, once. */
export const SESSION_MS = 12 * 60 * 60 * 1000
export const LINK_MS = 10 * 60 * 1000

const REVOKED = "Invalid or revoked API key"

export interface Session {
  readonly id: string
  readonly organization: Organization
  readonly csrfToken: string
  readonly keyId: string | null
  readonly expiresAt: number
}

export interface SignedIn {
  readonly session: Session
  /** The cookie's value: `<organization id>.<secret>`; only the secret's SHA-256 is stored. */
  readonly cookie: string
}

export interface DashboardSessionsShape {
  readonly signInWithKey: (apiKey: string) => Effect.Effect<SignedIn, Unauthorized>
  /** A one-time sign-in token for an organization (id or slug), for the CLI to print as a link. */
  readonly createLink: (
    organizationRef: string
  ) => Effect.Effect<{ readonly token: string; readonly organization: Organization }, OrganizationError>
  readonly redeemLink: (token: string) => Effect.Effect<Option.Option<SignedIn>>
  readonly find: (cookie: string) => Effect.Effect<Option.Option<Session>>
  readonly end: (session: Session) => Effect.Effect<void>
  readonly audit: (session: Session, action: string, objectId: string, outcome: string) => Effect.Effect<void>
}

export class DashboardSessions extends Context.Tag("DashboardSessions")<DashboardSessions, DashboardSessionsShape>() {}

const split = splitToken

export const DashboardSessionsLive = Layer.effect(
  DashboardSessions,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const authenticator = yield* Authenticator
    const organizations = yield* Organizations
    const ids = yield* Ids
    // The audit lists in the order it was written: two changes of one millisecond keep their order.
    const auditId = makeMonotonicIds("aud")

    /**
     * A new session: of a one-time link (no key), or of the key with this hash, written only while that key is
     * unrevoked (`INSERT … SELECT` over its row: a revocation committed before it leaves nothing written, one after
     * it ends the session through `find`). None when the key is revoked or unknown.
     */
    const open = (organization: Organization, by: "link" | { readonly keyHash: string }) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const secret = randomToken(32)
        const id = yield* ids.next("dss")
        const csrfToken = randomToken(24)
        const expiresAt = now + SESSION_MS
        const tokenHash = sha256Hex(secret)
        const written =
          by === "link"
            ? yield* sql<{ keyId: string | null }>`INSERT INTO dashboard_sessions ${sql.insert({
                organizationId: organization.id,
                id,
                tokenHash,
                csrfToken,
                keyId: null,
                createdAt: now,
                expiresAt,
                endedAt: null
              })} RETURNING key_id`.pipe(Effect.orDie)
            : yield* sql<{ keyId: string | null }>`INSERT INTO dashboard_sessions
                  (organization_id, id, token_hash, csrf_token, key_id, created_at, expires_at, ended_at)
                SELECT ${organization.id}, ${id}, ${tokenHash}, ${csrfToken}, k.id, ${now}, ${expiresAt}, NULL
                FROM api_keys k
                WHERE k.organization_id = ${organization.id} AND k.key_hash = ${by.keyHash} AND k.revoked_at IS NULL
                RETURNING key_id`.pipe(Effect.orDie)
        const row = written[0]
        if (row === undefined) return Option.none<SignedIn>()
        const session: Session = { id, organization, csrfToken, keyId: row.keyId, expiresAt }
        return Option.some<SignedIn>({ session, cookie: `${organization.id}.${secret}` })
      })

    return {
      signInWithKey: (apiKey) =>
        Effect.gen(function* () {
          // The key's form and environment; its organization may come from the lookup cache, which another process's
          // revocation reaches only within KEY_CACHE_MS on SQLite. So the cache never decides a sign-in: the session
          // is written only if the key's row is still unrevoked, in the same statement that writes it.
          const organization = yield* authenticator.authenticate(apiKey)
          const opened = yield* open(organization, { keyHash: sha256Hex(apiKey.trim()) })
          if (Option.isNone(opened)) return yield* new Unauthorized({ code: "unauthorized", message: REVOKED })
          return opened.value
        }),
      createLink: (ref) =>
        Effect.gen(function* () {
          const org = yield* organizations.get(ref)
          const now = yield* Clock.currentTimeMillis
          const secret = randomToken(32)
          yield* sql`INSERT INTO dashboard_links ${sql.insert({
            organizationId: org.id,
            tokenHash: sha256Hex(secret),
            createdAt: now,
            expiresAt: now + LINK_MS,
            usedAt: null
          })}`.pipe(Effect.orDie)
          return { token: `${org.id}.${secret}`, organization: { id: org.id, slug: org.slug, name: org.name } }
        }),
      redeemLink: (token) =>
        Effect.gen(function* () {
          const parts = split(token)
          if (Option.isNone(parts)) return Option.none()
          const { organizationId, secret } = parts.value
          const now = yield* Clock.currentTimeMillis
          // Used once: the guarded update is the claim, whichever request gets there first.
          const claimed = yield* sql<{ organizationId: string }>`UPDATE dashboard_links SET used_at = ${now}
            WHERE organization_id = ${organizationId} AND token_hash = ${sha256Hex(secret)}
              AND used_at IS NULL AND expires_at > ${now}
            RETURNING organization_id`.pipe(Effect.orDie)
          if (claimed.length !== 1) return Option.none()
          const org = yield* Effect.option(organizations.get(organizationId))
          if (Option.isNone(org)) return Option.none()
          const { id, slug, name } = org.value
          return yield* open({ id, slug, name }, "link")
        }),
      find: (cookie) =>
        Effect.gen(function* () {
          const parts = split(cookie)
          if (Option.isNone(parts)) return Option.none()
          const now = yield* Clock.currentTimeMillis
          // Ended, expired, or signed in with a key since revoked: no session. Read every time, never cached, so a
          // revocation ends it at once.
          const rows = yield* sql<{
            id: string
            csrfToken: string
            keyId: string | null
            expiresAt: number
            slug: string
            name: string
          }>`SELECT s.id, s.csrf_token, s.key_id, s.expires_at, o.slug, o.name
            FROM dashboard_sessions s JOIN organizations o ON o.id = s.organization_id
            WHERE s.organization_id = ${parts.value.organizationId} AND s.token_hash = ${sha256Hex(parts.value.secret)}
              AND s.ended_at IS NULL AND s.expires_at > ${now}
              AND (s.key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.organization_id = s.organization_id
                AND k.id = s.key_id AND k.revoked_at IS NULL))`.pipe(Effect.orDie)
          const row = rows[0]
          if (row === undefined) return Option.none()
          return Option.some<Session>({
            id: row.id,
            organization: { id: parts.value.organizationId, slug: row.slug, name: row.name },
            csrfToken: row.csrfToken,
            keyId: row.keyId,
            expiresAt: Number(row.expiresAt)
          })
        }),
      end: (session) => endSession(sql, "dashboard_sessions", session.organization.id, session.id),
      audit: (session, action, objectId, outcome) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          recordAudit(sql, "dashboard_audit", "dashboard change", {
            organizationId: session.organization.id,
            id: auditId(now),
            sessionId: session.id,
            action,
            objectId,
            outcome,
            createdAt: now
          })
        )
    }
  })
)
