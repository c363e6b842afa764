import { FetchHttpClient } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test"
import { Clock, ConfigProvider, Deferred, Effect, Exit } from "effect"
import * as nodeCrypto from "node:crypto"
import { makeRateLimiter } from "../../src/http/rateLimit.ts"
import { makePaystackAdapterEffect } from "../../src/payments/paystack/PaystackAdapter.ts"
import { makeSimulatedAdapter, sign } from "../../src/payments/simulated/SimulatedAdapter.ts"
import { AppConfig, AppConfigLive } from "../../src/platform/config.ts"
import { safeEqual, sha256Hex } from "../../src/platform/crypto.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { orgState } from "./support.ts"

/** A clock that stands still until moved: the rate limiter's refill happens only when the test says so. */
const frozenClock = (start = Date.UTC(2030, 0, 1)) => {
  let now = start
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now,
    currentTimeMillis: Effect.sync(() => now),
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: (duration) => Effect.sleep(duration).pipe(Effect.withClock(Clock.make()))
  }
  return { clock, advance: (ms: number) => void (now += ms) }
}

const expectErrorBody = async (response: Response, status: number, code: string) => {
  const body = (await response.json()) as Record<string, unknown>
  expect({ status: response.status, body }).toMatchObject({ status, body: { success: false, code } })
  expect(body.error).toBeString()
  expect(body.message).toBeString()
  expect(Object.keys(body).filter((k) => !["success", "error", "code", "message", "details"].includes(k))).toEqual([])
}

describe("the token bucket", () => {
  test("a burst, then one request per 1/rps; retry-after is the time to the next token", () => {
    const limiter = makeRateLimiter({ rps: 2, burst: 3 })
    expect([0, 1, 2, 3].map(() => limiter.take("k", 1000))).toEqual([0, 0, 0, 500])
    expect(limiter.take("k", 1250)).toBe(250)
    expect(limiter.take("k", 1500)).toBe(0)
    expect(limiter.take("k", 1500)).toBe(500)
    // Another key has its own bucket.
    expect(limiter.take("other", 1500)).toBe(0)
    // Idle long enough, the bucket is full again, never more.
    expect([0, 1, 2, 3].map(() => limiter.take("k", 100_000))).toEqual([0, 0, 0, 500])
    // A clock stepping back refills nothing.
    expect(limiter.take("k", 50_000)).toBe(500)
  })

  test("burst defaults to 2 × rps", () => {
    const limiter = makeRateLimiter({ rps: 5 })
    const answers = Array.from({ length: 11 }, () => limiter.take("k", 0))
    expect(answers.filter((a) => a === 0).length).toBe(10)
  })

  test("the map of keys stays bounded under a flood of distinct keys", () => {
    const limiter = makeRateLimiter({ rps: 1, maxKeys: 100 })
    for (let i = 0; i < 10_000; i++) expect(limiter.take(`key-${i}`, i)).toBe(0)
    expect(limiter.size()).toBeLessThanOrEqual(100)
  })
})

describe("configuration", () => {
  const load = (env: Record<string, string>) =>
    Effect.runPromiseExit(
      Effect.provide(AppConfig, AppConfigLive).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
      )
    )

  test("RATE_LIMIT_RPS, RATE_LIMIT_BURST and REQUEST_TIMEOUT_MS, with their defaults", async () => {
    const defaults = await load({})
    expect(defaults).toMatchObject({
      _tag: "Success",
      value: { rateLimitRps: 0, rateLimitBurst: 0, requestTimeoutMs: 30_000 }
    })
    const set = await load({ RATE_LIMIT_RPS: "50", RATE_LIMIT_BURST: "200", REQUEST_TIMEOUT_MS: "1500" })
    expect(set).toMatchObject({
      _tag: "Success",
      value: { rateLimitRps: 50, rateLimitBurst: 200, requestTimeoutMs: 1500 }
    })
    for (const bad of [{ RATE_LIMIT_RPS: "-1" }, { REQUEST_TIMEOUT_MS: "-5" }, { RATE_LIMIT_BURST: "many" }]) {
      expect(Exit.isFailure(await load(bad))).toBe(true)
    }
  })
})

describe("per-key rate limiting", () => {
  let server: TestServer
  const time = frozenClock()
  beforeAll(async () => {
    server = await startServer({ dataDir: ":memory:", rateLimitRps: 1, rateLimitBurst: 3 }, { clock: time.clock })
  })
  afterAll(() => server.close())

  test("past its burst a key gets 429 rate_limited with Retry-After; other keys and keyless routes go on", async () => {
    const a = await server.createOrg()
    const b = await server.createOrg()
    const list = (apiKey: string) => server.fetch("/v1/customers", { apiKey })
    for (let i = 0; i < 3; i++) expect((await list(a.apiKey)).status).toBe(200)
    const limited = await list(a.apiKey)
    expect(limited.headers.get("retry-after")).toBe("1")
    await expectErrorBody(limited, 429, "rate_limited")
    // Writes are refused the same way, and change nothing.
    const write = await post(server, a.apiKey, "/v1/customers", { email: "limited@example.com" })
    expect(write).toMatchObject({ status: 429, body: { code: "rate_limited" } })

    // Another organization's key has its own bucket; so has a second key of the same organization.
    for (let i = 0; i < 3; i++) expect((await list(b.apiKey)).status).toBe(200)
    expect((await list(b.apiKey)).status).toBe(429)
    // No key, no bucket: health, readiness and webhooks are not limited by anyone's key.
    for (let i = 0; i < 5; i++) expect((await server.fetch("/health")).status).toBe(200)

    // A second later (on the service's clock) one token is back.
    time.advance(1000)
    expect((await list(a.apiKey)).status).toBe(200)
    expect((await list(a.apiKey)).status).toBe(429)
    time.advance(10_000)
    const after = await post(server, a.apiKey, "/v1/customers", { email: "later@example.com" })
    expect(after.status).toBe(200)
    const customers = (await (await list(a.apiKey)).json()) as any
    expect(customers.data.map((c: any) => c.email)).toEqual(["later@example.com"])
  })

  test("unknown keys are limited too, so guessing is", async () => {
    const guess = "sk_test_" + "g".repeat(32)
    for (let i = 0; i < 3; i++) expect((await server.fetch("/v1/customers", { apiKey: guess })).status).toBe(401)
    await expectErrorBody(await server.fetch("/v1/customers", { apiKey: guess }), 429, "rate_limited")
  })
})

describe("without RATE_LIMIT_RPS", () => {
  test("nothing is limited", async () => {
    const server = await startServer({ dataDir: ":memory:" })
    try {
      const { apiKey } = await server.createOrg()
      const statuses = await Promise.all(
        Array.from({ length: 50 }, () => server.fetch("/v1/customers", { apiKey }).then((r) => r.status))
      )
      expect(new Set(statuses)).toEqual(new Set([200]))
    } finally {
      await server.close()
    }
  })
})

for (const database of databases()) {
  describe(`request timeout on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer({ ...database.config, requestTimeoutMs: 300 })
    })
    afterAll(() => server.close())

    /**
     * Holds the organization's row locked (PostgreSQL) or the database's only connection (SQLite) until released,
     * so a catalog sync of that organization cannot finish before the test lets it.
     */
    const holdLock = async (organizationId: string) => {
      const release = Effect.runSync(Deferred.make<void>())
      const locked = Effect.runSync(Deferred.make<void>())
      const held = server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* sql.onDialectOrElse({
                pg: () => sql`SELECT id FROM organizations WHERE id = ${organizationId} FOR UPDATE`,
                orElse: () => sql`UPDATE organizations SET updated_at = updated_at WHERE id = ${organizationId}`
              })
              yield* Deferred.succeed(locked, undefined)
              yield* Deferred.await(release)
            })
          )
        })
      )
      await Effect.runPromise(Deferred.await(locked))
      return async () => {
        await Effect.runPromise(Deferred.succeed(release, undefined))
        await held
      }
    }

    test("a request still running at REQUEST_TIMEOUT_MS answers 503 unavailable and changes nothing", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, { features: [{ slug: "before", name: "Before", type: "metered" }] })
      const before = await orgState(server, org.id)
      const release = await holdLock(org.id)
      let response: Response
      try {
        // The sync waits on the lock, which is released only after the answer: the answer is the timeout's.
        response = await server.fetch("/v1/sync", {
          method: "POST",
          apiKey: org.apiKey,
          body: JSON.stringify({ features: [{ slug: "during", name: "During", type: "metered" }], plans: [] }),
          signal: AbortSignal.timeout(20_000)
        })
      } finally {
        await release()
      }
      await expectErrorBody(response, 503, "unavailable")
      expect(await orgState(server, org.id)).toEqual(before)
      // Nothing is left stuck: the same sync now goes through.
      const retried = await post(server, org.apiKey, "/v1/sync", {
        features: [{ slug: "during", name: "During", type: "metered" }],
        plans: []
      })
      expect(retried.status).toBe(200)
    })
  })
}

describe("secrets are compared in constant time, and keys are never stored", () => {
  test("signatures: simulated and Paystack verify with crypto.timingSafeEqual; safeEqual is timingSafeEqual", async () => {
    const spy = spyOn(nodeCrypto, "timingSafeEqual")
    try {
      expect(safeEqual("abc", "abc")).toBe(true)
      expect(safeEqual("abc", "abd")).toBe(false)
      expect(spy).toHaveBeenCalledTimes(2)

      const body = new TextEncoder().encode(JSON.stringify({ id: "evt", type: "payment.succeeded" }))
      const simulated = makeSimulatedAdapter("http://localhost")
      const simAccount = { provider: "simulated" as const, secretKey: "s", webhookSecret: "whsec_sim" }
      const good = sign("whsec_sim", body)
      const bad = good.slice(0, -1) + (good.endsWith("0") ? "1" : "0")
      expect(
        await Effect.runPromise(simulated.verifySignature(simAccount, body, { "x-simulated-signature": good }, 0))
      ).toBe(true)
      expect(
        await Effect.runPromise(simulated.verifySignature(simAccount, body, { "x-simulated-signature": bad }, 0))
      ).toBe(false)
      expect(spy).toHaveBeenCalledTimes(4)

      const paystack = await Effect.runPromise(makePaystackAdapterEffect().pipe(Effect.provide(FetchHttpClient.layer)))
      const psAccount = { provider: "paystack" as const, secretKey: "sk_test_ps", webhookSecret: null }
      const psGood = nodeCrypto.createHmac("sha512", "sk_test_ps").update(body).digest("hex")
      const psBad = psGood.slice(0, -1) + (psGood.endsWith("0") ? "1" : "0")
      expect(
        await Effect.runPromise(paystack.verifySignature(psAccount, body, { "x-paystack-signature": psGood }, 0))
      ).toBe(true)
      expect(
        await Effect.runPromise(paystack.verifySignature(psAccount, body, { "x-paystack-signature": psBad }, 0))
      ).toBe(false)
      expect(spy).toHaveBeenCalledTimes(6)
    } finally {
      spy.mockRestore()
    }
  })

  for (const database of databases()) {
    test(`API keys are stored only as their SHA-256 on ${database.name}`, async () => {
      const server = await startServer(database.config)
      try {
        const org = await server.createOrg()
        const state = JSON.stringify(await orgState(server, org.id))
        expect(state).not.toContain(org.apiKey)
        expect(state).not.toContain(org.apiKey.slice(12))
        expect(state).toContain(sha256Hex(org.apiKey))
      } finally {
        await server.close()
      }
    })
  }
})

describe("request headers", () => {
  test("over 8 KiB: 400 in the error body; over Bun's 16 KiB: refused by Bun, never a 5xx; nothing changed", async () => {
    const server = await startServer({ dataDir: ":memory:" })
    try {
      const org = await server.createOrg()
      const before = await orgState(server, org.id)
      const body = JSON.stringify({ email: "big@example.com" })
      const send = (padding: number) =>
        server.fetch("/v1/customers", {
          method: "POST",
          apiKey: org.apiKey,
          body,
          headers: { "x-padding": "p".repeat(padding) }
        })
      await expectErrorBody(await send(9 * 1024), 400, "invalid_request")
      const huge = await send(20 * 1024)
      expect(huge.status).toBeGreaterThanOrEqual(400)
      expect(huge.status).toBeLessThan(500)
      expect(await orgState(server, org.id)).toEqual(before)
      expect((await send(1024)).status).toBe(200)
    } finally {
      await server.close()
    }
  })
})
