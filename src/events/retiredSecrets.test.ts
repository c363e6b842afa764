import { expect, test } from "bun:test"
import { MAX_RETIRED_SECRETS, retire, retiredSigning } from "./retiredSecrets.ts"

const DAY = 24 * 3_600_000
const none = { previousSecret: null, previousSecretExpiresAt: null, retiredSecrets: null }

test("every secret retired within its 24 h signs; an expired one does not; the newest first", () => {
  let stored = { ...none, retiredSecrets: JSON.stringify(retire(none, "s0", 0, DAY)) }
  stored = { ...stored, retiredSecrets: JSON.stringify(retire(stored, "s1", 1_000, DAY)) }
  expect(retiredSigning(stored, 2_000).map((r) => r.secret)).toEqual(["s1", "s0"])
  expect(retiredSigning(stored, DAY).map((r) => r.secret)).toEqual(["s1"])
  expect(retiredSigning(stored, DAY + 1_000)).toEqual([])
})

test("a rotation made before the list existed: its one previous secret signs until it expires, then moves in", () => {
  const legacy = { previousSecret: "old", previousSecretExpiresAt: "5000", retiredSecrets: null }
  expect(retiredSigning(legacy, 4_999).map((r) => r.secret)).toEqual(["old"])
  expect(retiredSigning(legacy, 5_000)).toEqual([])
  expect(retire(legacy, "current", 1_000, DAY)).toEqual([
    { secret: "current", expiresAt: 1_000 + DAY },
    { secret: "old", expiresAt: 5_000 }
  ])
})

test("past the bound, a rotation retires the oldest at once", () => {
  let stored: { previousSecret: null; previousSecretExpiresAt: null; retiredSecrets: string | null } = none
  for (let i = 0; i < MAX_RETIRED_SECRETS + 3; i++) {
    stored = { ...stored, retiredSecrets: JSON.stringify(retire(stored, `s${i}`, i, DAY)) }
  }
  const signing = retiredSigning(stored, 100).map((r) => r.secret)
  expect(signing).toHaveLength(MAX_RETIRED_SECRETS)
  expect(signing[0]).toBe(`s${MAX_RETIRED_SECRETS + 2}`)
  expect(signing).not.toContain("s0")
})
