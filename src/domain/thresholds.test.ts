import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import { crossed, LEVELS } from "./thresholds.ts"

describe("threshold crossings", () => {
  test("a draw reaching a level exactly crosses it; one short of it does not", () => {
    expect(crossed(1000n, 0n, 800n)).toEqual([80])
    expect(crossed(1000n, 0n, 799n)).toEqual([])
    expect(crossed(1000n, 799n, 800n)).toEqual([80])
    expect(crossed(1000n, 800n, 999n)).toEqual([])
    expect(crossed(1000n, 999n, 1000n)).toEqual([100])
  })

  test("a draw crossing both levels crosses both, lowest first", () => {
    expect(crossed(1000n, 10n, 1000n)).toEqual([80, 100])
  })

  test("no limit, a zero limit or no growth crosses nothing", () => {
    expect(crossed(null, 0n, 10n ** 12n)).toEqual([])
    expect(crossed(0n, 0n, 0n)).toEqual([])
    expect(crossed(1000n, 900n, 900n)).toEqual([])
  })

  test("exact past a double's precision: a micro-unit short of 80% of 9e18 is not 80%", () => {
    const limit = 9n * 10n ** 18n
    const at80 = (limit * 80n) / 100n
    expect(crossed(limit, 0n, at80 - 1n)).toEqual([])
    expect(crossed(limit, at80 - 1n, at80)).toEqual([80])
  })

  test("any sequence of draws from zero crosses each level it ends past exactly once", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 10n ** 15n }),
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 14n }), { maxLength: 40 }),
        (limit, draws) => {
          let used = 0n
          const fired: Array<number> = []
          for (const d of draws) {
            fired.push(...crossed(limit, used, used + d))
            used += d
          }
          const expected = LEVELS.filter((l) => used * 100n >= limit * BigInt(l))
          expect(fired).toEqual([...expected])
        }
      )
    )
  })
})
