/**
 * The secrets an endpoint retired by rotating, which keep signing beside its current one for 24 h each (decisions.md
 * §11; issue 37: a second rotation within the 24 h used to stop the first old secret at once). Stored encrypted, as
 * the current secret is, in `webhook_endpoints.retired_secrets` (migration 0030), newest first; a rotation made
 * before that migration left its old secret in `previous_secret`, read here until it expires or the next rotation
 * moves it into the list.
 */
export interface RetiredSecret {
  /** As stored: encrypted. */
  readonly secret: string
  readonly expiresAt: number
}

export interface StoredSecrets {
  readonly previousSecret: string | null
  readonly previousSecretExpiresAt: number | string | null
  readonly retiredSecrets: string | null
}

/**
 * At most this many retired secrets sign beside the current one (10 signatures in a header): past it, a rotation
 * retires the oldest at once. Nine rotations within a day is far beyond any vendor's need, and a header of hundreds
 * of signatures (each an HMAC per attempt) is not something one organization should be able to ask for.
 */
export const MAX_RETIRED_SECRETS = 9

const parse = (text: string | null): ReadonlyArray<RetiredSecret> => {
  if (text === null || text === "") return []
  const value: unknown = JSON.parse(text)
  if (!Array.isArray(value)) return []
  return value.flatMap((entry: unknown) => {
    if (typeof entry !== "object" || entry === null) return []
    const { secret, expiresAt } = entry as Record<string, unknown>
    return typeof secret === "string" && typeof expiresAt === "number" ? [{ secret, expiresAt }] : []
  })
}

/** Every retired secret still signing at `now`, newest first (encrypted, as stored). */
export const retiredSigning = (stored: StoredSecrets, now: number): ReadonlyArray<RetiredSecret> => {
  const legacy =
    stored.previousSecret !== null && Number(stored.previousSecretExpiresAt) > now
      ? [{ secret: stored.previousSecret, expiresAt: Number(stored.previousSecretExpiresAt) }]
      : []
  return [...parse(stored.retiredSecrets), ...legacy]
    .filter((r) => r.expiresAt > now)
    .sort((a, b) => b.expiresAt - a.expiresAt)
    .slice(0, MAX_RETIRED_SECRETS)
}

/** The list to store when `current` (encrypted) is retired at `now`: it, then those still signing. */
export const retire = (
  stored: StoredSecrets,
  current: string,
  now: number,
  overlapMs: number
): ReadonlyArray<RetiredSecret> =>
  [{ secret: current, expiresAt: now + overlapMs }, ...retiredSigning(stored, now)].slice(0, MAX_RETIRED_SECRETS)
