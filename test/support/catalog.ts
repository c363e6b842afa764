import { expect } from "bun:test"
import type { TestServer } from "./harness.ts"

/** Syncs a catalog as raw JSON (defaults applied by the server, as a vendor's catalog file would rely on). */
export const syncCatalog = async (server: TestServer, apiKey: string, catalog: Record<string, unknown>) => {
  const response = await server.fetch("/v1/sync", {
    method: "POST",
    apiKey,
    body: JSON.stringify({ features: [], plans: [], ...catalog })
  })
  const body = await response.json()
  expect({ status: response.status, body }).toMatchObject({ status: 200 })
  return body
}

export const post = async (
  server: TestServer,
  apiKey: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {}
) => {
  const response = await server.fetch(path, { method: "POST", apiKey, body: JSON.stringify(body), headers })
  return { status: response.status, body: (await response.json()) as any }
}
