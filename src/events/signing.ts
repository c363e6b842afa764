import { createHmac, randomBytes } from "node:crypto"

/**
 * Standard Webhooks signatures (decisions.md §11): `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`, keyed by
 * the base64-decoded part of the secret after `whsec_`. Several secrets (a rotation) give several signatures,
 * space-separated, in one `webhook-signature` header.
 */
export const SECRET_PREFIX = "whsec_"

/** A new endpoint secret: 32 random bytes. */
export const newSecret = (): string => SECRET_PREFIX + randomBytes(32).toString("base64")

const keyOf = (secret: string): Buffer =>
  Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64")

export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  "v1," + createHmac("sha256", keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`).digest("base64")

/** The three headers of one attempt, signed afresh with its own timestamp. */
export const signedHeaders = (
  secrets: ReadonlyArray<string>,
  id: string,
  timestampSeconds: number,
  body: string
): Record<string, string> => ({
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": secrets.map((secret) => sign(secret, id, timestampSeconds, body)).join(" ")
})
