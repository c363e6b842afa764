import { describe, expect, test } from "bun:test"
import { addInterval, currentWindow, normalizeReset } from "./periods.ts"

const utc = (y: number, m: number, d: number, h = 0, mi = 0, s = 0, ms = 0) => Date.UTC(y, m - 1, d, h, mi, s, ms)
const iso = (ms: number) => new Date(ms).toISOString()

describe("normalizeReset", () => {
  test("aliases and defaults", () => {
    expect(normalizeReset("never")).toBe("none")
    expect(normalizeReset("none")).toBe("none")
    expect(normalizeReset(null)).toBe("none")
    expect(normalizeReset(undefined)).toBe("monthly")
    expect(normalizeReset("semi_annual")).toBe("semi_annual")
    expect(normalizeReset("5min")).toBe("5min")
    expect(normalizeReset("fortnightly")).toBeUndefined()
    expect(normalizeReset("Monthly")).toBeUndefined()
  })
})

describe("addInterval", () => {
  test("31st-of-month anchor clamps each month from the anchor, keeping time of day", () => {
    const anchor = utc(2027, 1, 31, 13, 45, 10, 123)
    const got = Array.from({ length: 13 }, (_, n) => iso(addInterval(anchor, "monthly", n)))
    expect(got).toEqual([
      "2027-01-31T13:45:10.123Z",
      "2027-02-28T13:45:10.123Z",
      "2027-03-31T13:45:10.123Z",
      "2027-04-30T13:45:10.123Z",
      "2027-05-31T13:45:10.123Z",
      "2027-06-30T13:45:10.123Z",
      "2027-07-31T13:45:10.123Z",
      "2027-08-31T13:45:10.123Z",
      "2027-09-30T13:45:10.123Z",
      "2027-10-31T13:45:10.123Z",
      "2027-11-30T13:45:10.123Z",
      "2027-12-31T13:45:10.123Z",
      "2028-01-31T13:45:10.123Z"
    ])
  })

  test("February 29 in a leap year (2028) and February 28 otherwise (2027)", () => {
    expect(iso(addInterval(utc(2028, 1, 31), "monthly", 1))).toBe("2028-02-29T00:00:00.000Z")
    expect(iso(addInterval(utc(2027, 1, 31), "monthly", 1))).toBe("2027-02-28T00:00:00.000Z")
    expect(iso(addInterval(utc(2028, 1, 30), "monthly", 1))).toBe("2028-02-29T00:00:00.000Z")
    expect(iso(addInterval(utc(2028, 1, 29), "monthly", 1))).toBe("2028-02-29T00:00:00.000Z")
    expect(iso(addInterval(utc(2028, 1, 28), "monthly", 1))).toBe("2028-02-28T00:00:00.000Z")
  })

  test("yearly anchored on Feb 29 clamps to Feb 28 and returns to the 29th in the next leap year", () => {
    const anchor = utc(2028, 2, 29, 9)
    expect(iso(addInterval(anchor, "yearly", 1))).toBe("2029-02-28T09:00:00.000Z")
    expect(iso(addInterval(anchor, "yearly", 3))).toBe("2031-02-28T09:00:00.000Z")
    expect(iso(addInterval(anchor, "yearly", 4))).toBe("2032-02-29T09:00:00.000Z")
  })

  test("quarterly and semi-annual from a 31st", () => {
    const anchor = utc(2027, 8, 31)
    expect(iso(addInterval(anchor, "quarterly", 1))).toBe("2027-11-30T00:00:00.000Z")
    expect(iso(addInterval(anchor, "quarterly", 2))).toBe("2028-02-29T00:00:00.000Z")
    expect(iso(addInterval(anchor, "quarterly", 3))).toBe("2028-05-31T00:00:00.000Z")
    expect(iso(addInterval(anchor, "semi_annual", 1))).toBe("2028-02-29T00:00:00.000Z")
    expect(iso(addInterval(anchor, "semi_annual", 2))).toBe("2028-08-31T00:00:00.000Z")
  })

  test("negative n steps back, across a year boundary", () => {
    expect(iso(addInterval(utc(2027, 3, 31), "monthly", -1))).toBe("2027-02-28T00:00:00.000Z")
    expect(iso(addInterval(utc(2027, 1, 15), "monthly", -2))).toBe("2026-11-15T00:00:00.000Z")
  })

  test("fixed-length intervals", () => {
    const anchor = utc(2027, 3, 1, 0, 2)
    expect(addInterval(anchor, "5min", 3) - anchor).toBe(15 * 60_000)
    expect(addInterval(anchor, "15min", 2) - anchor).toBe(30 * 60_000)
    expect(addInterval(anchor, "30min", 1) - anchor).toBe(30 * 60_000)
    expect(addInterval(anchor, "hourly", 25) - anchor).toBe(25 * 3_600_000)
    expect(iso(addInterval(anchor, "daily", 31))).toBe("2027-04-01T00:02:00.000Z")
    expect(iso(addInterval(anchor, "weekly", 2))).toBe("2027-03-15T00:02:00.000Z")
  })

  test("rejects a fractional step count", () => {
    expect(() => addInterval(0, "daily", 1.5)).toThrow(RangeError)
  })
})

describe("currentWindow", () => {
  test("none has no window", () => {
    expect(currentWindow(utc(2027, 1, 1), "none", utc(2030, 1, 1))).toBeNull()
  })

  test("before the anchor returns the first window", () => {
    const anchor = utc(2027, 1, 31)
    expect(currentWindow(anchor, "monthly", utc(2026, 6, 1))).toEqual({ start: anchor, end: utc(2027, 2, 28) })
    expect(currentWindow(anchor, "hourly", anchor - 1)).toEqual({ start: anchor, end: anchor + 3_600_000 })
  })

  test("exact boundaries: now == end belongs to the next window", () => {
    const anchor = utc(2027, 1, 31, 12)
    expect(currentWindow(anchor, "monthly", anchor)).toEqual({ start: anchor, end: utc(2027, 2, 28, 12) })
    expect(currentWindow(anchor, "monthly", utc(2027, 2, 28, 12) - 1)).toEqual({
      start: anchor,
      end: utc(2027, 2, 28, 12)
    })
    expect(currentWindow(anchor, "monthly", utc(2027, 2, 28, 12))).toEqual({
      start: utc(2027, 2, 28, 12),
      end: utc(2027, 3, 31, 12)
    })
    const h = utc(2027, 5, 5, 5, 5)
    expect(currentWindow(h, "hourly", h + 3_600_000)).toEqual({ start: h + 3_600_000, end: h + 7_200_000 })
  })

  test("31st anchor: every day of a year lands in the window its clamped boundaries say", () => {
    const anchor = utc(2027, 1, 31, 8)
    // Compare with a brute-force walk over boundaries to check the estimate-and-adjust path.
    const boundaries = Array.from({ length: 15 }, (_, n) => addInterval(anchor, "monthly", n))
    for (let t = anchor; t < utc(2028, 2, 1); t += 6 * 3_600_000 + 1) {
      const i = boundaries.findIndex((b, j) => b <= t && t < boundaries[j + 1]!)
      expect(currentWindow(anchor, "monthly", t)).toEqual({ start: boundaries[i]!, end: boundaries[i + 1]! })
    }
  })

  test("late-in-the-day anchor: the day of the month matches but the time has not come yet", () => {
    const anchor = utc(2027, 1, 15, 23)
    // 2027-03-15 10:00 is before the 2027-03-15 23:00 boundary: still the February window.
    expect(currentWindow(anchor, "monthly", utc(2027, 3, 15, 10))).toEqual({
      start: utc(2027, 2, 15, 23),
      end: utc(2027, 3, 15, 23)
    })
  })

  test("leap and non-leap Februaries", () => {
    const anchor = utc(2027, 1, 31)
    expect(currentWindow(anchor, "monthly", utc(2027, 3, 1))).toEqual({
      start: utc(2027, 2, 28),
      end: utc(2027, 3, 31)
    })
    expect(currentWindow(anchor, "monthly", utc(2028, 2, 28, 23, 59))).toEqual({
      start: utc(2028, 1, 31),
      end: utc(2028, 2, 29)
    })
    expect(currentWindow(anchor, "monthly", utc(2028, 2, 29))).toEqual({
      start: utc(2028, 2, 29),
      end: utc(2028, 3, 31)
    })
  })

  test("yearly anchored on Feb 29", () => {
    const anchor = utc(2028, 2, 29)
    expect(currentWindow(anchor, "yearly", utc(2029, 2, 27))).toEqual({ start: anchor, end: utc(2029, 2, 28) })
    expect(currentWindow(anchor, "yearly", utc(2029, 2, 28))).toEqual({
      start: utc(2029, 2, 28),
      end: utc(2030, 2, 28)
    })
    expect(currentWindow(anchor, "yearly", utc(2032, 3, 1))).toEqual({ start: utc(2032, 2, 29), end: utc(2033, 2, 28) })
  })

  test("5min window far from the anchor is computed, not walked", () => {
    const anchor = utc(2020, 1, 1, 0, 1, 30)
    const now = utc(2040, 7, 19, 13, 58, 12, 345) // ~2.1 million 5-minute steps later
    const w = currentWindow(anchor, "5min", now)!
    expect(iso(w.start)).toBe("2040-07-19T13:56:30.000Z")
    expect(iso(w.end)).toBe("2040-07-19T14:01:30.000Z")
  })

  test("hourly far from the anchor keeps the anchor's minute", () => {
    const anchor = utc(2027, 1, 1, 0, 17)
    const w = currentWindow(anchor, "hourly", utc(2031, 9, 9, 4, 16, 59, 999))!
    expect(iso(w.start)).toBe("2031-09-09T03:17:00.000Z")
    expect(iso(w.end)).toBe("2031-09-09T04:17:00.000Z")
  })

  test("weekly windows start on the anchor's weekday", () => {
    const anchor = utc(2027, 3, 3, 10) // a Wednesday
    const w = currentWindow(anchor, "weekly", utc(2027, 4, 6, 9))! // the Tuesday 5 weeks later, before 10:00 Wed
    expect(iso(w.start)).toBe("2027-03-31T10:00:00.000Z")
    expect(iso(w.end)).toBe("2027-04-07T10:00:00.000Z")
    expect(new Date(w.start).getUTCDay()).toBe(3)
  })

  test("daily ignores daylight saving: always 24 h in UTC", () => {
    const anchor = utc(2027, 3, 1, 6)
    const w = currentWindow(anchor, "daily", utc(2027, 3, 28, 5, 59))!
    expect(iso(w.start)).toBe("2027-03-27T06:00:00.000Z")
    expect(w.end - w.start).toBe(86_400_000)
  })

  test("quarterly far from the anchor", () => {
    const anchor = utc(2027, 11, 30, 12)
    expect(currentWindow(anchor, "quarterly", utc(2035, 6, 1))).toEqual({
      start: utc(2035, 5, 30, 12),
      end: utc(2035, 8, 30, 12)
    })
  })
})
