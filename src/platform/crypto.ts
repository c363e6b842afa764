import { timingSafeEqual, createHash, randomBytes } from "node:crypto"

export const sha256Hex = (value: string): string => createHash("sha256").update(value).digest("hex")

/** Constant-time equality of two strings (length differences leak only the length). */
export const safeEqual = (a: string, b: string): boolean => {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  if (left.length !== right.length) return false
  return timingSafeEqual(left, right)
}

export const randomToken = (bytes: number): string => randomBytes(bytes).toString("base64url")
