import { Context, Effect, Layer } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { AppConfig } from "../../platform/config.ts"
import { Encryption } from "../../platform/encryption.ts"

/**
 * Hosted invoice pages (decisions.md §16): `{PUBLIC_URL}/i/{organization}/{invoice}/{token}`, where the token is an
 * HMAC of the organization and invoice ids under a secret derived from ENCRYPTION_KEY. Unguessable (192 bits), never
 * stored, the same for an invoice every time; rotating the key changes every link.
 */
export interface InvoiceLinksShape {
  readonly hostedUrl: (org: string, invoiceId: string) => string
  readonly hostedPath: (org: string, invoiceId: string) => string
  /** Whether `token` is the one of this invoice, compared in constant time. */
  readonly verify: (org: string, invoiceId: string, token: string) => boolean
}

export class InvoiceLinks extends Context.Tag("InvoiceLinks")<InvoiceLinks, InvoiceLinksShape>() {}

export const makeInvoiceLinks = (secret: string, publicUrl: string): InvoiceLinksShape => {
  const tokenOf = (org: string, invoiceId: string) =>
    createHmac("sha256", secret).update(`hosted-invoice\n${org}\n${invoiceId}`).digest("base64url").slice(0, 32)
  const hostedPath = (org: string, invoiceId: string) =>
    `/i/${encodeURIComponent(org)}/${encodeURIComponent(invoiceId)}/${tokenOf(org, invoiceId)}`
  return {
    hostedPath,
    hostedUrl: (org, invoiceId) => `${publicUrl.replace(/\/+$/, "")}${hostedPath(org, invoiceId)}`,
    verify: (org, invoiceId, token) => {
      const expected = Buffer.from(tokenOf(org, invoiceId))
      const given = Buffer.from(token)
      return given.length === expected.length && timingSafeEqual(given, expected)
    }
  }
}

export const InvoiceLinksLive = Layer.effect(
  InvoiceLinks,
  Effect.gen(function* () {
    const encryption = yield* Encryption
    const config = yield* AppConfig
    return makeInvoiceLinks(encryption.derive("hosted-invoice-links"), config.publicUrl)
  })
)
