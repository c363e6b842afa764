import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"
import { createHmac } from "node:crypto"
import { safeEqual } from "./crypto.ts"
import type { EncryptionShape } from "./encryption.ts"

/**
 * One encryption key per database. The database keeps a check value of its key (migration 0031): a process whose key
 * gives another value refuses to start, instead of starting and failing on every secret it reads (a delivery pass
 * that cannot sign, provider accounts it cannot open). docs/decisions.md, "First contact".
 */

/**
 * Every column that holds `Encryption.encrypt` output, with the key of its row: what the adoption check reads and
 * rotation rewrites. `ciphertext`: the column is one ciphertext; `secretList`: a JSON array of objects whose `secret`
 * is one (webhook endpoints' retired secrets, migration 0030), rewritten entry by entry, everything else kept.
 */
export const ENCRYPTED_COLUMNS: ReadonlyArray<{
  readonly table: string
  readonly keys: ReadonlyArray<string>
  readonly column: string
  readonly format: "ciphertext" | "secretList"
}> = [
  { table: "provider_accounts", keys: ["organization_id", "provider"], column: "secret_key", format: "ciphertext" },
  { table: "provider_accounts", keys: ["organization_id", "provider"], column: "webhook_secret", format: "ciphertext" },
  { table: "payment_methods", keys: ["organization_id", "id"], column: "token", format: "ciphertext" },
  { table: "webhook_endpoints", keys: ["organization_id", "id"], column: "secret", format: "ciphertext" },
  { table: "webhook_endpoints", keys: ["organization_id", "id"], column: "previous_secret", format: "ciphertext" },
  { table: "webhook_endpoints", keys: ["organization_id", "id"], column: "retired_secrets", format: "secretList" }
]

type Format = (typeof ENCRYPTED_COLUMNS)[number]["format"]

const secretList = (stored: string): Array<Record<string, unknown>> => {
  const value: unknown = JSON.parse(stored)
  return Array.isArray(value)
    ? value.filter((e): e is Record<string, unknown> => typeof e === "object" && e !== null)
    : []
}

/** The ciphertexts a stored value holds. */
export const ciphertextsOf = (format: Format, stored: string): ReadonlyArray<string> =>
  format === "ciphertext"
    ? [stored]
    : secretList(stored).flatMap((e) => (typeof e.secret === "string" ? [e.secret] : []))

/** The stored value with each of its ciphertexts replaced by `rewrite`'s. */
const rewriteStored = (format: Format, stored: string, rewrite: (ciphertext: string) => string): string =>
  format === "ciphertext"
    ? rewrite(stored)
    : JSON.stringify(
        secretList(stored).map((e) => (typeof e.secret === "string" ? { ...e, secret: rewrite(e.secret) } : e))
      )

/** HMAC-SHA-256 of a fixed label under the key: equal for equal keys, and says nothing of the key. */
export const keyCheckValue = (key: Buffer): string =>
  "h1:" + createHmac("sha256", key).update("billing-service encryption key check").digest("hex")

/** The key could not be used with this database: the start-up (or the command) stops with this message. */
export class EncryptionKeyRefused extends Error {
  readonly code = "encryption_key_refused"
}

const HOW =
  "Start every process on this database with the same ENCRYPTION_KEY; to change the key, run " +
  "`npm run cli -- encryption-key rotate` with the current one (README, Operations)."

const readCheck = (sql: SqlClient.SqlClient) =>
  sql<{ checkValue: string }>`SELECT check_value FROM encryption_key_check WHERE id = 1`.pipe(
    Effect.map((rows) => rows[0]?.checkValue)
  )

interface StoredSecret {
  readonly table: string
  readonly column: string
  readonly format: Format
  readonly keys: ReadonlyArray<unknown>
  readonly value: string
}

/** Every stored secret (rare rows: provider accounts, saved methods, webhook endpoints), with its row's key. */
const storedSecrets = (sql: SqlClient.SqlClient) =>
  Effect.forEach(ENCRYPTED_COLUMNS, ({ table, keys, column, format }) =>
    sql
      .unsafe<Record<string, unknown>>(
        `SELECT ${keys.join(", ")}, ${column} AS stored_value FROM ${table} WHERE ${column} IS NOT NULL`
      )
      .pipe(
        Effect.map((rows) =>
          rows.map((row): StoredSecret => ({
            table,
            column,
            format,
            // Row names come back camelCased (the client's transform).
            keys: keys.map((k) => row[k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())]),
            value: String(row.storedValue)
          }))
        )
      )
  ).pipe(Effect.map((lists) => lists.flat()))

const opens = (encryption: EncryptionShape, stored: string) => {
  try {
    encryption.decrypt(stored)
    return true
  } catch {
    return false
  }
}

/**
 * At start-up, after the migrations: the key must be the database's. A database without a check value (new, or from
 * before migration 0031) takes this key when it opens every secret already stored (or there is none); the check value
 * is then written with ON CONFLICT DO NOTHING and read back, so that of two processes starting at once on an empty
 * database the loser adopts the winner's key when it is the same and refuses when it is not.
 * `source` says where the key came from, for the message.
 */
export const verifyKey = (key: Buffer, encryption: EncryptionShape, source: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const check = keyCheckValue(key)
    let stored = yield* readCheck(sql)
    if (stored === undefined) {
      const secrets = (yield* storedSecrets(sql)).flatMap((s) =>
        ciphertextsOf(s.format, s.value).map((ciphertext) => ({ ...s, ciphertext }))
      )
      const closed = secrets.filter((s) => !opens(encryption, s.ciphertext))
      if (closed.length > 0) {
        return yield* Effect.fail(
          new EncryptionKeyRefused(
            `ENCRYPTION_KEY (${source}) does not decrypt the secrets already stored in this database ` +
              `(${closed.length} of ${secrets.length}, e.g. ${closed[0]!.table}.${closed[0]!.column}): they were ` +
              `written with another key. ${HOW}`
          )
        )
      }
      const now = yield* Clock.currentTimeMillis
      yield* sql`INSERT INTO encryption_key_check (id, check_value, created_at) VALUES (1, ${check}, ${now})
        ON CONFLICT (id) DO NOTHING`
      stored = yield* readCheck(sql)
    }
    if (stored === undefined || !safeEqual(stored, check)) {
      return yield* Effect.fail(
        new EncryptionKeyRefused(
          `ENCRYPTION_KEY (${source}) is not the key this database's secrets are encrypted with. ${HOW}`
        )
      )
    }
  })

/**
 * Re-encrypts every stored secret under `next` and moves the check value to it, in one transaction: all or nothing.
 * The check row is updated first and only from the current key's value, so two rotations at once run one after the
 * other and the second finds the key changed. A secret that changes while this runs (a service still writing) fails
 * the rotation rather than being left under the old key.
 */
export const rotateKey = (
  current: { readonly key: Buffer; readonly encryption: EncryptionShape },
  next: { readonly key: Buffer; readonly encryption: EncryptionShape }
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const moved = yield* sql<{ id: number }>`UPDATE encryption_key_check
      SET check_value = ${keyCheckValue(next.key)}, rotated_at = ${now}
      WHERE id = 1 AND check_value = ${keyCheckValue(current.key)} RETURNING id`
    if (moved.length !== 1) {
      return yield* Effect.fail(
        new EncryptionKeyRefused(
          "the database's key is no longer the current ENCRYPTION_KEY (another rotation ran?): nothing was changed"
        )
      )
    }
    const secrets = yield* storedSecrets(sql)
    for (const secret of secrets) {
      const rewritten = yield* Effect.try({
        try: () =>
          rewriteStored(secret.format, secret.value, (c) => next.encryption.encrypt(current.encryption.decrypt(c))),
        catch: () =>
          new EncryptionKeyRefused(
            `a secret in ${secret.table}.${secret.column} does not decrypt under the current key: nothing was changed`
          )
      })
      const keys = ENCRYPTED_COLUMNS.find((c) => c.table === secret.table)!.keys
      const updated = yield* sql<{ one: number }>`UPDATE ${sql(secret.table)}
        SET ${sql(secret.column)} = ${rewritten}
        WHERE ${sql.and(keys.map((k, i) => sql`${sql(k)} = ${secret.keys[i] as string}`))}
          AND ${sql(secret.column)} = ${secret.value}
        RETURNING 1 AS one`
      if (updated.length !== 1) {
        return yield* Effect.fail(
          new EncryptionKeyRefused(
            `a secret in ${secret.table}.${secret.column} changed during the rotation (is a service still running?): ` +
              "nothing was changed"
          )
        )
      }
    }
    return { secrets: secrets.reduce((n, s) => n + ciphertextsOf(s.format, s.value).length, 0) }
  }).pipe((rotation) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(rotation)))
