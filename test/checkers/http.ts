/** The service as an outside judge reaches it: `/v1` over real HTTP with a key, hosted pages without one. */
import type { TestServer } from "../support/harness.ts"

export interface Answer {
  readonly status: number
  readonly body: any
}

export const api = (server: TestServer, apiKey: string) => {
  const call = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await server.fetch(path, {
      method,
      apiKey,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  }
  return {
    get: (path: string) => call("GET", path),
    post: (path: string, body: unknown = {}) => call("POST", path, body),
    del: (path: string) => call("DELETE", path),
    bytes: async (path: string) => {
      const response = await server.fetch(path, { apiKey })
      return {
        status: response.status,
        type: response.headers.get("content-type"),
        bytes: new Uint8Array(await response.arrayBuffer())
      }
    }
  }
}

/** A hosted invoice URL's path (the service's public base URL differs from the test's port). */
export const hostedPath = (hostedUrl: string) => new URL(hostedUrl).pathname

/** Fetches without any key or cookie, as the vendor's customer's browser would. */
export const anonymous = async (server: TestServer, path: string, init: RequestInit = {}) =>
  fetch(server.baseUrl + path, { redirect: "manual", ...init })
