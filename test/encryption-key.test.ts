import { afterAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Events } from "../src/events/Events.ts"
import { ProviderAccounts } from "../src/payments/ProviderAccounts.ts"
import type { AppConfigShape } from "../src/platform/config.ts"
import { Encryption } from "../src/platform/encryption.ts"
import { ciphertextsOf, ENCRYPTED_COLUMNS } from "../src/platform/encryptionCheck.ts"
import { BUN, freePort, ROOT, scratchDatabase, startService } from "./hardening/support.ts"
import { startServer, type TestServer } from "./support/harness.ts"

/**
 * One encryption key per database (issue 33, item 3): the first process on a database records a check value of its
 * key; a process with another key refuses to start, naming ENCRYPTION_KEY; `encryption-key rotate` moves every
 * stored secret and the check value to a new key in one transaction.
 */

const serverUrl = process.env.DATABASE_URL?.trim()
const newKey = () => randomBytes(32).toString("hex")

/** A fresh, empty database of each kind: a SQLite file in its own directory, a scratch PostgreSQL database. */
interface Fresh {
  readonly config: Partial<AppConfigShape>
  /** The environment that points a process at it. */
  readonly env: Record<string, string>
  readonly drop: () => Promise<void>
}
const kinds: Array<{ name: string; fresh: () => Promise<Fresh> }> = [
  {
    name: "sqlite",
    fresh: async () => {
      const dir = mkdtempSync(join(tmpdir(), "enckey-"))
      const dataDir = join(dir, "data")
      return {
        config: { dataDir },
        env: { DATA_DIR: dataDir },
        drop: async () => rmSync(dir, { recursive: true, force: true })
      }
    }
  },
  ...(serverUrl
    ? [
        {
          name: "postgresql",
          fresh: async () => {
            const database = await scratchDatabase(serverUrl, "billing_enckey")
            return {
              config: { databaseUrl: Option.some(Redacted.make(database.url)) },
              env: { DATABASE_URL: database.url },
              drop: database.drop
            }
          }
        }
      ]
    : [])
]

const withKey = (fresh: Fresh, key: string) => ({ ...fresh.config, encryptionKey: Option.some(Redacted.make(key)) })

/** Starts the application in this process; resolves to the server, or to the message it refused to start with. */
const start = (fresh: Fresh, key: string): Promise<TestServer | string> =>
  startServer(withKey(fresh, key)).catch((error: unknown) => (error instanceof Error ? error.message : String(error)))

const started = async (fresh: Fresh, key: string) => {
  const server = await start(fresh, key)
  if (typeof server === "string") throw new Error(`expected the service to start: ${server}`)
  return server
}

/**
 * Secrets in every encrypted column: a provider account, a webhook endpoint rotated twice (its retired secrets) with a
 * previous secret as a rotation before migration 0030 left it, a saved method.
 */
const storeSecrets = async (server: TestServer) => {
  const org = await server.createOrg()
  await server.run(
    Effect.gen(function* () {
      const accounts = yield* ProviderAccounts
      yield* accounts.set(org.id, "stripe", { secretKey: "sk_test_x", webhookSecret: "whsec_y", baseUrl: null })
      const events = yield* Events
      const endpoint = yield* events.createEndpoint(org.id, { url: "https://example.com/hooks" })
      yield* events.rotateSecret(org.id, endpoint.id)
      yield* events.rotateSecret(org.id, endpoint.id)
      const encryption = yield* Encryption
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE webhook_endpoints SET previous_secret = ${encryption.encrypt("whsec_legacy")},
          previous_secret_expires_at = ${Date.now() + 3_600_000}
        WHERE organization_id = ${org.id} AND id = ${endpoint.id}`
      yield* sql`INSERT INTO payment_methods (organization_id, id, customer_id, provider, token, type, status,
          created_at, updated_at)
        VALUES (${org.id}, 'pm_1', 'cus_1', 'simulated', ${encryption.encrypt("tok_secret")}, 'card', 'active', 0, 0)`
    })
  )
}
/** How many ciphertexts `storeSecrets` leaves: two of the account, one method, the endpoint's current, previous and two retired. */
const STORED = 7

/** Every stored ciphertext, decrypted with the application's key, by table, column, row and place. */
const readSecrets = (server: TestServer) =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const encryption = yield* Encryption
      const found: Record<string, { stored: string; plain: string }> = {}
      for (const { table, keys, column, format } of ENCRYPTED_COLUMNS) {
        const rows = yield* sql.unsafe<Record<string, string>>(
          `SELECT ${keys.join(" || '/' || ")} AS row_key, ${column} AS stored FROM ${table} WHERE ${column} IS NOT NULL`
        )
        for (const row of rows) {
          for (const [i, ciphertext] of ciphertextsOf(format, row.stored!).entries()) {
            found[`${table}.${column}:${row.rowKey}#${i}`] = {
              stored: ciphertext,
              plain: encryption.decrypt(ciphertext)
            }
          }
        }
      }
      return found
    })
  )

/** The columns a set of secrets covers: every encrypted column, for the tests to mean what they say. */
const columnsOf = (found: Record<string, unknown>) =>
  [...new Set(Object.keys(found).map((k) => k.split(":")[0]))].sort()
const ALL_COLUMNS = [...new Set(ENCRYPTED_COLUMNS.map((c) => `${c.table}.${c.column}`))].sort()

/** Runs a command as a real process, as `npm run cli` does. */
const cliProcess = async (env: Record<string, string>, ...args: Array<string>) => {
  const base: Record<string, string | undefined> = { ...process.env }
  delete base.DATABASE_URL
  const proc = Bun.spawn([BUN, "src/cli.ts", ...args], {
    cwd: ROOT,
    env: { ...base, APP_ENV: "sandbox", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  return { code, stdout, stderr }
}

for (const kind of kinds) {
  describe(`one encryption key per database on ${kind.name}`, () => {
    const cleanups: Array<() => Promise<void>> = []
    const fresh = async () => {
      const f = await kind.fresh()
      cleanups.push(f.drop)
      return f
    }
    const servers: Array<TestServer> = []
    afterAll(async () => {
      for (const s of servers) await s.close().catch(() => undefined)
      for (const drop of cleanups) await drop()
    }, 60_000)

    test("the first process records its key; one with another key refuses to start, naming ENCRYPTION_KEY", async () => {
      const db = await fresh()
      const key = newKey()
      const first = await started(db, key)
      servers.push(first)
      await storeSecrets(first)
      const refused = await start(db, newKey())
      expect(refused).toBeString()
      expect(refused).toContain("ENCRYPTION_KEY")
      expect(refused).toContain("is not the key this database's secrets are encrypted with")
      // The same key starts again.
      const again = await started(db, key)
      servers.push(again)
      expect(Object.keys(await readSecrets(again)).length).toBe(STORED)
    }, 30_000)

    test("two processes starting at once on a database without a check value agree: same key both start, another key one refuses", async () => {
      // Migrated first (two processes migrating one empty database at once is another matter), then without secrets
      // or check value: as the first start of a deployment finds it.
      const empty = async () => {
        const db = await fresh()
        const migrated = await started(db, newKey())
        await migrated.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM encryption_key_check`))
        await migrated.close()
        return db
      }
      for (let round = 0; round < 3; round++) {
        const same = await empty()
        const key = newKey()
        const both = await Promise.all([start(same, key), start(same, key)])
        for (const s of both) {
          expect(s).not.toBeString()
          servers.push(s as TestServer)
        }
        const other = await empty()
        const raced = await Promise.all([start(other, newKey()), start(other, newKey())])
        const refusals = raced.filter((s): s is string => typeof s === "string")
        for (const s of raced) if (typeof s !== "string") servers.push(s)
        expect(refusals.length).toBe(1)
        expect(refusals[0]).toContain("ENCRYPTION_KEY")
      }
    }, 60_000)

    test("a database from before the check value adopts a key that opens its secrets, and refuses one that does not", async () => {
      const db = await fresh()
      const key = newKey()
      const first = await started(db, key)
      await storeSecrets(first)
      await first.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DELETE FROM encryption_key_check`))
      await first.close()
      const refused = await start(db, newKey())
      expect(refused).toContain("ENCRYPTION_KEY")
      expect(refused).toContain(`does not decrypt the secrets already stored in this database (${STORED} of ${STORED}`)
      const adopted = await started(db, key)
      servers.push(adopted)
      const rows = await adopted.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT check_value FROM encryption_key_check`)
      )
      expect(rows.length).toBe(1)
      // Adopted: another key is now refused by the check value itself.
      expect(await start(db, newKey())).toContain("is not the key this database's secrets are encrypted with")
    }, 30_000)

    test("`encryption-key rotate` (a process) re-encrypts every secret and the check value under the new key", async () => {
      const db = await fresh()
      const oldKey = newKey()
      const nextKey = newKey()
      const before = await started(db, oldKey)
      await storeSecrets(before)
      const plain = await readSecrets(before)
      await before.close()
      expect(Object.keys(plain).length).toBe(STORED)
      expect(columnsOf(plain)).toEqual(ALL_COLUMNS)

      const missing = await cliProcess({ ...db.env, ENCRYPTION_KEY: oldKey }, "encryption-key", "rotate")
      expect(missing.code).toBe(1)
      expect(missing.stderr).toContain("NEW_ENCRYPTION_KEY is not set")

      const rotated = await cliProcess(
        { ...db.env, ENCRYPTION_KEY: oldKey, NEW_ENCRYPTION_KEY: nextKey },
        "encryption-key",
        "rotate",
        "--json"
      )
      expect(rotated.stderr).toBe("")
      expect(rotated.code).toBe(0)
      expect(JSON.parse(rotated.stdout)).toEqual({ rotated: true, secrets: STORED, keyFile: null })

      // The old key is refused now (by the CLI as by the service); the new one opens every secret, each rewritten.
      const old = await cliProcess({ ...db.env, ENCRYPTION_KEY: oldKey }, "org", "list", "--json")
      expect(old.code).toBe(1)
      expect(JSON.parse(old.stderr).code).toBe("encryption_key_refused")
      expect(await start(db, oldKey)).toContain("ENCRYPTION_KEY")
      const after = await started(db, nextKey)
      servers.push(after)
      const reread = await readSecrets(after)
      expect(Object.keys(reread).sort()).toEqual(Object.keys(plain).sort())
      for (const [where, { stored, plain: text }] of Object.entries(reread)) {
        expect(text).toBe(plain[where]!.plain)
        expect(stored).not.toBe(plain[where]!.stored)
      }
    }, 60_000)
  })
}

describe("the sandbox's generated key", () => {
  test("rotation rewrites DATA_DIR/encryption.key, so the sandbox starts again with no setup", async () => {
    const dir = mkdtempSync(join(tmpdir(), "enckey-file-"))
    try {
      const env = { DATA_DIR: join(dir, "data") }
      expect((await cliProcess(env, "org", "create", "acme")).code).toBe(0)
      const file = join(dir, "data", "encryption.key")
      const generated = readFileSync(file, "utf8").trim()
      const nextKey = newKey()
      const rotated = await cliProcess({ ...env, NEW_ENCRYPTION_KEY: nextKey }, "encryption-key", "rotate")
      expect(rotated.stderr).toBe("")
      expect(rotated.stdout).toContain(`${file} now holds the new key`)
      expect(readFileSync(file, "utf8").trim()).toBe(nextKey)
      expect(nextKey).not.toBe(generated)
      const listed = await cliProcess(env, "org", "list")
      expect(listed.stderr).toBe("")
      expect(listed.code).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)
})

if (serverUrl) {
  describe("the service as a process on postgresql", () => {
    test("a second service with another key on the same database refuses to start: message, exit 1", async () => {
      const database = await scratchDatabase(serverUrl, "billing_enckey")
      const first = await startService({ DATABASE_URL: database.url, ENCRYPTION_KEY: newKey(), LOG_LEVEL: "error" })
      try {
        const base: Record<string, string | undefined> = { ...process.env }
        const second = Bun.spawn([BUN, "src/main.ts"], {
          cwd: ROOT,
          env: {
            ...base,
            APP_ENV: "live",
            DATABASE_URL: database.url,
            ENCRYPTION_KEY: newKey(),
            PORT: String(freePort()),
            RENEWALS_INTERVAL_SECONDS: "0",
            LOG_LEVEL: "error"
          },
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe"
        })
        const timer = setTimeout(() => second.kill("SIGKILL"), 20_000)
        const [code, stderr] = await Promise.all([second.exited, new Response(second.stderr).text()])
        clearTimeout(timer)
        expect(code).toBe(1)
        expect(stderr).toContain("The service could not start: ENCRYPTION_KEY (as set) is not the key this database")
        expect(stderr).not.toContain(" at ") // one line for a person, no stack trace
        // The first is unaffected.
        expect((await fetch(`${first.baseUrl}/health`)).ok).toBe(true)
      } finally {
        await first.kill()
        await database.drop()
      }
    }, 40_000)
  })
}
