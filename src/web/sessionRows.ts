import type { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"

// The rows both pages' sessions write (the dashboard's, decisions.md §13, and the portal's, §17): ending a session
// and the audit of a change tried in it. Each page keeps its own tables (a portal row also names its customer).

/** Ends a session now: its `ended_at`, within its organization. */
export const endSession = (
  sql: SqlClient.SqlClient,
  table: "dashboard_sessions" | "portal_sessions",
  organizationId: string,
  id: string
): Effect.Effect<void> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => sql`UPDATE ${sql(table)} SET ended_at = ${now} WHERE organization_id = ${organizationId} AND id = ${id}`
  ).pipe(Effect.asVoid, Effect.orDie)

export interface AuditRow {
  readonly organizationId: string
  readonly id: string
  readonly sessionId: string
  readonly customerId?: string
  readonly action: string
  readonly objectId: string
  readonly outcome: string
  readonly createdAt: number
}

/** One audit row and one info log line (`message`) naming the organization, action, object, outcome and session. */
export const recordAudit = (
  sql: SqlClient.SqlClient,
  table: "dashboard_audit" | "portal_audit",
  message: string,
  row: AuditRow
): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ ...row })}`.pipe(Effect.orDie)
    yield* Effect.logInfo(message).pipe(
      Effect.annotateLogs({
        organization: row.organizationId,
        ...(row.customerId === undefined ? {} : { customer: row.customerId }),
        action: row.action,
        object: row.objectId,
        outcome: row.outcome,
        session: row.sessionId
      })
    )
  })
