import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { makeShiftedClock } from "../support/clock.ts"
import { post } from "../support/catalog.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"
import { type Org, saveCard, seedOrg } from "./support.ts"

/** What the portal needed from /v1: resume a cancellation at period end, make a saved method the default. */
for (const database of databases()) {
  describe(`resume and default payment method on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    let org: Org
    let other: Org
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
      org = await server.createOrg()
      other = await server.createOrg()
      await seedOrg(server, org, [
        { id: "ada", name: "Ada" },
        { id: "bob", name: "Bob" },
        { id: "cy", name: "Cy" }
      ])
      await seedOrg(server, other, [{ id: "ada", name: "Other Ada" }])
    })
    afterAll(() => server.close())

    const get = async (apiKey: string, path: string) => (await server.fetch(path, { apiKey })).json() as Promise<any>
    const eventsOf = async (type: string, customer: string) =>
      (await get(org.apiKey, `/v1/events?type=${type}&customer=${customer}`)).data as Array<any>

    /** A paid plan, active with a period, charged to a saved card. */
    const activePro = async (customer: string) => {
      await saveCard(server, org, customer)
      const attached = await post(server, org.apiKey, "/v1/attach", { customer, product: "pro" })
      expect(attached.status).toBe(200)
      expect(attached.body.subscription).toMatchObject({ plan: "pro", status: "active" })
      return attached.body.subscription.id as string
    }

    test("resume undoes a cancellation at period end, once, with subscription.resumed", async () => {
      const id = await activePro("ada")
      const notCanceling = await post(server, org.apiKey, `/v1/subscriptions/${id}/resume`, {})
      expect(notCanceling).toMatchObject({ status: 409, body: { success: false, code: "subscription_not_canceling" } })
      const canceled = await post(server, org.apiKey, `/v1/subscriptions/${id}/cancel`, {})
      expect(canceled.body.subscription).toMatchObject({ status: "active", cancelAtPeriodEnd: true })
      // Another organization's key finds no such subscription, and changes nothing.
      const foreign = await post(server, other.apiKey, `/v1/subscriptions/${id}/resume`, {})
      expect(foreign).toMatchObject({ status: 404, body: { code: "subscription_not_found" } })
      const resumed = await post(server, org.apiKey, `/v1/subscriptions/${id}/resume`, {})
      expect(resumed.status).toBe(200)
      expect(resumed.body).toEqual({ success: true, subscription: expect.any(Object) })
      expect(resumed.body.subscription).toMatchObject({ id, status: "active", cancelAtPeriodEnd: false })
      const listed = await get(org.apiKey, "/v1/subscriptions?customer=ada")
      expect(listed.subscriptions.find((s: any) => s.id === id)).toEqual(resumed.body.subscription)
      const events = await eventsOf("subscription.resumed", "ada")
      expect(events).toHaveLength(1)
      expect(events[0].data).toMatchObject({ id, cancelAtPeriodEnd: false, plan: "pro" })
      const twice = await post(server, org.apiKey, `/v1/subscriptions/${id}/resume`, {})
      expect(twice).toMatchObject({ status: 409, body: { code: "subscription_not_canceling" } })
      expect(await eventsOf("subscription.resumed", "ada")).toHaveLength(1)
      expect((await post(server, org.apiKey, "/v1/subscriptions/sub_nope/resume", {})).status).toBe(404)
    })

    test("resume of a subscription already ended: 409 subscription_ended, nothing changed", async () => {
      const id = await activePro("bob")
      await post(server, org.apiKey, `/v1/subscriptions/${id}/cancel`, {})
      const [before] = (await get(org.apiKey, "/v1/subscriptions?customer=bob")).subscriptions.filter(
        (s: any) => s.id === id
      )
      // Past its period end the cancellation has taken effect, whether or not the renewals worker ran yet.
      clock.advance(Date.parse(before.currentPeriodEnd) - clock.clock.unsafeCurrentTimeMillis() + 1_000)
      const ended = await post(server, org.apiKey, `/v1/subscriptions/${id}/resume`, {})
      expect(ended).toMatchObject({ status: 409, body: { success: false, code: "subscription_ended" } })
      expect(await eventsOf("subscription.resumed", "bob")).toHaveLength(0)
      // A subscription canceled at once (no period to keep) ends too.
      const free = (await get(org.apiKey, "/v1/subscriptions?customer=cy")).subscriptions[0]
      await post(server, org.apiKey, `/v1/subscriptions/${free.id}/cancel`, {})
      const gone = await post(server, org.apiKey, `/v1/subscriptions/${free.id}/resume`, {})
      expect(gone).toMatchObject({ status: 409, body: { code: "subscription_ended" } })
    })

    test("POST /v1/wallet/default makes a saved method the default, with payment_method.updated", async () => {
      const first = await saveCard(server, org, "cy")
      expect(first).toHaveLength(1)
      expect(first[0]!.isDefault).toBe(true)
      // A second card: not the default (the first saved is).
      const both = await saveCard(server, org, "cy", "declining")
      expect(both).toHaveLength(2)
      const second = both.find((m) => m.id !== first[0]!.id)!
      expect(second.isDefault).toBe(false)
      const made = await post(server, org.apiKey, "/v1/wallet/default", { customer: "cy", id: second.id })
      expect(made.status).toBe(200)
      expect(made.body.success).toBe(true)
      expect(made.body.paymentMethods.map((m: any) => [m.id, m.isDefault])).toEqual([
        [second.id, true],
        [first[0]!.id, false]
      ])
      expect(await get(org.apiKey, "/v1/wallet?customer=cy")).toEqual(made.body)
      const events = await eventsOf("payment_method.updated", "cy")
      expect(events).toHaveLength(1)
      expect(events[0].data).toMatchObject({ id: second.id, isDefault: true, customerId: expect.any(String) })
      // Already the default: the same wallet, no second event.
      const again = await post(server, org.apiKey, "/v1/wallet/default", { customer: "cy", id: second.id })
      expect(again.body).toEqual(made.body)
      expect(await eventsOf("payment_method.updated", "cy")).toHaveLength(1)
      // Another customer's method, another organization's key, a removed or unknown method: 404, nothing changed.
      const adaWallet = await get(org.apiKey, "/v1/wallet?customer=ada")
      const adaMethod = adaWallet.paymentMethods[0].id
      const cross = await post(server, org.apiKey, "/v1/wallet/default", { customer: "cy", id: adaMethod })
      expect(cross).toMatchObject({ status: 404, body: { code: "payment_method_not_found" } })
      const foreign = await post(server, other.apiKey, "/v1/wallet/default", { customer: "ada", id: adaMethod })
      expect(foreign).toMatchObject({ status: 404, body: { code: "payment_method_not_found" } })
      expect(await get(org.apiKey, "/v1/wallet?customer=ada")).toEqual(adaWallet)
      await post(server, org.apiKey, "/v1/wallet/remove", { customer: "cy", id: first[0]!.id })
      const removed = await post(server, org.apiKey, "/v1/wallet/default", { customer: "cy", id: first[0]!.id })
      expect(removed).toMatchObject({ status: 404, body: { code: "payment_method_not_found" } })
      expect((await post(server, org.apiKey, "/v1/wallet/default", { customer: "cy" })).status).toBe(400)
      expect((await post(server, org.apiKey, "/v1/wallet/default", { customer: "nobody", id: "pm_x" })).status).toBe(
        404
      )
      expect(await eventsOf("payment_method.updated", "cy")).toHaveLength(1)
    })
  })
}
