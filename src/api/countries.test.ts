import { describe, expect, test } from "bun:test"
import { isCountryCode } from "./countries.ts"

describe("isCountryCode", () => {
  test("assigned codes, Kosovo's user-assigned XK", () => {
    for (const code of ["NG", "DE", "US", "JP", "KW", "GB", "XK", "AX", "SS"]) expect(isCountryCode(code)).toBe(true)
  })

  test("no region the runtime merely has a name for: unknown, unions, pseudo-locales, withdrawn codes", () => {
    for (const code of ["ZZ", "EU", "UN", "EZ", "QO", "XA", "XB", "UK", "YU", "SU", "AN", "QQ", "ng", "NGA", ""]) {
      expect(isCountryCode(code)).toBe(false)
    }
  })
})
