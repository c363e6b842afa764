/**
 * The invoice checker of issue 35, written from §15–§16 of the contract decisions alone and talking to the service
 * only as an outside judge would: `/v1` over real HTTP with a key, the hosted page and its PDF without one. The one
 * exception is time: renewals fall due when the test clock passes a period end and the renewal run (the service's
 * background job) runs, as it would on its own schedule.
 *
 * 1. Random catalogs (fixed seed): every invoice's lines, discounts, taxes and totals recomputed exactly.
 * 2. Number sequences: consecutive per organization under concurrent finalization; prefixes; credit notes.
 * 3. Documents: the PDF's and the hosted PDF's extracted text against the API's numbers; the hosted page.
 * 4. 100 concurrent redemptions of a code limited to 10.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import fc from "fast-check"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, SLOW_HOOK_MS, startServer, type TestServer } from "../support/harness.ts"
import { pdfText } from "../support/pdf.ts"
import { checkCustomerInvoices } from "./check.ts"
import { missingFrom } from "./documents.ts"
import { anonymous, api, hostedPath } from "./http.ts"
import { CURRENCIES, type Scenario, catalogOf, scenario } from "./scenario.ts"

const DAY = 86_400_000
const SEED = 3516
const RUNS = 16

const number = (prefix: string, n: number) => `${prefix}-${String(n).padStart(6, "0")}`

for (const database of databases()) {
  describe(`invoice checker (§15–§16) on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    }, SLOW_HOOK_MS)
    afterAll(() => server.close(), SLOW_HOOK_MS)

    const fail = (what: string, answer: { status: number; body: unknown }) =>
      new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body)}`)

    /** Sets a scenario up through `/v1` and bills two rounds of usage and a renewal; answers the org and its client. */
    const play = async (s: Scenario) => {
      const org = await server.createOrg()
      const v1 = api(server, org.apiKey)
      const must = async (what: string, answer: Promise<{ status: number; body: any }>) => {
        const a = await answer
        if (a.status !== 200) throw fail(what, a)
        return a.body
      }
      await must("sync", v1.post("/v1/sync", catalogOf(s)))
      await must("profile", v1.post("/v1/billing/profile", { legalName: "Ọlájídé Ventures Ltd", invoicePrefix: s.prefix }))
      for (const c of s.customers) {
        await must(
          `customer ${c.id}`,
          v1.post("/v1/customers", {
            id: c.id,
            email: `${c.id}@example.com`,
            name: c.name,
            ...(c.country === undefined ? {} : { address: { country: c.country, ...(c.state === undefined ? {} : { state: c.state }) } }),
            taxExempt: c.taxExempt
          })
        )
        if (c.discount !== undefined) {
          const coupon = s.coupons[c.discount.coupon]!
          await must(
            `discount of ${c.id}`,
            v1.post(
              `/v1/customers/${c.id}/discount`,
              c.discount.byCode ? { promotionCode: coupon.code!.toLowerCase() } : { coupon: coupon.slug }
            )
          )
        }
        if (c.subscribes) {
          const fixed = s.plans.find((p) => p.price > 0)!
          const attached = await must(`attach ${c.id}`, v1.post("/v1/attach", { customer: c.id, product: fixed.slug }))
          const paid = await server.fetch(new URL(attached.checkoutUrl).pathname, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: "outcome=pay&card=ok"
          })
          if (paid.status >= 400) throw new Error(`checkout of ${c.id}: ${paid.status}`)
        }
      }
      const features = s.plans.flatMap((p) => p.features)
      for (const [round, _] of [0, 1].entries()) {
        for (const c of s.customers)
          for (const [i, f] of features.entries()) {
            const value = c.usage[round]![i] ?? 0
            if (value > 0) await must(`track ${c.id} ${f.slug}`, v1.post("/v1/track", { customer: c.id, feature: f.slug, value }))
          }
        for (const c of s.customers) {
          const generated = await v1.post("/v1/billing/invoice", { customer: c.id })
          const tracked = features.some((_, i) => (c.usage[round]![i] ?? 0) > 0)
          if (generated.status !== (tracked ? 200 : 409)) throw fail(`invoice ${c.id} round ${round}`, generated)
        }
        if (round === 0) {
          clock.advance(32 * DAY)
          await server.run(Effect.flatMap(Renewals, (r) => r.runDue))
        }
      }
      return { org, v1 }
    }

    test(
      "random catalogs: every invoice's lines, discounts, taxes and totals recomputed from §15–§16; numbers per org",
      async () => {
        let invoicesChecked = 0
        let documentsChecked = 0
        const seen = new Set<string>()
        await fc.assert(
          fc.asyncProperty(scenario, async (s) => {
            const { v1 } = await play(s)
            const problems: Array<string> = []
            const all: Array<any> = []
            let sample: { invoice: any; name: string } | undefined
            for (const c of s.customers) {
              const listed = await v1.get(`/v1/billing/invoices?customer=${c.id}`)
              if (listed.status !== 200) throw fail("list", listed)
              const invoices: Array<any> = listed.body.invoices
              all.push(...invoices)
              for (const invoice of invoices)
                if (sample === undefined || invoice.lines.length > sample.invoice.lines.length) sample = { invoice, name: c.name }
              problems.push(...checkCustomerInvoices(s, c, invoices, seen))
              // Every tracked unit billed exactly once.
              for (const f of s.plans.flatMap((p) => p.features)) {
                const i = s.plans.flatMap((p) => p.features).indexOf(f)
                const tracked = c.usage.reduce((n, round) => n + (round[i] ?? 0), 0)
                const billed = invoices.flatMap((inv) => inv.lines).filter((l) => l.feature === f.slug)
                const quantity = billed.reduce((n, l) => n + l.quantity, 0)
                if (quantity !== tracked) problems.push(`${c.id}: ${f.slug} tracked ${tracked}, billed ${quantity}`)
              }
              // The renewal of a subscribed customer: one fee line of the plan's price.
              if (c.subscribes) {
                const fixed = s.plans.find((p) => p.price > 0)!
                const fees = invoices.flatMap((inv) => inv.lines).filter((l) => l.feature === fixed.slug)
                if (fees.length !== 1) problems.push(`${c.id}: ${fees.length} renewal fee lines of ${fixed.slug}, expected 1`)
              }
            }
            invoicesChecked += all.length
            // Numbers: `{prefix}-000001…` consecutive over the organization's finalized invoices, none twice.
            const numbers = all.map((i) => i.number as string).sort()
            const expectedNumbers = numbers.map((_, i) => number(s.prefix, i + 1))
            if (JSON.stringify(numbers) !== JSON.stringify(expectedNumbers))
              problems.push(`numbers ${numbers.join(",")}; expected ${expectedNumbers.join(",")}`)

            // Documents of the invoice with the most lines: the PDF with a key and the hosted PDF without one.
            if (sample !== undefined) {
              const names = [sample.name]
              const invoice = sample.invoice
              const pdf = await v1.bytes(`/v1/billing/invoices/${invoice.id}/pdf`)
              if (pdf.status !== 200 || pdf.type !== "application/pdf") problems.push(`pdf of ${invoice.number}: ${pdf.status} ${pdf.type}`)
              else for (const m of missingFrom(await pdfText(pdf.bytes), invoice, names)) problems.push(`pdf of ${invoice.number} lacks ${m}`)
              const hosted = await anonymous(server, `${hostedPath(invoice.hostedUrl)}/pdf`)
              if (hosted.status !== 200) problems.push(`hosted pdf of ${invoice.number}: ${hosted.status}`)
              else
                for (const m of missingFrom(await pdfText(new Uint8Array(await hosted.arrayBuffer())), invoice, names))
                  problems.push(`hosted pdf of ${invoice.number} lacks ${m}`)
              documentsChecked++
            }
            if (problems.length > 0) throw new Error(`${problems.length} discrepancies:\n${problems.join("\n")}`)
          }),
          { seed: SEED, numRuns: RUNS, endOnFailure: true }
        )
        // The property really looked at something.
        expect(invoicesChecked).toBeGreaterThan(RUNS)
        expect(documentsChecked).toBe(RUNS)
        expect([...seen].sort()).toEqual(
          expect.arrayContaining([
            "percent discount",
            "amount-off discount",
            "amount off capped",
            "plan-restricted discount",
            "discount over several lines",
            "once discount used up",
            "inclusive tax",
            "exclusive tax",
            "state tax",
            "exempt note",
            "reverse_charge note",
            "renewal",
            "graduated",
            "volume",
            ...CURRENCIES
          ])
        )
        console.log(`${database.name}: ${invoicesChecked} invoices checked; exercised ${[...seen].sort().join(", ")}`)
      },
      120_000
    )
  })
}
