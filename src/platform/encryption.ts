import { Context, Effect, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { AppConfig, type AppConfigShape } from "./config.ts"
import { verifyKey } from "./encryptionCheck.ts"

/**
 * AES-256-GCM for secrets at rest (provider keys, saved-method tokens). Stored form: `v1:` + base64 of
 * iv (12 bytes) ‖ tag (16 bytes) ‖ ciphertext. The version prefix leaves room for key rotation.
 */
export interface EncryptionShape {
  readonly encrypt: (plaintext: string) => string
  readonly decrypt: (stored: string) => string
  /** A secret derived from the key for one purpose (the simulated provider's webhook secret). */
  readonly derive: (purpose: string) => string
}

export class Encryption extends Context.Tag("Encryption")<Encryption, EncryptionShape>() {}

export const parseKey = (value: string): Buffer | undefined => {
  const trimmed = value.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, "hex")
  const decoded = Buffer.from(trimmed, "base64")
  return decoded.length === 32 ? decoded : undefined
}

export const makeEncryption = (key: Buffer): EncryptionShape => ({
  encrypt: (plaintext) => {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", key, iv)
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
    return "v1:" + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")
  },
  decrypt: (stored) => {
    if (!stored.startsWith("v1:")) throw new Error("unknown ciphertext version")
    const raw = Buffer.from(stored.slice(3), "base64")
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
  },
  derive: (purpose) => createHmac("sha256", key).update(purpose).digest("hex")
})

class EncryptionKeyMissing extends Error {}

/** Where a process's key comes from: ENCRYPTION_KEY, else (sandbox) the file generated in DATA_DIR, else random. */
export type KeySource =
  { readonly kind: "env" } | { readonly kind: "file"; readonly file: string } | { readonly kind: "memory" }

export const keySourceOf = (config: AppConfigShape): KeySource =>
  Option.isSome(config.encryptionKey)
    ? { kind: "env" }
    : config.appEnv !== "live" && config.dataDir !== ":memory:"
      ? { kind: "file", file: join(config.dataDir, "encryption.key") }
      : { kind: "memory" }

/** The key of this configuration (generating the sandbox's file on first use); dies with a message for a person. */
export const loadKey = (config: AppConfigShape): Effect.Effect<{ key: Buffer; source: KeySource }> =>
  Effect.gen(function* () {
    const source = keySourceOf(config)
    if (Option.isSome(config.encryptionKey)) {
      const key = parseKey(Redacted.value(config.encryptionKey.value))
      if (key === undefined) {
        return yield* Effect.die(
          new EncryptionKeyMissing("ENCRYPTION_KEY must be 64 hex characters or base64 of 32 bytes")
        )
      }
      return { key, source }
    }
    if (config.appEnv === "live") {
      return yield* Effect.die(new EncryptionKeyMissing("ENCRYPTION_KEY is required when APP_ENV=live"))
    }
    if (source.kind !== "file") return { key: randomBytes(32), source }
    if (!existsSync(source.file)) {
      mkdirSync(config.dataDir, { recursive: true })
      writeFileSync(source.file, randomBytes(32).toString("hex") + "\n", { mode: 0o600 })
      chmodSync(source.file, 0o600)
    }
    const key = parseKey(readFileSync(source.file, "utf8"))
    if (key === undefined)
      return yield* Effect.die(new EncryptionKeyMissing(`${source.file} does not hold a valid key`))
    return { key, source }
  })

export const describeKeySource = (source: KeySource) =>
  source.kind === "env"
    ? "as set"
    : source.kind === "file"
      ? `unset: the key generated in ${source.file} was used`
      : "unset: a random key for this process"

/**
 * ENCRYPTION_KEY (64 hex characters or base64 of 32 bytes). On sandbox, when unset, a key is generated once
 * into DATA_DIR/encryption.key and reused; on live it is required. The key must be the database's: the first process
 * on a database records a check value of its key, and a process with another key refuses to start
 * (./encryptionCheck.ts).
 */
export const EncryptionLive = Layer.effect(
  Encryption,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { key, source } = yield* loadKey(config)
    const encryption = makeEncryption(key)
    // A refusal ends the start-up with its message (main.ts prints it; the CLI too); so does a database error.
    yield* Effect.orDie(verifyKey(key, encryption, describeKeySource(source)))
    return encryption
  })
)
