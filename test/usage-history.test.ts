import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, ok, startServer, type TestServer } from "./support/harness.ts"

/**
 * GET /v1/customers/{id}/usage/history (spec 4.12, decisions.md §9) with events placed at exact instants (a shifted
 * clock), just before and just after local midnight in zones with 45- and 30-minute offsets, +14, and London across
 * both daylight-saving changes.
 */
const catalog = {
  features: [
    { slug: "api-calls", name: "API calls", type: "metered", unit: "calls" },
    { slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" },
    { slug: "storage", name: "Storage", type: "metered" }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      features: [
        { slug: "api-calls", limit: null, reset: "none" },
        { slug: "tokens", limit: null, reset: "none" },
        { slug: "storage", limit: null, reset: "none" }
      ]
    }
  ]
}

const utc = (iso: string) => Date.parse(iso)
/** The instant a second before another. */
const justBefore = (iso: string) => utc(iso) - 1000

interface Series {
  readonly bucket: string
  readonly value: number
}
interface History {
  customer: { id: string }
  query: {
    range: { from: string; to: string }
    granularity: string
    feature?: string
    groupBy: string
    timezone: string
  }
  totals: { usage: number; records: number }
  series: Array<Series>
  breakdown: Array<{
    feature: { id: string; slug: string; name: string; unit: string }
    totals: History["totals"]
    series: Array<Series>
  }>
}

const sum = (series: ReadonlyArray<Series>) => series.reduce((a, s) => a + s.value, 0)

/** totals = sum of series, everywhere; the breakdown adds up to the total. */
const expectConsistent = (h: History) => {
  expect(h.totals.usage).toBe(sum(h.series))
  for (const b of h.breakdown) {
    expect(b.totals.usage).toBe(sum(b.series))
    expect(b.series.map((s) => s.bucket)).toEqual(h.series.map((s) => s.bucket))
  }
  if (h.breakdown.length > 0 && h.query.feature === undefined) {
    expect(h.breakdown.reduce((a, b) => a + b.totals.records, 0)).toBe(h.totals.records)
    h.series.forEach((s, i) => expect(h.breakdown.reduce((a, b) => a + b.series[i]!.value, 0)).toBe(s.value))
  }
}

const values = (h: History) => h.series.map((s) => s.value)
const buckets = (h: History) => h.series.map((s) => s.bucket)

for (const database of databases()) {
  describe(`usage history on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    /** A fresh organization with the catalog and customer `cust` (created before every event placed). */
    const setup = async (createdAt = utc("2025-06-01T00:00:00Z")) => {
      clock.set(createdAt)
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const created = await post(server, org.apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      expect(created.status).toBe(200)
      /** Tracks `value` of a feature at an exact instant. */
      const trackAt = async (instant: number, value: number, feature = "api-calls") => {
        clock.set(instant)
        const r = await post(server, org.apiKey, "/v1/track", { customer: "cust", feature, value })
        expect({ status: r.status, allowed: r.body.allowed }).toEqual({ status: 200, allowed: true })
      }
      const raw = async (query: Record<string, string>, customer = "cust", apiKey = org.apiKey) => {
        const response = await server.fetch(`/v1/customers/${customer}/usage/history?${new URLSearchParams(query)}`, {
          apiKey
        })
        return { status: response.status, body: (await response.json()) as any }
      }
      const history = async (query: Record<string, string>): Promise<History> => {
        const r = await raw(query)
        expect(r.status).toBe(200)
        expectConsistent(r.body)
        return r.body
      }
      return { org, customerId: created.body.id as string, trackAt, raw, history }
    }

    const custom = (
      from: string,
      to: string,
      granularity: string,
      timezone: string,
      extra: Record<string, string> = {}
    ) => ({
      range: "custom",
      from,
      to,
      granularity,
      timezone,
      ...extra
    })

    /**
     * 2026-06-01 is a Monday and a 1st: its local midnight ends a day, a week and a month at once. One event a
     * second before it, two at and after it, one later in the week.
     */
    const midnightOfJune = async (timezone: string, midnightUtc: string) => {
      const { trackAt, history } = await setup()
      await trackAt(justBefore(midnightUtc), 1) // 2026-05-31 23:59:59 local
      await trackAt(utc(midnightUtc), 2) // 2026-06-01 00:00:00 local
      await trackAt(utc(midnightUtc) + 14 * 60_000 + 59_000, 4) // 00:14:59, the same 15-minute rollup
      await trackAt(utc(midnightUtc) + 2 * 86_400_000 + 3_600_000, 8) // Wednesday 2026-06-03 01:00 local

      const days = await history(custom("2026-05-30", "2026-06-03", "day", timezone))
      expect(days.series).toEqual([
        { bucket: "2026-05-30", value: 0 },
        { bucket: "2026-05-31", value: 1 },
        { bucket: "2026-06-01", value: 6 },
        { bucket: "2026-06-02", value: 0 },
        { bucket: "2026-06-03", value: 8 }
      ])
      expect(days.totals).toEqual({ usage: 15, records: 4 })

      const weeks = await history(custom("2026-05-25", "2026-06-07", "week", timezone))
      expect(weeks.series).toEqual([
        { bucket: "2026-05-25", value: 1 },
        { bucket: "2026-06-01", value: 14 }
      ])
      expect(weeks.totals).toEqual({ usage: 15, records: 4 })

      const months = await history(custom("2026-05-01", "2026-06-30", "month", timezone))
      expect(months.series).toEqual([
        { bucket: "2026-05-01", value: 1 },
        { bucket: "2026-06-01", value: 14 }
      ])
      expect(months.totals).toEqual({ usage: 15, records: 4 })
      expect(months.query).toEqual({
        range: { from: "2026-05-01", to: "2026-06-30" },
        granularity: "month",
        groupBy: "total",
        timezone
      })
      return { history }
    }

    test("Asia/Kathmandu (+05:45): midnight is 18:15 UTC the day before", async () => {
      const { history } = await midnightOfJune("Asia/Kathmandu", "2026-05-31T18:15:00Z")
      // The same events in UTC days: all four fall on 2026-05-31 or later by the UTC calendar.
      const inUtc = await history(custom("2026-05-30", "2026-06-03", "day", "UTC"))
      expect(values(inUtc)).toEqual([0, 7, 0, 8, 0])
    })

    test("America/St_Johns (−02:30 in summer): midnight is 02:30 UTC", async () => {
      const { history } = await midnightOfJune("America/St_Johns", "2026-06-01T02:30:00Z")
      expect(values(await history(custom("2026-05-30", "2026-06-03", "day", "UTC")))).toEqual([0, 0, 7, 0, 8])
    })

    test("America/St_Johns (−03:30 in winter): midnight is 03:30 UTC; 2025-12-01 is a Monday and a 1st", async () => {
      const { trackAt, history } = await setup()
      await trackAt(utc("2025-12-01T03:29:59Z"), 1) // 2025-11-30 23:59:59 local
      await trackAt(utc("2025-12-01T03:30:00Z"), 2) // 2025-12-01 00:00:00 local
      await trackAt(utc("2025-12-02T03:29:00Z"), 4) // 2025-12-01 23:59 local
      expect(values(await history(custom("2025-11-30", "2025-12-02", "day", "America/St_Johns")))).toEqual([1, 6, 0])
      expect(values(await history(custom("2025-11-24", "2025-12-07", "week", "America/St_Johns")))).toEqual([1, 6])
      const months = await history(custom("2025-11-01", "2025-12-31", "month", "America/St_Johns"))
      expect(months.series).toEqual([
        { bucket: "2025-11-01", value: 1 },
        { bucket: "2025-12-01", value: 6 }
      ])
      expect(months.totals).toEqual({ usage: 7, records: 3 })
    })

    test("Pacific/Kiritimati (+14): midnight is 10:00 UTC the day before", async () => {
      const { history } = await midnightOfJune("Pacific/Kiritimati", "2026-05-31T10:00:00Z")
      expect(values(await history(custom("2026-05-30", "2026-06-03", "day", "UTC")))).toEqual([0, 7, 0, 8, 0])
    })

    test("Europe/London, spring forward: 2026-03-29 is a 23-hour day, counted once", async () => {
      const { trackAt, history } = await setup()
      await trackAt(utc("2026-03-28T23:59:59Z"), 1) // Sat 23:59:59 GMT
      await trackAt(utc("2026-03-29T00:00:00Z"), 2) // Sun 00:00 GMT
      await trackAt(utc("2026-03-29T00:59:59Z"), 4) // 00:59:59 GMT, the last second before the jump
      await trackAt(utc("2026-03-29T01:00:00Z"), 8) // 02:00 BST
      await trackAt(utc("2026-03-29T22:59:59Z"), 16) // Sun 23:59:59 BST
      await trackAt(utc("2026-03-29T23:00:00Z"), 32) // Mon 00:00 BST
      await trackAt(utc("2026-03-31T22:59:59Z"), 64) // Tue 31 March 23:59:59 BST
      await trackAt(utc("2026-03-31T23:00:00Z"), 128) // Wed 1 April 00:00 BST

      const days = await history(custom("2026-03-28", "2026-04-01", "day", "Europe/London"))
      expect(days.series).toEqual([
        { bucket: "2026-03-28", value: 1 },
        { bucket: "2026-03-29", value: 30 },
        { bucket: "2026-03-30", value: 32 },
        { bucket: "2026-03-31", value: 64 },
        { bucket: "2026-04-01", value: 128 }
      ])
      expect(days.totals).toEqual({ usage: 255, records: 8 })
      // In UTC days the 23:00 events move back a day.
      expect(values(await history(custom("2026-03-28", "2026-04-01", "day", "UTC")))).toEqual([1, 62, 0, 192, 0])
      // Weeks: Monday 2026-03-23 to Sunday 29th (ending at 23:00 UTC), then from Monday 30th.
      expect((await history(custom("2026-03-23", "2026-04-05", "week", "Europe/London"))).series).toEqual([
        { bucket: "2026-03-23", value: 31 },
        { bucket: "2026-03-30", value: 224 }
      ])
      expect((await history(custom("2026-03-01", "2026-04-30", "month", "Europe/London"))).series).toEqual([
        { bucket: "2026-03-01", value: 127 },
        { bucket: "2026-04-01", value: 128 }
      ])
    })

    test("Europe/London, fall back: 2026-10-25 is a 25-hour day, its repeated hour counted once", async () => {
      const { trackAt, history } = await setup()
      await trackAt(utc("2026-10-24T22:59:59Z"), 1) // Sat 23:59:59 BST
      await trackAt(utc("2026-10-24T23:00:00Z"), 2) // Sun 00:00 BST
      await trackAt(utc("2026-10-25T00:30:00Z"), 4) // 01:30 BST (first time)
      await trackAt(utc("2026-10-25T01:30:00Z"), 8) // 01:30 GMT (second time)
      await trackAt(utc("2026-10-25T23:59:59Z"), 16) // Sun 23:59:59 GMT
      await trackAt(utc("2026-10-26T00:00:00Z"), 32) // Mon 00:00 GMT
      await trackAt(utc("2026-10-31T23:59:59Z"), 64) // Sat 31 October 23:59:59 GMT
      await trackAt(utc("2026-11-01T00:00:00Z"), 128) // Sun 1 November 00:00 GMT

      const days = await history(custom("2026-10-24", "2026-10-26", "day", "Europe/London"))
      expect(days.series).toEqual([
        { bucket: "2026-10-24", value: 1 },
        { bucket: "2026-10-25", value: 30 },
        { bucket: "2026-10-26", value: 32 }
      ])
      expect(days.totals).toEqual({ usage: 63, records: 6 })
      expect(values(await history(custom("2026-10-24", "2026-10-26", "day", "UTC")))).toEqual([3, 28, 32])
      // Weeks: Monday 2026-10-19 to the 25-hour Sunday, then from Monday the 26th (which holds Saturday the 31st).
      expect((await history(custom("2026-10-19", "2026-11-01", "week", "Europe/London"))).series).toEqual([
        { bucket: "2026-10-19", value: 31 },
        { bucket: "2026-10-26", value: 224 }
      ])
      const months = await history(custom("2026-10-01", "2026-11-30", "month", "Europe/London"))
      expect(months.series).toEqual([
        { bucket: "2026-10-01", value: 127 },
        { bucket: "2026-11-01", value: 128 }
      ])
      expect(months.totals).toEqual({ usage: 255, records: 8 })
    })

    test("a day the zone skipped is an empty bucket (Kiritimati went from −10 to +14 over 1994-12-31)", async () => {
      const { trackAt, history } = await setup(utc("1994-12-01T00:00:00Z"))
      await trackAt(utc("1994-12-31T09:59:59Z"), 1) // 1994-12-30 23:59:59 at −10
      await trackAt(utc("1994-12-31T10:00:00Z"), 2) // 1995-01-01 00:00:00 at +14
      const days = await history(custom("1994-12-30", "1995-01-01", "day", "Pacific/Kiritimati"))
      expect(days.series).toEqual([
        { bucket: "1994-12-30", value: 1 },
        { bucket: "1994-12-31", value: 0 },
        { bucket: "1995-01-01", value: 2 }
      ])
      expect(days.totals).toEqual({ usage: 3, records: 2 })
    })

    test("presets end today in the zone, today included; defaults are 30d, day, total, UTC", async () => {
      const { trackAt, history, customerId } = await setup()
      await trackAt(utc("2026-05-26T18:15:00Z"), 1) // 2026-05-27 00:00 in Kathmandu: the first day of the 7d below
      await trackAt(utc("2026-05-26T18:14:59Z"), 2) // 2026-05-26 23:59:59 there: outside it
      await trackAt(utc("2026-06-02T18:14:59Z"), 4) // 2026-06-02 23:59:59 there: "now", today
      const week = await history({ range: "7d", timezone: "Asia/Kathmandu" })
      expect(week.query.range).toEqual({ from: "2026-05-27", to: "2026-06-02" })
      expect(buckets(week)).toEqual([
        "2026-05-27",
        "2026-05-28",
        "2026-05-29",
        "2026-05-30",
        "2026-05-31",
        "2026-06-01",
        "2026-06-02"
      ])
      expect(values(week)).toEqual([1, 0, 0, 0, 0, 0, 4])
      expect(week.totals).toEqual({ usage: 5, records: 2 })

      const byDefault = await history({})
      expect(byDefault.customer).toEqual({ id: customerId })
      expect(byDefault.query).toEqual({
        range: { from: "2026-05-04", to: "2026-06-02" },
        granularity: "day",
        groupBy: "total",
        timezone: "UTC"
      })
      expect(byDefault.series).toHaveLength(30)
      expect(byDefault.totals).toEqual({ usage: 7, records: 3 })
      expect(byDefault.breakdown).toEqual([])

      const quarter = await history({ range: "90d", granularity: "week", timezone: "asia/kathmandu" })
      expect(quarter.query.timezone).toBe("Asia/Kathmandu")
      expect(quarter.query.range).toEqual({ from: "2026-03-05", to: "2026-06-02" })
      expect(quarter.series[0]!.bucket).toBe("2026-03-05")
      expect(quarter.series[1]!.bucket).toBe("2026-03-09")
      expect(quarter.totals).toEqual({ usage: 7, records: 3 })

      // from/to alone read as a custom range.
      expect((await history({ from: "2026-05-26", to: "2026-05-27", timezone: "Asia/Kathmandu" })).series).toEqual([
        { bucket: "2026-05-26", value: 2 },
        { bucket: "2026-05-27", value: 1 }
      ])
    })

    test("groupBy=feature: each feature with usage in range, zero-filled, adding up to the total", async () => {
      const { trackAt, history } = await setup()
      await trackAt(utc("2026-06-01T10:00:00Z"), 3, "api-calls")
      await trackAt(utc("2026-06-01T11:00:00Z"), 2.5, "tokens")
      await trackAt(utc("2026-06-03T11:00:00Z"), 0.25, "tokens")
      await trackAt(utc("2026-06-03T11:05:00Z"), 0.1, "tokens")
      await trackAt(utc("2026-06-03T11:06:00Z"), 0.2, "tokens")
      await trackAt(utc("2026-07-01T11:00:00Z"), 100, "storage") // outside the range below

      const h = await history(custom("2026-06-01", "2026-06-03", "day", "UTC", { groupBy: "feature" }))
      expect(h.totals).toEqual({ usage: 6.05, records: 5 })
      expect(values(h)).toEqual([5.5, 0, 0.55])
      expect(h.breakdown.map((b) => b.feature.slug)).toEqual(["api-calls", "tokens"])
      expect(h.breakdown[0]).toMatchObject({
        feature: { slug: "api-calls", name: "API calls", unit: "calls" },
        totals: { usage: 3, records: 1 },
        series: [
          { bucket: "2026-06-01", value: 3 },
          { bucket: "2026-06-02", value: 0 },
          { bucket: "2026-06-03", value: 0 }
        ]
      })
      expect(h.breakdown[0]!.feature.id).toMatch(/^feat_/)
      expect(h.breakdown[1]).toMatchObject({
        feature: { slug: "tokens", name: "Tokens", unit: "tokens" },
        totals: { usage: 3.05, records: 4 },
        series: [
          { bucket: "2026-06-01", value: 2.5 },
          { bucket: "2026-06-02", value: 0 },
          { bucket: "2026-06-03", value: 0.55 }
        ]
      })

      // A feature with no unit reads as "" (storage, in a range holding its event).
      const storage = await history(custom("2026-07-01", "2026-07-01", "month", "UTC", { groupBy: "feature" }))
      expect(storage.breakdown).toEqual([
        {
          feature: { id: expect.any(String), slug: "storage", name: "Storage", unit: "" },
          totals: { usage: 100, records: 1 },
          series: [{ bucket: "2026-07-01", value: 100 }]
        }
      ])
    })

    test("the feature filter, by slug or id; a filtered feature without usage is still broken down", async () => {
      const { trackAt, history, raw } = await setup()
      await trackAt(utc("2026-06-01T10:00:00Z"), 3, "api-calls")
      await trackAt(utc("2026-06-02T11:00:00Z"), 2, "tokens")
      const tokens = await history(custom("2026-06-01", "2026-06-02", "day", "UTC", { feature: "tokens" }))
      expect(tokens.query.feature).toBe("tokens")
      expect(tokens.series).toEqual([
        { bucket: "2026-06-01", value: 0 },
        { bucket: "2026-06-02", value: 2 }
      ])
      expect(tokens.totals).toEqual({ usage: 2, records: 1 })
      expect(tokens.breakdown).toEqual([])

      const grouped = await history(
        custom("2026-06-01", "2026-06-02", "day", "UTC", { feature: "tokens", groupBy: "feature" })
      )
      expect(grouped.breakdown).toHaveLength(1)
      const tokensId = grouped.breakdown[0]!.feature.id
      const byId = await history(custom("2026-06-01", "2026-06-02", "day", "UTC", { feature: tokensId }))
      expect(byId.query.feature).toBe("tokens")
      expect(byId.totals).toEqual({ usage: 2, records: 1 })

      const empty = await history(
        custom("2026-06-01", "2026-06-02", "day", "UTC", { feature: "storage", groupBy: "feature" })
      )
      expect(empty.totals).toEqual({ usage: 0, records: 0 })
      expect(empty.breakdown).toMatchObject([{ feature: { slug: "storage" }, totals: { usage: 0, records: 0 } }])

      const unknown = await raw(custom("2026-06-01", "2026-06-02", "day", "UTC", { feature: "nope" }))
      expect(unknown).toMatchObject({ status: 404, body: { success: false, code: "feature_not_found" } })
    })

    test("the typed client needs no defaults", async () => {
      const { org, trackAt } = await setup()
      await trackAt(utc("2026-06-02T10:00:00Z"), 5)
      const client = await server.client(org.apiKey)
      const h = await ok(client.usage.getUsageHistory({ path: { id: "cust@example.com" }, urlParams: { range: "7d" } }))
      expect(h.query).toEqual({
        range: { from: "2026-05-27", to: "2026-06-02" },
        granularity: "day",
        groupBy: "total",
        timezone: "UTC"
      })
      expect(h.totals).toEqual({ usage: 5, records: 1 })
    })

    test("400 invalid_request with details for every bad query", async () => {
      const { raw } = await setup()
      const cases: Array<[Record<string, string>, ReadonlyArray<string>]> = [
        [{ timezone: "Mars/Olympus" }, ["timezone"]],
        [{ timezone: "+05:30" }, ["timezone"]],
        [custom("2026-02-30", "2026-03-01", "day", "UTC"), ["from"]],
        [custom("2026-03-10", "2026-03-09", "day", "UTC"), ["from"]],
        [custom("2025-01-01", "2026-01-02", "day", "UTC"), ["to"]],
        [{ range: "custom" }, ["from", "to"]],
        [{ range: "custom", from: "2026-03-01" }, ["to"]],
        [{ range: "custom", to: "2026-03-01" }, ["from"]],
        [{ range: "30d", from: "2026-03-01" }, ["from"]],
        [{ range: "custom", from: "2026-3-1", to: "2026-03-02" }, ["from"]],
        [{ range: "1y" }, ["range"]],
        [{ granularity: "hour" }, ["granularity"]],
        [{ groupBy: "plan" }, ["groupBy"]],
        [{ range: "custom", from: "2026-02-30", to: "2026-03-01", timezone: "Nowhere/Land" }, ["timezone", "from"]]
      ]
      for (const [query, paths] of cases) {
        const r = await raw(query)
        expect({ query, status: r.status, code: r.body.code, success: r.body.success }).toEqual({
          query,
          status: 400,
          code: "invalid_request",
          success: false
        })
        expect(r.body.details.map((d: { path: string }) => d.path).sort()).toEqual([...paths].sort())
      }
      // A 366-day custom range is fine.
      expect((await raw(custom("2024-01-01", "2024-12-31", "day", "UTC"))).status).toBe(200)
    })

    test("customers: by id, external id or email; unknown and other organizations' are 404", async () => {
      const { trackAt, raw, customerId } = await setup()
      await trackAt(utc("2026-06-02T10:00:00Z"), 5)
      const range = custom("2026-06-02", "2026-06-02", "day", "UTC")
      for (const ref of ["cust", customerId, "CUST@example.com"]) {
        const r = await raw(range, encodeURIComponent(ref))
        expect({ status: r.status, customer: r.body.customer, usage: r.body.totals?.usage }).toEqual({
          status: 200,
          customer: { id: customerId },
          usage: 5
        })
      }
      expect(await raw(range, "nobody")).toMatchObject({ status: 404, body: { code: "customer_not_found" } })
      const other = await server.createOrg()
      await syncCatalog(server, other.apiKey, catalog)
      for (const ref of ["cust", customerId]) {
        expect(await raw(range, ref, other.apiKey)).toMatchObject({
          status: 404,
          body: { success: false, code: "customer_not_found" }
        })
      }
      expect((await raw(range, "cust", "sk_test_nope")).status).toBe(401)
    })
  })
}
