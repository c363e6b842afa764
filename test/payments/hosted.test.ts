import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * The simulated provider's hosted pages as scripts and browsers use them (decisions.md §8): a POST to the checkout
 * URL completes it whatever its body (none, a form, JSON), and a page that does not exist is a page, not JSON.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    {
      slug: "basic",
      name: "Basic",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 1000 }]
    }
  ]
}

for (const database of databases()) {
  describe(`hosted pages on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    /** A customer with a pending paid plan, and the path of its simulated checkout. */
    const pending = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "buyer", email: "buyer@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "buyer", product: "basic" })
      expect(attached.body.subscription.status).toBe("pending")
      const status = async () => {
        const subs = (await (
          await server.fetch("/v1/subscriptions?customer=buyer", { apiKey: org.apiKey })
        ).json()) as any
        return subs.subscriptions[0].status as string
      }
      return { org, path: new URL(attached.body.checkoutUrl).pathname, status }
    }

    /** What `curl -X POST <url>` sends: no body, no content type. */
    const bare = (path: string) => fetch(server.baseUrl + path, { method: "POST" })

    test("a POST with no body completes the checkout: the plan is active", async () => {
      const { path, status } = await pending()
      const done = await bare(path)
      expect(done.status).toBe(200)
      expect(done.headers.get("content-type")).toContain("text/html")
      expect(await done.text()).toContain("Payment complete")
      expect(await status()).toBe("active")
    })

    test("a POST with no body and ?outcome=decline declines: the plan stays pending", async () => {
      const { path, status } = await pending()
      const declined = await bare(path + "?outcome=decline")
      expect(declined.status).toBe(200)
      expect(await declined.text()).toContain("Declined")
      expect(await status()).toBe("pending")
    })

    test("an empty body with Content-Length 0 (curl -d '') and an empty JSON body complete it too", async () => {
      const first = await pending()
      const form = await fetch(server.baseUrl + first.path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: ""
      })
      expect(form.status).toBe(200)
      expect(await first.status()).toBe("active")
      const second = await pending()
      const json = await fetch(server.baseUrl + second.path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: ""
      })
      expect(json.status).toBe(200)
      expect(await second.status()).toBe("active")
    })

    test("the page's own form post (urlencoded) still works, and its decline button too", async () => {
      const { path, status } = await pending()
      const declined = await fetch(server.baseUrl + path + "?outcome=decline", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect(await declined.text()).toContain("Declined")
      expect(await status()).toBe("pending")
      const paid = await fetch(server.baseUrl + path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      expect(paid.status).toBe(200)
      expect(await paid.text()).toContain("Payment complete")
      expect(await status()).toBe("active")
    })

    test("a JSON body chooses the outcome; a value it does not know is refused, not guessed", async () => {
      const { path, status } = await pending()
      const typo = await fetch(server.baseUrl + path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ outcome: "declin" })
      })
      expect(typo.status).toBe(400)
      expect(await status()).toBe("pending")
      const declined = await fetch(server.baseUrl + path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ outcome: "decline" })
      })
      expect(await declined.text()).toContain("Declined")
      expect(await status()).toBe("pending")
    })

    test("an unknown reference is an HTML 404 page for a browser, the error body for a client asking for JSON", async () => {
      const { org, path } = await pending()
      for (const unknown of [
        `/simulated/checkout/${org.id}/no-such-reference`,
        `/simulated/setup/${org.id}/no-such-reference`,
        `/simulated/other/${org.id}/x`
      ]) {
        for (const method of ["GET", "POST"]) {
          const page = await fetch(server.baseUrl + unknown, {
            method,
            headers: { accept: "text/html,application/xhtml+xml,*/*;q=0.8" }
          })
          expect({ unknown, method, status: page.status }).toEqual({ unknown, method, status: 404 })
          expect(page.headers.get("content-type")).toContain("text/html")
          expect(await page.text()).toContain("<h1>")
          // curl's default Accept (*/*) gets the page as well.
          const curl = await fetch(server.baseUrl + unknown, { method, headers: { accept: "*/*" } })
          expect(curl.status).toBe(404)
          expect(curl.headers.get("content-type")).toContain("text/html")
          await curl.text()
          const api = await fetch(server.baseUrl + unknown, { method, headers: { accept: "application/json" } })
          expect(api.status).toBe(404)
          expect(await api.json()).toMatchObject({ success: false, code: "not_found" })
        }
      }
      // Another organization's path to a real reference is unknown too.
      const other = await server.createOrg()
      const foreign = await fetch(server.baseUrl + path.replace(org.id, other.id))
      expect(foreign.status).toBe(404)
      expect(foreign.headers.get("content-type")).toContain("text/html")
      await foreign.text()
    })
  })
}

describe("hosted pages on live", () => {
  test("the routes do not exist: a JSON 404 like any unknown route", async () => {
    const server = await startServer({ dataDir: ":memory:", appEnv: "live" })
    try {
      for (const method of ["GET", "POST"]) {
        const response = await fetch(server.baseUrl + "/simulated/checkout/org_x/ref", { method })
        expect(response.status).toBe(404)
        expect(await response.json()).toMatchObject({ success: false, code: "not_found" })
      }
    } finally {
      await server.close()
    }
  })
})
