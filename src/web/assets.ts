import { createHash } from "node:crypto"

/** A built script or stylesheet of one of the service's pages, with its gzip and etag (served by `serveAsset`). */
export interface Asset {
  readonly type: string
  readonly body: Uint8Array
  readonly gzip: Uint8Array
  readonly etag: string
}

export const makeAsset = (type: string, text: string): Asset => {
  const body = new TextEncoder().encode(text)
  return {
    type,
    body,
    gzip: Bun.gzipSync(body, { level: 9 }),
    etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 16)}"`
  }
}

/** Built on first use (or at start-up), then kept for the process's life; a failed build is tried again next time. */
export const once = <A>(build: () => Promise<A>): (() => Promise<A>) => {
  let built: Promise<A> | undefined
  return () => {
    if (built === undefined) {
      built = build()
      built.catch(() => {
        built = undefined
      })
    }
    return built
  }
}
