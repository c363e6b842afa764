import { Context, Effect, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { AppConfig } from "./config.ts"

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

/**
 * ENCRYPTION_KEY (64 hex characters or base64 of 32 bytes). On sandbox, when unset, a key is generated once
 * into DATA_DIR/encryption.key and reused; on live it is required.
 */
export const EncryptionLive = Layer.effect(
  Encryption,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const configured = Option.map(config.encryptionKey, Redacted.value)
    if (Option.isSome(configured)) {
      const key = parseKey(configured.value)
      if (key === undefined) {
        return yield* Effect.die(
          new EncryptionKeyMissing("ENCRYPTION_KEY must be 64 hex characters or base64 of 32 bytes")
        )
      }
      return makeEncryption(key)
    }
    if (config.appEnv === "live") {
      return yield* Effect.die(new EncryptionKeyMissing("ENCRYPTION_KEY is required when APP_ENV=live"))
    }
    if (config.dataDir === ":memory:") return makeEncryption(randomBytes(32))
    const file = join(config.dataDir, "encryption.key")
    if (!existsSync(file)) {
      mkdirSync(config.dataDir, { recursive: true })
      writeFileSync(file, randomBytes(32).toString("hex") + "\n", { mode: 0o600 })
      chmodSync(file, 0o600)
    }
    const key = parseKey(readFileSync(file, "utf8"))
    if (key === undefined) return yield* Effect.die(new EncryptionKeyMissing(`${file} does not hold a valid key`))
    return makeEncryption(key)
  })
)
