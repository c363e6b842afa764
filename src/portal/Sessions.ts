import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Organization } from "../api/security.ts"
import { randomToken, sha256Hex } from "../platform/crypto.ts"
import { Ids, makeMonotonicIds } from "../platform/ids.ts"
import { splitToken } from "../web/pages.ts"
import { endSession, recordAudit } from "../web/sessionRows.ts"

/** decisions.md §17: a portal link is good for 1 hour, once; the session it opens ends when the link would have. */
export const PORTAL_LINK_MS = 60 * 60 * 1000

/** The link a vendor sends its customer to: `${PUBLIC_URL}/portal/link/<org id>.<secret>`. */
export const portalLinkUrl = (publicUrl: string, token: string) =>
  `${publicUrl.replace(/\/+$/, "")}/portal/link/${token}`

/** A customer's portal session: one customer (its internal id) of one organization, nothing else. */
export interface PortalSession {
  readonly id: string
  readonly organization: Organization
  readonly customerId: string
  readonly csrfToken: string
  readonly returnUrl: string | null
  readonly expiresAt: number
}

export interface PortalSignedIn {
  readonly session: PortalSession
  /** The cookie's value: `<organization id>.<secret>`; only the secret's SHA-256 is stored. */
  readonly cookie: string
}

export interface PortalSessionsShape {
  /** A one-time link's token for a customer (already resolved in the organization), and when it expires. */
  readonly createLink: (
    organizationId: string,
    customerId: string,
    returnUrl: string | null
  ) => Effect.Effect<{ readonly token: string; readonly expiresAt: number }>
  readonly redeemLink: (token: string) => Effect.Effect<Option.Option<PortalSignedIn>>
  readonly find: (cookie: string) => Effect.Effect<Option.Option<PortalSession>>
  readonly end: (session: PortalSession) => Effect.Effect<void>
  /** One audit row and one `portal change` log line per change tried in the portal, refused ones included. */
  readonly audit: (session: PortalSession, action: string, objectId: string, outcome: string) => Effect.Effect<void>
}

export class PortalSessions extends Context.Tag("PortalSessions")<PortalSessions, PortalSessionsShape>() {}

export const PortalSessionsLive = Layer.effect(
  PortalSessions,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids
    const auditId = makeMonotonicIds("pau")

    return {
      createLink: (organizationId, customerId, returnUrl) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const secret = randomToken(32)
          const expiresAt = now + PORTAL_LINK_MS
          yield* sql`INSERT INTO portal_links ${sql.insert({
            organizationId,
            tokenHash: sha256Hex(secret),
            customerId,
            returnUrl,
            createdAt: now,
            expiresAt,
            usedAt: null
          })}`
          return { token: `${organizationId}.${secret}`, expiresAt }
        }).pipe(Effect.orDie),
      redeemLink: (token) =>
        Effect.gen(function* () {
          const parts = splitToken(token)
          if (Option.isNone(parts)) return Option.none()
          const { organizationId, secret } = parts.value
          const now = yield* Clock.currentTimeMillis
          // Used once: the guarded update is the claim, whichever request gets there first.
          const claimed = yield* sql<{
            customerId: string
            returnUrl: string | null
            expiresAt: number
          }>`UPDATE portal_links SET used_at = ${now}
            WHERE organization_id = ${organizationId} AND token_hash = ${sha256Hex(secret)}
              AND used_at IS NULL AND expires_at > ${now}
            RETURNING customer_id, return_url, expires_at`
          const link = claimed[0]
          if (claimed.length !== 1 || link === undefined) return Option.none()
          const orgs = yield* sql<{ slug: string; name: string }>`SELECT slug, name FROM organizations
            WHERE id = ${organizationId}`
          const org = orgs[0]
          if (org === undefined) return Option.none()
          const id = yield* ids.next("pss")
          const sessionSecret = randomToken(32)
          const csrfToken = randomToken(24)
          const expiresAt = Number(link.expiresAt)
          yield* sql`INSERT INTO portal_sessions ${sql.insert({
            organizationId,
            id,
            tokenHash: sha256Hex(sessionSecret),
            csrfToken,
            customerId: link.customerId,
            returnUrl: link.returnUrl,
            createdAt: now,
            expiresAt,
            endedAt: null
          })}`
          const session: PortalSession = {
            id,
            organization: { id: organizationId, slug: org.slug, name: org.name },
            customerId: link.customerId,
            csrfToken,
            returnUrl: link.returnUrl,
            expiresAt
          }
          return Option.some<PortalSignedIn>({ session, cookie: `${organizationId}.${sessionSecret}` })
          // The claim and the session commit together: a link is never used up without the session it opened.
        }).pipe(sql.withTransaction, Effect.orDie),
      find: (cookie) =>
        Effect.gen(function* () {
          const parts = splitToken(cookie)
          if (Option.isNone(parts)) return Option.none()
          const now = yield* Clock.currentTimeMillis
          // Read every time, never cached: an ended or expired session is no session at once.
          const rows = yield* sql<{
            id: string
            csrfToken: string
            customerId: string
            returnUrl: string | null
            expiresAt: number
            slug: string
            name: string
          }>`SELECT s.id, s.csrf_token, s.customer_id, s.return_url, s.expires_at, o.slug, o.name
            FROM portal_sessions s JOIN organizations o ON o.id = s.organization_id
            WHERE s.organization_id = ${parts.value.organizationId} AND s.token_hash = ${sha256Hex(parts.value.secret)}
              AND s.ended_at IS NULL AND s.expires_at > ${now}`
          const row = rows[0]
          if (row === undefined) return Option.none()
          return Option.some<PortalSession>({
            id: row.id,
            organization: { id: parts.value.organizationId, slug: row.slug, name: row.name },
            customerId: row.customerId,
            csrfToken: row.csrfToken,
            returnUrl: row.returnUrl,
            expiresAt: Number(row.expiresAt)
          })
        }).pipe(Effect.orDie),
      end: (session) => endSession(sql, "portal_sessions", session.organization.id, session.id),
      audit: (session, action, objectId, outcome) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          recordAudit(sql, "portal_audit", "portal change", {
            organizationId: session.organization.id,
            id: auditId(now),
            sessionId: session.id,
            customerId: session.customerId,
            action,
            objectId,
            outcome,
            createdAt: now
          })
        )
    }
  })
)
