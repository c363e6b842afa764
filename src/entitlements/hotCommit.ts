import type { SqlClient } from "@effect/sql"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { retryDeadlocks } from "../platform/db/deadlocks.ts"
import { PgPool, poolQuery, transactionQuery } from "../platform/db/PgPool.ts"
import type { BalanceCommit, BalanceRow, GuardedBatches, KeyedBalance } from "./records.ts"
import {
  COMMIT_BALANCES,
  COMMIT_GUARDED,
  COMMIT_LOCKED,
  commitLockedParameters,
  type CommitItem,
  CommitVersions,
  itemJson,
  rollupsOf,
  SQLITE_EVENT_ROWS,
  SQLITE_GUARD,
  sqliteGuardJson,
  SQLITE_INSERT_BALANCE,
  SQLITE_ROWS,
  sqliteEventInsert,
  sqliteInsertParameters,
  sqliteRollupParameters,
  sqliteRollupUpsert,
  sqliteUpdateBalances
} from "./hotStatements.ts"

const itemOf = (c: BalanceCommit): CommitItem => ({
  org: c.organizationId,
  customer: c.customerId,
  subject: c.subjectId,
  expected: c.expectedVersion,
  windowStart: c.next.windowStart,
  windowEnd: c.next.windowEnd,
  used: c.next.used,
  overage: c.next.overage,
  bonus: c.next.bonus,
  addon: c.next.addon,
  now: c.now,
  events: c.events,
  rollups: rollupsOf(c.events)
})

const decodeVersions = Schema.decodeUnknownEither(CommitVersions)

/**
 * SQLite: a step's writes inside the caller's transaction (its one connection serialises writers anyway): each
 * balance's new state only if still at its expected version (a missing one created), then the events and rollups of
 * those written; each one's new version, or none where its guard failed.
 */
const sqliteWrites = (raw: SqlClient.SqlClient, items: ReadonlyArray<CommitItem>, guarded = false) =>
  Effect.gen(function* () {
    const keyOf = (org: string, customer: string, subject: string) => `${org}\u0000${customer}\u0000${subject}`
    const written = new Map<string, number>()
    const existing = items.filter((c) => c.expected !== null)
    for (let i = 0; i < existing.length; i += SQLITE_ROWS) {
      const chunk = existing.slice(i, i + SQLITE_ROWS)
      const [statement, parameters] = sqliteUpdateBalances(chunk, guarded)
      const updated = yield* raw.unsafe<{ o: string; c: string; s: string; v: number }>(statement, parameters)
      for (const u of updated) written.set(keyOf(u.o, u.c, u.s), Number(u.v))
    }
    for (const c of items) {
      if (c.expected !== null) continue
      const [inserted] = yield* raw.unsafe<{ version: number }>(SQLITE_INSERT_BALANCE, sqliteInsertParameters(c))
      if (inserted !== undefined) written.set(keyOf(c.org, c.customer, c.subject), Number(inserted.version))
    }
    const versions = items.map((c) => Option.fromNullable(written.get(keyOf(c.org, c.customer, c.subject))))
    const done = items.filter((_, i) => Option.isSome(versions[i]!))
    const events = done.flatMap((c) => c.events)
    for (let i = 0; i < events.length; i += SQLITE_EVENT_ROWS) {
      const chunk = events.slice(i, i + SQLITE_EVENT_ROWS)
      const [statement, parameters] = sqliteEventInsert(chunk)
      yield* raw.unsafe(statement, parameters)
    }
    const rollups = done.flatMap((c) => c.rollups.map((r) => sqliteRollupParameters(c.org, c.customer, r)))
    for (let i = 0; i < rollups.length; i += SQLITE_EVENT_ROWS) {
      const chunk = rollups.slice(i, i + SQLITE_EVENT_ROWS)
      const [statement, parameters] = sqliteRollupUpsert(chunk)
      yield* raw.unsafe(statement, parameters)
    }
    return versions
  })

/**
 * The write of a step of the balance writer (src/entitlements/hotStatements.ts declares it): for each balance, its new
 * state only if still at its expected version, with its events and rollups; each one's new version, or none where its
 * guard failed (nothing of it was written). PostgreSQL: one statement (`commit_balances`), which commits on its own,
 * so no row lock outlives it. SQLite: the same in one transaction, in a few statements for the whole step.
 */
export const makeCommitBalances = (sql: SqlClient.SqlClient, pool: Option.Option<PgPool["Type"]>) => {
  const raw = sql.withoutTransforms()

  /** The notices of the balances whose guard held, in the transaction that wrote them. */
  const notify = (commits: ReadonlyArray<BalanceCommit>, versions: ReadonlyArray<Option.Option<number>>) =>
    Effect.forEach(
      commits.flatMap((c, i) => (Option.isSome(versions[i]!) ? (c.notices ?? []) : [])),
      (notice) => notice,
      { discard: true }
    )

  const pg = (commits: ReadonlyArray<BalanceCommit>, inTransaction: boolean) => {
    // A step with notices is a transaction on the SqlClient (the statement, then the notices of what it wrote);
    // every other step is the statement alone, on the pool, committing by itself.
    const noticed = commits.some((c) => c.notices !== undefined && c.notices.length > 0)
    const items = () => [JSON.stringify(commits.map((c) => itemJson(itemOf(c))))]
    // Inside a caller's transaction the rows are its locked ones (a batch's): written set-based, all of one
    // organization (the statement scopes every row by its one parameter).
    const org = commits[0]?.organizationId ?? ""
    const rows = inTransaction
      ? commits.every((c) => c.organizationId === org)
        ? transactionQuery<{ versions: unknown }>(
            sql,
            pool,
            COMMIT_LOCKED,
            commitLockedParameters(org, commits.map(itemOf)),
            "commit_locked"
          )
        : Effect.dieMessage("commit_locked: the balances of one organization only")
      : Option.isSome(pool) && !noticed
        ? poolQuery<{ versions: unknown }>(pool.value, COMMIT_BALANCES, items(), "commit_balances")
        : raw.unsafe<{ versions: unknown }>(COMMIT_BALANCES, items())
    const versions = Effect.flatMap(rows, (rows) => {
      const decoded = decodeVersions(rows[0]?.versions)
      return Either.isRight(decoded)
        ? Effect.succeed(decoded.right.map(Option.fromNullable))
        : Effect.dieMessage(`commit_balances: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
    })
    // A statement PostgreSQL rolled back to break a deadlock wrote nothing: it runs again (inside a caller's
    // transaction, the caller's retry does: the whole transaction was rolled back).
    const step = noticed ? sql.withTransaction(Effect.tap(versions, (written) => notify(commits, written))) : versions
    return inTransaction ? step : retryDeadlocks(step)
  }

  const sqlite = (commits: ReadonlyArray<BalanceCommit>) =>
    sql.withTransaction(Effect.tap(sqliteWrites(raw, commits.map(itemOf)), (versions) => notify(commits, versions)))

  return (
    commits: ReadonlyArray<BalanceCommit>,
    inTransaction = false
  ): Effect.Effect<ReadonlyArray<Option.Option<number>>> =>
    sql.onDialectOrElse({ pg: () => pg(commits, inTransaction), orElse: () => sqlite(commits) }).pipe(Effect.orDie)
}

/**
 * PostgreSQL: a guarded batch's write (`COMMIT_GUARDED`, one statement on the pool that commits by itself): the
 * balances `written` and `checked`, each still the state it was decided over (`base`), or nothing. Whether it wrote.
 * A statement rolled back to break a deadlock is sent again.
 */
export const makeCommitGuarded =
  (pool: PgPool["Type"]): GuardedBatches["commit"] =>
  (org, written, checked) => {
    const items = guardedItems(org, written, checked)
    const writes = items.map((_, i) => i < written.length)
    const statement = Effect.flatMap(
      poolQuery<{ held: boolean; written: number }>(
        pool,
        COMMIT_GUARDED,
        commitLockedParameters(org, items, writes),
        "commit_guarded"
      ),
      ([row]) =>
        row?.held !== true
          ? Effect.succeed(false)
          : row.written === written.length
            ? Effect.succeed(true)
            : Effect.dieMessage(`commit_guarded: ${row.written} of ${written.length} balances written`)
    )
    return retryDeadlocks(statement).pipe(Effect.orDie)
  }

/** A guarded write's balances, each with the state it must still be: what both databases' guards compare. */
const guardedItems = (
  org: string,
  written: ReadonlyArray<BalanceCommit & { readonly base: BalanceRow }>,
  checked: ReadonlyArray<KeyedBalance>
): Array<CommitItem> => {
  const items: Array<CommitItem> = written.map((c) => ({ ...itemOf(c), base: c.base }))
  for (const c of checked) {
    items.push({
      org,
      customer: c.customerId,
      subject: c.subjectId,
      expected: c.version,
      windowStart: 0,
      windowEnd: null,
      used: 0n,
      overage: 0n,
      bonus: 0n,
      addon: 0n,
      now: 0,
      events: [],
      rollups: [],
      base: c
    })
  }
  return items
}

/** A guarded write found a balance moved: its transaction rolls back. */
const MOVED = Symbol("moved")

/**
 * SQLite: a guarded batch's write, one transaction (its one connection serialises writers). The balances `written`
 * are updated only where each is still the state it was decided over, in the UPDATE itself; those only `checked` are
 * compared by a read (`SQLITE_GUARD`, usually none). If any moved, the transaction rolls back and nothing is written.
 * Whether it wrote. Measured: the guard as a read of every balance before the writes cost ~11 µs an item.
 */
export const makeCommitGuardedSqlite =
  (sql: SqlClient.SqlClient): GuardedBatches["commit"] =>
  (org, written, checked) => {
    const raw = sql.withoutTransforms()
    const items = guardedItems(org, written, checked)
    const writes = items.slice(0, written.length)
    const checks = items.slice(written.length)
    // A balance that does not exist yet was decided over no state; only the locked transaction creates one.
    if (writes.some((c) => c.expected === null)) return Effect.succeed(false)
    return sql
      .withTransaction(
        Effect.gen(function* () {
          if (checks.length > 0) {
            const [held] = yield* raw.unsafe<{ n: number }>(SQLITE_GUARD, [org, sqliteGuardJson(checks)])
            if (Number(held?.n) !== checks.length) return yield* Effect.fail(MOVED)
          }
          const versions = yield* sqliteWrites(raw, writes, true)
          if (versions.some(Option.isNone)) return yield* Effect.fail(MOVED)
          return true
        })
      )
      .pipe(
        Effect.catchIf(
          (e): e is typeof MOVED => e === MOVED,
          () => Effect.succeed(false)
        ),
        Effect.orDie
      )
  }
