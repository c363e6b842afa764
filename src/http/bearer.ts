/**
 * The API key an `Authorization` header carries, in the one form the API declares (`HttpApiSecurity.bearer`, OpenAPI
 * `scheme: bearer`): the scheme `Bearer` in any case (RFC 9110 §11.1: schemes are case-insensitive), one or more
 * spaces (RFC 6750: `"Bearer" 1*SP b64token`), then the token and nothing after it. Anything else carries no key.
 *
 * HttpApi's own decoder takes whatever follows the header's first 7 characters (`Bear10 KEY` is ` KEY`), so HttpApi's
 * security (./Authentication.ts), the direct endpoint (./hotPath.ts) and the rate limit (./rateLimit.ts) all read the
 * header through this instead: they accept the same headers, and every spelling of one key is one credential.
 */
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i

export const bearerCredential = (header: string | null | undefined): string | undefined =>
  header == null ? undefined : BEARER.exec(header)?.[1]

export const MALFORMED_AUTHORIZATION = "The Authorization header must be 'Bearer <key>'"
