import { describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { describeKeyRevocations, keyRevocationsOf } from "./keyRevocations.ts"

const [pooledUrl, directUrl] = [Redacted.make("postgres://db/billing"), Redacted.make("postgres://direct/billing")]
const url = Option.some(pooledUrl)
const direct = Option.some(directUrl)

describe("how a process hears of revoked keys", () => {
  test("SQLite: the cache's expiry alone", () => {
    expect(keyRevocationsOf({ databaseUrl: Option.none(), databaseDirectUrl: Option.none() }, false)._tag).toBe(
      "Expiry"
    )
  })

  test("PostgreSQL itself: LISTEN over DATABASE_URL", () => {
    const how = keyRevocationsOf({ databaseUrl: url, databaseDirectUrl: Option.none() }, false)
    expect(how).toEqual({ _tag: "Listen", url: pooledUrl, direct: false })
    expect(describeKeyRevocations(how)).toBe("LISTEN over DATABASE_URL")
  })

  test("a direct URL is LISTEN's, pooler or not", () => {
    for (const pooled of [true, false]) {
      const how = keyRevocationsOf({ databaseUrl: url, databaseDirectUrl: direct }, pooled)
      expect(how).toEqual({ _tag: "Listen", url: directUrl, direct: true })
    }
  })

  test("behind a transaction pooler without one: polled, and the log line says why", () => {
    const how = keyRevocationsOf({ databaseUrl: url, databaseDirectUrl: Option.none() }, true)
    expect(how._tag).toBe("Poll")
    expect(describeKeyRevocations(how)).toContain("no DATABASE_DIRECT_URL")
  })
})
