import type { SqlClient } from "@effect/sql"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { PgPool, poolQuery } from "../platform/db/PgPool.ts"
import { makeBatcher } from "./Batcher.ts"
import { makeContextCache, type Versions } from "./contextCache.ts"
import { fastContext } from "./hotDecode.ts"
import {
  type ContextRead,
  contextReadMany,
  contextVersions,
  ENTITLEMENT_READS,
  type ManyRead,
  manyReadParameters,
  EntitlementContext,
  readsParameter,
  SQLITE_ENTITLEMENT_READ,
  sqliteReadParameters
} from "./hotStatements.ts"

/**
 * The read of check/track (src/entitlements/hotStatements.ts declares it): on PostgreSQL one statement for every read
 * of a batch, concurrent reads gathered by one lane (src/entitlements/Batcher.ts), on the pool as it is
 * (src/platform/db/PgPool.ts), or inside a transaction on the transaction's own connection; on SQLite the same read
 * inline. Either way the reader is the statement's schema.
 */
export interface ContextReader {
  readonly read: (read: ContextRead, inTransaction: boolean) => Effect.Effect<EntitlementContext>
  /**
   * Many references of one feature (a batch's items), one context for all of them: those kept since the
   * organization's context version last moved from memory (./contextCache.ts), the others in one statement on the
   * pool.
   */
  readonly readMany: (read: ManyRead) => Effect.Effect<EntitlementContext>
}

const PG_READ_MANY = contextReadMany("pg")
const SQLITE_READ_MANY = contextReadMany("sqlite")

const PG_VERSIONS = contextVersions("pg")
const SQLITE_VERSIONS = contextVersions("sqlite")

const schemaContexts = Schema.decodeUnknownEither(Schema.Array(EntitlementContext))
const schemaContext = Schema.decodeUnknownEither(EntitlementContext)

/** By the fast decoder (./hotDecode.ts, the schema's checks at a fraction of its cost), else by the schema. */
const decodeContext = (u: unknown): Either.Either<EntitlementContext, ParseResult.ParseError> => {
  const fast = fastContext(u)
  return fast === undefined ? schemaContext(u) : Either.right(fast)
}
const decodeContexts = (u: unknown): Either.Either<ReadonlyArray<EntitlementContext>, ParseResult.ParseError> => {
  if (!Array.isArray(u)) return schemaContexts(u)
  const out: Array<EntitlementContext> = []
  for (const c of u) {
    const fast = fastContext(c)
    if (fast === undefined) return schemaContexts(u)
    out.push(fast)
  }
  return Either.right(out)
}

/** Oldest first (`listLive`'s order): the statements leave the order to the reader. */
const ordered = (context: EntitlementContext): EntitlementContext =>
  context.subscriptions.length < 2
    ? context
    : {
        ...context,
        subscriptions: [...context.subscriptions].sort(
          (a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
        )
      }

/** A row the reader refuses is a defect (the statement and its reader disagree), named by the schema's message. */
const orDie = <A>(decoded: Either.Either<A, ParseResult.ParseError>): Effect.Effect<A> =>
  Either.isRight(decoded)
    ? Effect.succeed(decoded.right)
    : Effect.dieMessage(`entitlement read: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)

export const makeContextReader = (sql: SqlClient.SqlClient, pool: Option.Option<PgPool["Type"]>): ContextReader => {
  // The statements' JSON already has the reader's keys: no name transformation of (every key of) it.
  const raw = sql.withoutTransforms()

  const pgStatement = (reads: ReadonlyArray<ContextRead>, inTransaction: boolean) => {
    const values = [readsParameter(reads)]
    const rows =
      inTransaction || Option.isNone(pool)
        ? raw.unsafe<{ contexts: unknown }>(ENTITLEMENT_READS, values)
        : poolQuery<{ contexts: unknown }>(pool.value, ENTITLEMENT_READS, values, "entitlement_reads")
    return Effect.flatMap(rows, (rows) => orDie(decodeContexts(rows[0]?.contexts))).pipe(
      Effect.map((contexts) => contexts.map(ordered)),
      Effect.orDie
    )
  }

  const pgReads = makeBatcher<ContextRead, EntitlementContext>({
    // One read in flight, gathering what arrives meanwhile and in its turn: measured against 2 and 4 lanes, fewer
    // round trips and busy backends gave both the higher peak and the lower p99 at half of it.
    lanes: 1,
    gather: true,
    maxBatch: 128,
    run: (reads) => pgStatement(reads, false)
  })

  const sqliteRead = (read: ContextRead) =>
    Effect.flatMap(raw.unsafe<{ context: string }>(SQLITE_ENTITLEMENT_READ, sqliteReadParameters(read)), (rows) =>
      orDie(decodeContext(JSON.parse(rows[0]?.context ?? "null")))
    ).pipe(Effect.map(ordered), Effect.orDie)

  const readManyUncached = (read: ManyRead) =>
    sql
      .onDialectOrElse({
        pg: () => {
          const values = manyReadParameters(read)
          const rows = Option.isNone(pool)
            ? raw.unsafe<{ context: unknown }>(PG_READ_MANY, values)
            : poolQuery<{ context: unknown }>(pool.value, PG_READ_MANY, values, "entitlement_read_many")
          return Effect.flatMap(rows, (rows) => orDie(decodeContext(rows[0]?.context)))
        },
        orElse: () =>
          Effect.flatMap(raw.unsafe<{ context: string }>(SQLITE_READ_MANY, manyReadParameters(read)), (rows) =>
            orDie(decodeContext(JSON.parse(rows[0]?.context ?? "null")))
          )
      })
      .pipe(Effect.map(ordered), Effect.orDie)

  const versions = (org: string): Effect.Effect<Versions> =>
    sql
      .onDialectOrElse({
        pg: () =>
          Option.isNone(pool)
            ? raw.unsafe<Versions>(PG_VERSIONS, [org])
            : poolQuery<Versions>(pool.value, PG_VERSIONS, [org], "context_versions"),
        orElse: () => raw.unsafe<Versions>(SQLITE_VERSIONS, [org])
      })
      .pipe(
        // BIGINTs: PostgreSQL's driver gives them as text.
        Effect.map(([row]) => ({
          catalogVersion: Number(row!.catalogVersion),
          contextVersion: Number(row!.contextVersion)
        })),
        Effect.orDie
      )
  const cache = makeContextCache({ versions, read: readManyUncached })

  return {
    readMany: cache.readMany,
    read: (read, inTransaction) =>
      sql.onDialectOrElse({
        pg: () =>
          inTransaction ? Effect.map(pgStatement([read], true), (contexts) => contexts[0]!) : pgReads.submit(read),
        orElse: () => sqliteRead(read)
      })
  }
}
