import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { gunzipSync } from "node:zlib"
import { assets } from "../../src/dashboard/assets.ts"
import { portalAssets } from "../../src/portal/assets.ts"
import { startServer, type TestServer } from "../support/harness.ts"

// The portal's script and styles (src/portal/assets.ts): small, self-contained, text-only. The budget is the
// dashboard's (decisions.md, "Dashboard": under 100 KB gzip per view, script and styles together).
const BUDGET = 100 * 1024

describe("the portal's assets", () => {
  test("portal.js and portal.css together stay within the dashboard's budget, and are far smaller than its own", async () => {
    const built = await portalAssets()
    expect([...built.keys()].sort()).toEqual(["portal.css", "portal.js"])
    const js = built.get("portal.js")!
    const css = built.get("portal.css")!
    expect(js.type).toStartWith("text/javascript")
    expect(css.type).toStartWith("text/css")
    const portal = js.gzip.length + css.gzip.length
    expect(portal).toBeLessThan(BUDGET)
    const dashboard = [...(await assets()).values()].reduce((sum, a) => sum + a.gzip.length, 0)
    expect(portal).toBeLessThan(dashboard)
    // What was compressed is what is served plain.
    expect(Buffer.from(gunzipSync(js.gzip)).equals(Buffer.from(js.body))).toBe(true)
  })

  test("the script writes text only and names no other address; the styles load nothing", async () => {
    const built = await portalAssets()
    const js = new TextDecoder().decode(built.get("portal.js")!.body)
    const css = new TextDecoder().decode(built.get("portal.css")!.body)
    // No markup is parsed from data: none of the APIs that would do it is in the bundle.
    expect(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/.exec(js)?.[0]).toBeUndefined()
    expect(/\bhttps?:\/\/(?!www\.w3\.org)/.exec(js)?.[0]).toBeUndefined()
    expect(/url\(|@import|https?:/.exec(css)?.[0]).toBeUndefined()
    // The shared blocks are in (one copy, imported by both pages' scripts).
    expect(css).toContain(".balance {")
    expect(css).toContain("@media (max-width: 640px)")
  })

  describe("served by the service", () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer({ dataDir: ":memory:" })
    })
    afterAll(() => server.close())

    test("at /portal/assets/<name>, compressed when asked, with an etag, no session needed", async () => {
      const built = await portalAssets()
      for (const name of ["portal.js", "portal.css"]) {
        const served = await server.fetch(`/portal/assets/${name}`, {
          headers: { "accept-encoding": "gzip" },
          decompress: false
        } as RequestInit)
        expect(served.status).toBe(200)
        expect(served.headers.get("content-encoding")).toBe("gzip")
        expect(served.headers.get("etag")).toBe(built.get(name)!.etag)
        expect(Buffer.from(await served.arrayBuffer()).equals(Buffer.from(built.get(name)!.gzip))).toBe(true)
      }
      expect((await server.fetch("/portal/assets/nope.js")).status).toBe(404)
    })
  })
})
