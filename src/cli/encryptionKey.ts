import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { renameSync, writeFileSync } from "node:fs"
import { AppConfig } from "../platform/config.ts"
import { Encryption, keySourceOf, loadKey, makeEncryption, parseKey } from "../platform/encryption.ts"
import { rotateKey } from "../platform/encryptionCheck.ts"
import { CommandError, type Output, type Parsed, UsageError } from "./args.ts"

/**
 * `encryption-key rotate`: every stored secret re-encrypted under NEW_ENCRYPTION_KEY, and the database's check value
 * with them, in one transaction. The current key is the process's own (ENCRYPTION_KEY, or the sandbox's generated
 * file), already checked against the database when the command started. The new key comes from the environment only,
 * never a flag (argv is visible to every user of the machine).
 */
export const encryptionKeyCommand = (args: Parsed) =>
  Effect.gen(function* () {
    if (args.positional.length !== 2 || args.positional[1] !== "rotate")
      return yield* Effect.fail(new UsageError(`unknown command '${args.positional.join(" ")}'`))
    const raw = process.env.NEW_ENCRYPTION_KEY ?? ""
    const next = parseKey(raw)
    if (next === undefined) {
      return yield* Effect.fail(
        new CommandError(
          "invalid_request",
          raw === ""
            ? "NEW_ENCRYPTION_KEY is not set: it holds the new key (64 hex characters or base64 of 32 bytes)"
            : "NEW_ENCRYPTION_KEY must be 64 hex characters or base64 of 32 bytes"
        )
      )
    }
    const config = yield* AppConfig
    const encryption = yield* Encryption
    const { key } = yield* loadKey(config)
    if (key.equals(next))
      return yield* Effect.fail(new CommandError("invalid_request", "NEW_ENCRYPTION_KEY is the current key"))
    const { secrets } = yield* rotateKey({ key, encryption }, { key: next, encryption: makeEncryption(next) }).pipe(
      Effect.provideService(SqlClient.SqlClient, yield* SqlClient.SqlClient)
    )
    // The sandbox's generated key file follows the database (written whole, then renamed over the old one); with
    // ENCRYPTION_KEY set, the operator sets the new one in every process.
    const source = keySourceOf(config)
    if (source.kind === "file") {
      writeFileSync(`${source.file}.new`, next.toString("hex") + "\n", { mode: 0o600 })
      renameSync(`${source.file}.new`, source.file)
    }
    const then =
      source.kind === "file"
        ? `${source.file} now holds the new key.`
        : "Set ENCRYPTION_KEY to the new key in every process on this database, then start them."
    return {
      json: { rotated: true, secrets, keyFile: source.kind === "file" ? source.file : null },
      text: `Re-encrypted ${secrets} stored ${secrets === 1 ? "secret" : "secrets"} under the new key. ${then}`
    } satisfies Output
  })
