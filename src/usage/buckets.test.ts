import { describe, expect, test } from "bun:test"
import {
  type BucketPlan,
  type BucketQuery,
  bucketIndexOf,
  DAY_MS,
  formatDate,
  localDayOf,
  mondayOf,
  offsetAt,
  parseDate,
  planBuckets,
  resolveTimeZone,
  startOfLocalDay
} from "./buckets.ts"

const HOUR = 3_600_000
const utc = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()
const day = (date: string) => parseDate(date)!
const midnight = (tz: string, date: string) => iso(startOfLocalDay(tz, day(date)))
const hoursOf = (tz: string, date: string) =>
  (startOfLocalDay(tz, day(date) + 1) - startOfLocalDay(tz, day(date))) / HOUR

const plan = (q: Partial<BucketQuery>): BucketPlan => {
  const r = planBuckets({ range: "30d", granularity: "day", timezone: "UTC", now: utc("2026-03-10T12:00:00Z"), ...q })
  if (r._tag !== "Ok") throw new Error(`expected a plan, got ${JSON.stringify(r.issues)}`)
  return r.plan
}
const issues = (q: Partial<BucketQuery>) => {
  const r = planBuckets({
    range: "custom",
    granularity: "day",
    timezone: "UTC",
    now: utc("2026-03-10T12:00:00Z"),
    ...q
  })
  if (r._tag !== "Invalid") throw new Error(`expected issues, got ${JSON.stringify(r.plan.from)}..${r.plan.to}`)
  return r.issues
}
const labels = (p: BucketPlan) => p.buckets.map((b) => b.label)

describe("local midnight in UTC", () => {
  test("Asia/Kathmandu (+05:45): 18:15 UTC the day before", () => {
    expect(midnight("Asia/Kathmandu", "2026-03-10")).toBe("2026-03-09T18:15:00.000Z")
    expect(offsetAt("Asia/Kathmandu", utc("2026-03-10T00:00:00Z"))).toBe(5 * HOUR + 45 * 60_000)
  })

  test("America/St_Johns (−03:30 standard, −02:30 daylight)", () => {
    expect(midnight("America/St_Johns", "2026-01-10")).toBe("2026-01-10T03:30:00.000Z")
    expect(midnight("America/St_Johns", "2026-07-10")).toBe("2026-07-10T02:30:00.000Z")
    // Daylight time starts Sunday 2026-03-08 at 02:00 local (a 23-hour day) and ends 2026-11-01 (25 hours).
    expect(hoursOf("America/St_Johns", "2026-03-08")).toBe(23)
    expect(hoursOf("America/St_Johns", "2026-11-01")).toBe(25)
  })

  test("Pacific/Kiritimati (+14): 10:00 UTC the day before", () => {
    expect(midnight("Pacific/Kiritimati", "2026-05-01")).toBe("2026-04-30T10:00:00.000Z")
  })

  test("Europe/London: the spring-forward day is 23 hours, the fall-back day 25", () => {
    expect(midnight("Europe/London", "2026-03-29")).toBe("2026-03-29T00:00:00.000Z")
    expect(midnight("Europe/London", "2026-03-30")).toBe("2026-03-29T23:00:00.000Z")
    expect(hoursOf("Europe/London", "2026-03-29")).toBe(23)
    expect(midnight("Europe/London", "2026-10-25")).toBe("2026-10-24T23:00:00.000Z")
    expect(midnight("Europe/London", "2026-10-26")).toBe("2026-10-26T00:00:00.000Z")
    expect(hoursOf("Europe/London", "2026-10-25")).toBe(25)
    expect(hoursOf("Europe/London", "2026-07-01")).toBe(24)
  })

  test("a skipped midnight starts the day at the transition (America/Santiago, 2026-09-06 00:00 → 01:00)", () => {
    expect(midnight("America/Santiago", "2026-09-06")).toBe("2026-09-06T04:00:00.000Z")
    expect(hoursOf("America/Santiago", "2026-09-06")).toBe(23)
  })

  test("a skipped day is an empty interval (Kiritimati jumped from −10 to +14 over 1994-12-31)", () => {
    expect(hoursOf("Pacific/Kiritimati", "1994-12-31")).toBe(0)
    expect(midnight("Pacific/Kiritimati", "1995-01-01")).toBe("1994-12-31T10:00:00.000Z")
  })

  test("the local date of an instant", () => {
    expect(formatDate(localDayOf("Asia/Kathmandu", utc("2026-03-09T18:14:59Z")))).toBe("2026-03-09")
    expect(formatDate(localDayOf("Asia/Kathmandu", utc("2026-03-09T18:15:00Z")))).toBe("2026-03-10")
    expect(formatDate(localDayOf("Pacific/Kiritimati", utc("2026-04-30T10:00:00Z")))).toBe("2026-05-01")
  })
})

describe("time zones", () => {
  test("IANA names in any case, aliases and UTC; canonical spelling back", () => {
    expect(resolveTimeZone("UTC")).toBe("UTC")
    expect(resolveTimeZone("utc")).toBe("UTC")
    expect(resolveTimeZone("asia/kathmandu")).toBe("Asia/Kathmandu")
    expect(resolveTimeZone("Africa/Lagos")).toBe("Africa/Lagos")
    expect(resolveTimeZone("Asia/Katmandu")).toBeDefined()
  })

  test("unknown names and offsets are refused", () => {
    for (const bad of ["Mars/Olympus", "Europe/Lundon", "+05:30", "-03:30", "", "GMT+5:45", "../etc"]) {
      expect(resolveTimeZone(bad)).toBeUndefined()
    }
  })
})

describe("dates", () => {
  test("calendar dates only", () => {
    expect(formatDate(day("2026-02-28"))).toBe("2026-02-28")
    expect(formatDate(day("2024-02-29"))).toBe("2024-02-29")
    for (const bad of [
      "2026-02-30",
      "2026-02-29",
      "2026-13-01",
      "2026-00-10",
      "2026-04-31",
      "2026-1-01",
      "1969-12-31",
      "x"
    ]) {
      expect(parseDate(bad)).toBeUndefined()
    }
  })

  test("weeks start on Monday", () => {
    expect(formatDate(mondayOf(day("2026-03-25")))).toBe("2026-03-23") // a Wednesday
    expect(formatDate(mondayOf(day("2026-03-23")))).toBe("2026-03-23") // a Monday
    expect(formatDate(mondayOf(day("2026-03-29")))).toBe("2026-03-23") // a Sunday
    expect(formatDate(mondayOf(day("1970-01-01")))).toBe("1969-12-29")
  })
})

describe("presets end today in the zone, today included", () => {
  test("7d, 30d, 90d", () => {
    const now = utc("2026-03-10T12:00:00Z")
    expect(plan({ range: "7d", now })).toMatchObject({ from: "2026-03-04", to: "2026-03-10" })
    expect(plan({ range: "7d", now }).buckets).toHaveLength(7)
    expect(plan({ range: "30d", now })).toMatchObject({ from: "2026-02-09", to: "2026-03-10" })
    expect(plan({ range: "30d", now }).buckets).toHaveLength(30)
    expect(plan({ range: "90d", now })).toMatchObject({ from: "2025-12-11", to: "2026-03-10" })
    expect(plan({ range: "90d", now }).buckets).toHaveLength(90)
  })

  test("today is the zone's today", () => {
    // 18:14:59 UTC is 23:59:59 in Kathmandu; a second later it is tomorrow there.
    expect(plan({ range: "7d", timezone: "Asia/Kathmandu", now: utc("2026-03-10T18:14:59Z") }).to).toBe("2026-03-10")
    expect(plan({ range: "7d", timezone: "Asia/Kathmandu", now: utc("2026-03-10T18:15:00Z") }).to).toBe("2026-03-11")
    // 09:59 UTC on the 10th is 23:59 of the 10th in Kiritimati; in St John's it is still the 9th until 03:30 UTC.
    expect(plan({ range: "7d", timezone: "Pacific/Kiritimati", now: utc("2026-03-10T10:00:00Z") }).to).toBe(
      "2026-03-11"
    )
    expect(plan({ range: "7d", timezone: "America/St_Johns", now: utc("2026-01-10T03:29:59Z") }).to).toBe("2026-01-09")
    const p = plan({ range: "7d", timezone: "Asia/Kathmandu", now: utc("2026-03-10T18:15:00Z") })
    expect(iso(p.endMs)).toBe("2026-03-11T18:15:00.000Z")
    expect(iso(p.startMs)).toBe("2026-03-04T18:15:00.000Z")
  })
})

describe("buckets", () => {
  test("days: contiguous, each a local day, 23 and 25 hours across London's changes", () => {
    const p = plan({ range: "custom", from: "2026-03-28", to: "2026-03-30", timezone: "Europe/London" })
    expect(p.buckets).toEqual([
      { label: "2026-03-28", startMs: utc("2026-03-28T00:00:00Z"), endMs: utc("2026-03-29T00:00:00Z") },
      { label: "2026-03-29", startMs: utc("2026-03-29T00:00:00Z"), endMs: utc("2026-03-29T23:00:00Z") },
      { label: "2026-03-30", startMs: utc("2026-03-29T23:00:00Z"), endMs: utc("2026-03-30T23:00:00Z") }
    ])
    const autumn = plan({ range: "custom", from: "2026-10-25", to: "2026-10-25", timezone: "Europe/London" })
    expect(autumn.buckets).toEqual([
      { label: "2026-10-25", startMs: utc("2026-10-24T23:00:00Z"), endMs: utc("2026-10-26T00:00:00Z") }
    ])
  })

  test("weeks start on Monday; the first is clipped to the range and labelled by its first day in it", () => {
    // 2026-03-25 is a Wednesday; London springs forward on Sunday the 29th.
    const p = plan({
      range: "custom",
      granularity: "week",
      from: "2026-03-25",
      to: "2026-04-14",
      timezone: "Europe/London"
    })
    expect(labels(p)).toEqual(["2026-03-25", "2026-03-30", "2026-04-06", "2026-04-13"])
    expect(iso(p.buckets[0]!.startMs)).toBe("2026-03-25T00:00:00.000Z")
    expect(iso(p.buckets[0]!.endMs)).toBe("2026-03-29T23:00:00.000Z") // Monday 00:00 BST
    expect((p.buckets[0]!.endMs - p.buckets[0]!.startMs) / HOUR).toBe(5 * 24 - 1)
    expect((p.buckets[1]!.endMs - p.buckets[1]!.startMs) / HOUR).toBe(7 * 24)
    // The last is clipped to `to` (Monday and Tuesday).
    expect(iso(p.buckets[3]!.endMs)).toBe("2026-04-14T23:00:00.000Z")
  })

  test("months: calendar months in the zone, the first and last clipped", () => {
    const p = plan({
      range: "custom",
      granularity: "month",
      from: "2026-01-15",
      to: "2026-04-10",
      timezone: "Asia/Kathmandu"
    })
    expect(labels(p)).toEqual(["2026-01-15", "2026-02-01", "2026-03-01", "2026-04-01"])
    expect(p.buckets.map((b) => iso(b.startMs))).toEqual([
      "2026-01-14T18:15:00.000Z",
      "2026-01-31T18:15:00.000Z",
      "2026-02-28T18:15:00.000Z",
      "2026-03-31T18:15:00.000Z"
    ])
    expect(iso(p.endMs)).toBe("2026-04-10T18:15:00.000Z")
  })

  test("a 30d month view and a 90d week view are zero-fill ready: every bucket listed, contiguous", () => {
    const now = utc("2026-03-10T12:00:00Z")
    expect(labels(plan({ range: "30d", granularity: "month", now }))).toEqual(["2026-02-09", "2026-03-01"])
    const weeks = plan({ range: "90d", granularity: "week", timezone: "America/St_Johns", now })
    expect(weeks.buckets[0]!.label).toBe(weeks.from)
    expect(weeks.buckets.slice(1).every((b) => new Date(Date.parse(b.label)).getUTCDay() === 1)).toBe(true)
    expect(weeks.buckets.length).toBe(14)
    for (const p of [weeks, plan({ range: "90d", timezone: "Pacific/Kiritimati", now })]) {
      expect(p.buckets[0]!.startMs).toBe(p.startMs)
      expect(p.buckets[p.buckets.length - 1]!.endMs).toBe(p.endMs)
      p.buckets.forEach((b, i) => i > 0 && expect(b.startMs).toBe(p.buckets[i - 1]!.endMs))
    }
  })

  test("a year of days, 366 of them, is allowed", () => {
    const p = plan({ range: "custom", from: "2024-01-01", to: "2024-12-31", timezone: "America/St_Johns" })
    expect(p.buckets).toHaveLength(366)
    expect((p.endMs - p.startMs) / DAY_MS).toBe(366)
  })

  test("bucketIndexOf: start inclusive, end exclusive", () => {
    const p = plan({ range: "custom", from: "2026-03-09", to: "2026-03-10", timezone: "Asia/Kathmandu" })
    expect(bucketIndexOf(p.buckets, utc("2026-03-08T18:14:59Z"))).toBe(-1)
    expect(bucketIndexOf(p.buckets, utc("2026-03-08T18:15:00Z"))).toBe(0)
    expect(bucketIndexOf(p.buckets, utc("2026-03-09T18:00:00Z"))).toBe(0)
    expect(bucketIndexOf(p.buckets, utc("2026-03-09T18:15:00Z"))).toBe(1)
    expect(bucketIndexOf(p.buckets, utc("2026-03-10T18:15:00Z"))).toBe(-1)
  })
})

describe("validation", () => {
  test("from after to", () => {
    expect(issues({ from: "2026-03-10", to: "2026-03-09" })).toEqual([
      { path: "from", message: "must not be after to" }
    ])
  })

  test("over 366 days", () => {
    expect(issues({ from: "2025-01-01", to: "2026-01-02" })).toEqual([
      { path: "to", message: "the range covers 367 days; at most 366 are allowed" }
    ])
  })

  test("a missing bound", () => {
    expect(issues({ from: "2026-03-01" })).toEqual([{ path: "to", message: "is required when range is custom" }])
    expect(issues({}).map((i) => i.path)).toEqual(["from", "to"])
  })

  test("a bad date", () => {
    expect(issues({ from: "2026-02-30", to: "2026-03-01" })).toEqual([
      { path: "from", message: "'2026-02-30' is not a calendar date YYYY-MM-DD from 1970 to 9999" }
    ])
  })

  test("an unknown time zone, reported with every other problem", () => {
    expect(issues({ timezone: "Mars/Olympus", from: "2026-03-02", to: "2026-03-01" }).map((i) => i.path)).toEqual([
      "timezone",
      "from"
    ])
  })

  test("from/to with a preset range", () => {
    expect(issues({ range: "7d", from: "2026-03-01" })).toEqual([
      { path: "from", message: "applies only to range=custom" }
    ])
  })
})
