import { describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { makeEncryption, parseKey } from "./encryption.ts"

describe("encryption at rest", () => {
  const enc = makeEncryption(randomBytes(32))

  test("round trips and never stores the plaintext", () => {
    const stored = enc.encrypt("sk_live_secret")
    expect(stored).toStartWith("v1:")
    expect(stored).not.toContain("sk_live_secret")
    expect(enc.decrypt(stored)).toBe("sk_live_secret")
    expect(enc.encrypt("same")).not.toBe(enc.encrypt("same"))
  })

  test("a tampered ciphertext or another key fails", () => {
    const stored = enc.encrypt("secret")
    const raw = Buffer.from(stored.slice(3), "base64")
    raw[raw.length - 1]! ^= 1
    expect(() => enc.decrypt("v1:" + raw.toString("base64"))).toThrow()
    expect(() => makeEncryption(randomBytes(32)).decrypt(stored)).toThrow()
  })

  test("keys are 64 hex characters or base64 of 32 bytes", () => {
    expect(parseKey("ab".repeat(32))?.length).toBe(32)
    expect(parseKey(randomBytes(32).toString("base64"))?.length).toBe(32)
    expect(parseKey("short")).toBeUndefined()
  })
})
