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
import { add, cmp, majorDigits, q, show } from "./rules.ts"
import { missingFrom, normalize, showsNumber } from "./documents.ts"
import { anonymous, api, hostedPath } from "./http.ts"
import { attachedCoupon, CURRENCIES, type Scenario, catalogOf, scenario } from "./scenario.ts"

const DAY = 86_400_000
const SEED = 1735
const RUNS = 10

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
    /** Subscribers whose first charge a coupon took to zero: no payment, but a paid invoice of total 0 for it (h19). */
    const zeroFirstCharge = new Set<string>()
    const play = async (s: Scenario, seen: Set<string>) => {
      zeroFirstCharge.clear()
      const org = await server.createOrg()
      const v1 = api(server, org.apiKey)
      const must = async (what: string, answer: Promise<{ status: number; body: any }>) => {
        const a = await answer
        if (a.status !== 200) throw fail(what, a)
        return a.body
      }
      await must("sync", v1.post("/v1/sync", catalogOf(s)))
      await must(
        "profile",
        v1.post("/v1/billing/profile", { legalName: "Ọlájídé Ventures Ltd", invoicePrefix: s.prefix })
      )
      for (const c of s.customers) {
        await must(
          `customer ${c.id}`,
          v1.post("/v1/customers", {
            id: c.id,
            email: `${c.id}@example.com`,
            name: c.name,
            ...(c.country === undefined
              ? {}
              : { address: { country: c.country, ...(c.state === undefined ? {} : { state: c.state }) } }),
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
          // With a coupon (§15): refused with 422 coupon_invalid, creating nothing, when it cannot apply to the plan.
          const withCoupon = c.attachCoupon === undefined ? undefined : s.coupons[c.attachCoupon]!
          if (withCoupon !== undefined && attachedCoupon(s, c) === undefined) {
            const refused = await v1.post("/v1/attach", {
              customer: c.id,
              product: fixed.slug,
              coupon: withCoupon.slug
            })
            if (refused.status !== 422 || refused.body.code !== "coupon_invalid")
              throw fail(`attach ${c.id} with ${withCoupon.slug}`, refused)
            const subscriptions = await must(`subscriptions of ${c.id}`, v1.get(`/v1/subscriptions?customer=${c.id}`))
            if (subscriptions.subscriptions.some((x: any) => x.plan === fixed.slug))
              throw new Error(`a refused attach of ${c.id} made a subscription`)
          }
          const bound = attachedCoupon(s, c)
          const attached = await must(
            `attach ${c.id}`,
            v1.post("/v1/attach", {
              customer: c.id,
              product: fixed.slug,
              ...(bound === undefined ? {} : { coupon: bound.slug })
            })
          )
          if (attached.checkoutUrl === undefined || attached.checkoutUrl === null) {
            // A coupon taking the whole first charge: nothing to collect, the subscription is active at once.
            if (attached.subscription.status !== "active") throw fail(`attach ${c.id}`, { status: 200, body: attached })
            seen.add("attach coupon took the whole first charge")
            zeroFirstCharge.add(c.id)
          } else {
            const paid = await server.fetch(new URL(attached.checkoutUrl).pathname, {
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded" },
              body: "outcome=pay&card=ok"
            })
            if (paid.status >= 400) throw new Error(`checkout of ${c.id}: ${paid.status}`)
          }
        }
      }
      const features = s.plans.flatMap((p) => p.features)
      const before = new Map<string, Set<string>>()
      for (const [round, _] of [0, 1].entries()) {
        for (const c of s.customers)
          for (const [i, f] of features.entries()) {
            const value = c.usage[round]![i] ?? 0
            if (value > 0)
              await must(`track ${c.id} ${f.slug}`, v1.post("/v1/track", { customer: c.id, feature: f.slug, value }))
          }
        for (const c of s.customers) {
          const generated = await v1.post("/v1/billing/invoice", { customer: c.id })
          const tracked = features.some((_, i) => (c.usage[round]![i] ?? 0) > 0)
          if (generated.status !== (tracked ? 200 : 409)) throw fail(`invoice ${c.id} round ${round}`, generated)
        }
        if (round === 0) {
          clock.advance(32 * DAY)
          await server.run(Effect.flatMap(Renewals, (r) => r.runDue))
          // The invoices made so far, under the first discount; then the discount is kept, removed or replaced.
          for (const c of s.customers) {
            const listed = await must(`list ${c.id}`, v1.get(`/v1/billing/invoices?customer=${c.id}`))
            before.set(c.id, new Set(listed.invoices.map((i: any) => i.id)))
            if (c.moveTo !== undefined) {
              const { taxExempt, ...address } = c.moveTo
              await must(
                `move ${c.id}`,
                v1.post("/v1/customers", {
                  id: c.id,
                  email: `${c.id}@example.com`,
                  address: address.country === undefined ? null : address,
                  taxExempt
                })
              )
            }
            if (c.change.kind === "remove")
              await must(`remove discount of ${c.id}`, v1.del(`/v1/customers/${c.id}/discount`))
            if (c.change.kind === "replace")
              await must(
                `replace discount of ${c.id}`,
                v1.post(`/v1/customers/${c.id}/discount`, { coupon: s.coupons[c.change.coupon]!.slug })
              )
          }
        }
      }
      return { org, v1, before }
    }

    test("random catalogs: every invoice's lines, discounts, taxes and totals recomputed from §15–§16; numbers per org", async () => {
      let invoicesChecked = 0
      let documentsChecked = 0
      const seen = new Set<string>()
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          const { v1, before } = await play(s, seen)
          const problems: Array<string> = []
          const all: Array<any> = []
          // Per currency, the invoice with the most lines: its documents are checked below.
          const samples = new Map<string, { invoice: any; name: string }>()
          for (const c of s.customers) {
            const listed = await v1.get(`/v1/billing/invoices?customer=${c.id}`)
            if (listed.status !== 200) throw fail("list", listed)
            const invoices: Array<any> = listed.body.invoices
            all.push(...invoices)
            for (const invoice of invoices) {
              const sample = samples.get(invoice.currency)
              if (sample === undefined || invoice.lines.length > sample.invoice.lines.length)
                samples.set(invoice.currency, { invoice, name: c.name })
            }
            // Judged in two spans: under the first discount, then under what the change left.
            const first = c.discount === undefined ? undefined : s.coupons[c.discount.coupon]
            const earlier = invoices.filter((i) => before.get(c.id)!.has(i.id))
            const later = invoices.filter((i) => !before.get(c.id)!.has(i.id))
            const then =
              c.change.kind === "keep" ? first : c.change.kind === "remove" ? undefined : s.coupons[c.change.coupon]
            // A subscriber has its first charge's invoice first (h18), a zero one too (h19).
            const fixedSlug = s.plans.find((p) => p.price > 0)!.slug
            const withFee = invoices
              .filter((i) => i.lines.some((l: any) => l.feature === fixedSlug))
              .sort((a, b) => (a.id < b.id ? -1 : 1))
            const firstPayments = new Set<string>(c.subscribes && withFee.length > 0 ? [withFee[0].id] : [])
            if (zeroFirstCharge.has(c.id)) {
              const zero = withFee[0]
              if (zero === undefined || zero.total !== 0 || zero.status !== "paid" || zero.number === null)
                problems.push(
                  `${c.id}: a zero first charge's invoice is ${JSON.stringify(zero)}, expected paid, total 0`
                )
              else seen.add("zero first charge invoiced")
            }
            const placeOf = (invoice: any) => (before.get(c.id)!.has(invoice.id) ? c : (c.moveTo ?? c))
            if (c.change.kind === "keep")
              problems.push(...checkCustomerInvoices(s, c, invoices, first, placeOf, firstPayments, seen))
            else {
              problems.push(...checkCustomerInvoices(s, c, earlier, first, placeOf, firstPayments, seen))
              problems.push(...checkCustomerInvoices(s, c, later, then, placeOf, firstPayments, seen))
              if (later.length > 0) seen.add(`discount ${c.change.kind}d`)
            }
            if (later.length > 0 && c.moveTo !== undefined) seen.add("buyer moved")
            // Every tracked unit billed exactly once.
            for (const f of s.plans.flatMap((p) => p.features)) {
              const i = s.plans.flatMap((p) => p.features).indexOf(f)
              const tracked = c.usage.reduce((n, round) => add(n, q(round[i] ?? 0)), q(0))
              const billed = invoices.flatMap((inv) => inv.lines).filter((l) => l.feature === f.slug)
              const quantity = billed.reduce((n, l) => add(n, q(l.quantity)), q(0))
              if (cmp(quantity, tracked) !== 0)
                problems.push(`${c.id}: ${f.slug} tracked ${show(tracked)}, billed ${show(quantity)}`)
            }
            // The renewal of a subscribed customer: one fee line of the plan's price.
            if (c.subscribes) {
              const fixed = s.plans.find((p) => p.price > 0)!
              const fees = invoices.flatMap((inv) => inv.lines).filter((l) => l.feature === fixed.slug)
              // The first charge's (h18; of total 0 when a coupon took all of it, h19), and the renewal's.
              const expectedFees = 2
              if (fees.length !== expectedFees)
                problems.push(`${c.id}: ${fees.length} fee lines of ${fixed.slug}, expected ${expectedFees}`)
            }
          }
          invoicesChecked += all.length
          // Numbers: `{prefix}-000001…` consecutive over the organization's finalized invoices, none twice.
          const numbers = all.map((i) => i.number as string).sort()
          const expectedNumbers = numbers.map((_, i) => number(s.prefix, i + 1))
          if (JSON.stringify(numbers) !== JSON.stringify(expectedNumbers))
            problems.push(`numbers ${numbers.join(",")}; expected ${expectedNumbers.join(",")}`)

          // Documents of the invoice with the most lines: the PDF with a key and the hosted PDF without one.
          for (const sample of samples.values()) {
            const names = [sample.name]
            const invoice = sample.invoice
            const pdf = await v1.bytes(`/v1/billing/invoices/${invoice.id}/pdf`)
            if (pdf.status !== 200 || pdf.type !== "application/pdf")
              problems.push(`pdf of ${invoice.number}: ${pdf.status} ${pdf.type}`)
            else
              for (const m of missingFrom(await pdfText(pdf.bytes), invoice, names))
                problems.push(`pdf of ${invoice.number} lacks ${m}`)
            const hosted = await anonymous(server, `${hostedPath(invoice.hostedUrl)}/pdf`)
            if (hosted.status !== 200) problems.push(`hosted pdf of ${invoice.number}: ${hosted.status}`)
            else
              for (const m of missingFrom(await pdfText(new Uint8Array(await hosted.arrayBuffer())), invoice, names))
                problems.push(`hosted pdf of ${invoice.number} lacks ${m}`)
            documentsChecked++
            seen.add(`documents in ${invoice.currency}`)
          }
          if (problems.length > 0) throw new Error(`${problems.length} discrepancies:\n${problems.join("\n")}`)
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true }
      )
      // The property really looked at something.
      expect(invoicesChecked).toBeGreaterThan(RUNS)
      expect(documentsChecked).toBeGreaterThanOrEqual(RUNS)
      // Everything the checker judges was exercised at least once (a run cannot pass vacuously).
      const wanted = [
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
        "discount removed",
        "discount replaced",
        "total zero",
        "buyer moved",
        "attach coupon on a renewal",
        "attach and customer coupons stacked",
        "customer discount on a first payment",
        "graduated",
        "volume",
        ...CURRENCIES,
        ...CURRENCIES.map((c) => `documents in ${c}`)
      ]
      expect(wanted.filter((w) => !seen.has(w))).toEqual([])
      console.log(
        `${database.name}: ${invoicesChecked} invoices and ${documentsChecked} documents checked; exercised ${[...seen].sort().join(", ")}`
      )
    }, 120_000)

    /** An organization with one NGN usage plan (3 per call, 7.5% VAT in NG) and `customers` customers with usage. */
    const usageOrg = async (prefix: string | undefined, customers: ReadonlyArray<{ id: string; name?: string }>) => {
      const org = await server.createOrg()
      const v1 = api(server, org.apiKey)
      const synced = await v1.post("/v1/sync", {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [
          {
            slug: "payg",
            name: "Pay as you go",
            currency: "NGN",
            autoEnable: true,
            features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3 }]
          }
        ],
        taxRates: [{ slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" }],
        coupons: [
          { slug: "ten-left", name: "Ten left", percentOff: 50, duration: "forever", maxRedemptions: 10 },
          { slug: "open", name: "Open", percentOff: 5, duration: "once" }
        ],
        promotionCodes: [{ code: "TENONLY", coupon: "open", maxRedemptions: 10 }]
      })
      if (synced.status !== 200) throw fail("sync", synced)
      if (prefix !== undefined)
        expect((await v1.post("/v1/billing/profile", { invoicePrefix: prefix })).status).toBe(200)
      for (const c of customers) {
        const created = await v1.post("/v1/customers", {
          id: c.id,
          email: `${c.id}@example.com`,
          ...(c.name === undefined ? {} : { name: c.name }),
          address: { line1: "1 Marina", city: "Lagos", country: "NG" }
        })
        if (created.status !== 200) throw fail(`customer ${c.id}`, created)
      }
      const track = async (customer: string, value: number) =>
        expect((await v1.post("/v1/track", { customer, feature: "calls", value })).status).toBe(200)
      const generate = (customer: string) => v1.post("/v1/billing/invoice", { customer })
      /** Pays an open invoice through the sandbox's simulated checkout. */
      const pay = async (id: string) => {
        const started = await v1.post(`/v1/billing/invoice/${id}/pay`)
        expect(started.status).toBe(200)
        if (started.body.paid !== true) {
          const done = await server.fetch(new URL(started.body.checkoutUrl).pathname, { method: "POST" })
          expect(done.status).toBeLessThan(400)
        }
      }
      return { org, v1, track, generate, pay }
    }

    const ids = (n: number, prefix = "c") => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}` }))

    test("numbers: 30 concurrent finalizations in two organizations at once; a new prefix; credit notes", async () => {
      const a = await usageOrg("RACE", ids(30))
      const b = await usageOrg(undefined, ids(10))
      for (let i = 0; i < 30; i++) await a.track(`c${i}`, i + 1)
      for (let i = 0; i < 10; i++) await b.track(`c${i}`, i + 1)
      const answers = await Promise.all([
        ...ids(30).map((c) => a.generate(c.id).then((r) => ({ org: "a", ...r }))),
        ...ids(10).map((c) => b.generate(c.id).then((r) => ({ org: "b", ...r })))
      ])
      expect(answers.filter((r) => r.status !== 200)).toEqual([])
      const numbersOf = (org: string) =>
        answers
          .filter((r) => r.org === org)
          .map((r) => r.body.invoice.number as string)
          .sort()
      expect(numbersOf("a")).toEqual(Array.from({ length: 30 }, (_, i) => number("RACE", i + 1)))
      expect(numbersOf("b")).toEqual(Array.from({ length: 10 }, (_, i) => number("INV", i + 1)))
      // Nothing left to invoice: 409, and no number spent.
      expect((await a.generate("c0")).status).toBe(409)

      // A new prefix numbers later invoices only; the sequence goes on, earlier numbers stay as they were.
      expect((await a.v1.post("/v1/billing/profile", { invoicePrefix: "NEXT2" })).status).toBe(200)
      await a.track("c0", 5)
      await a.track("c1", 7)
      const later = [(await a.generate("c0")).body.invoice, (await a.generate("c1")).body.invoice]
      expect(later.map((i) => i.number)).toEqual([number("NEXT2", 31), number("NEXT2", 32)])
      const c0 = (await a.v1.get("/v1/billing/invoices?customer=c0")).body.invoices.map((i: any) => i.number).sort()
      // c0's first invoice keeps its RACE number (answers[0] is c0's generation).
      expect(c0).toEqual([answers[0]!.body.invoice.number, number("NEXT2", 31)].sort())
      const allA = new Set<string>()
      for (const c of ids(30))
        for (const i of (await a.v1.get(`/v1/billing/invoices?customer=${c.id}`)).body.invoices) allA.add(i.number)
      expect(allA.size).toBe(32)
      expect([...allA].sort()).toEqual(
        [
          ...Array.from({ length: 30 }, (_, i) => number("RACE", i + 1)),
          number("NEXT2", 31),
          number("NEXT2", 32)
        ].sort()
      )

      // Credit notes: refunds of paid invoices, concurrently, each its own `{prefix}-CN-` number, consecutive.
      const paidA = answers
        .filter((r) => r.org === "a")
        .slice(0, 8)
        .map((r) => r.body.invoice)
      for (const invoice of paidA) await a.pay(invoice.id)
      const refunds = await Promise.all(
        paidA.map((invoice) =>
          a.v1.post(`/v1/billing/invoices/${invoice.id}/refund`, { amount: 1, reason: "Müller's refund" })
        )
      )
      expect(refunds.filter((r) => r.status !== 200)).toEqual([])
      const noteNumbers = refunds.flatMap((r) => r.body.creditNotes.map((n: any) => n.number as string)).sort()
      expect(noteNumbers).toEqual(Array.from({ length: 8 }, (_, i) => number("NEXT2-CN", i + 1)))
      // The rest of the first invoice: the next number; past what was paid: 422 and no note.
      const rest = await a.v1.post(`/v1/billing/invoices/${paidA[0].id}/refund`, {})
      expect(rest.status).toBe(200)
      expect(rest.body.amount).toBe(paidA[0].total - 1)
      const notes = await a.v1.get(`/v1/billing/credit-notes?invoice=${paidA[0].id}`)
      expect(notes.body.creditNotes.map((n: any) => [n.number, n.amount, n.invoiceNumber])).toEqual([
        [expect.stringMatching(/^NEXT2-CN-00000[1-8]$/), 1, paidA[0].number],
        [number("NEXT2-CN", 9), paidA[0].total - 1, paidA[0].number]
      ])
      expect((await a.v1.post(`/v1/billing/invoices/${paidA[0].id}/refund`, { amount: 1 })).status).toBe(422)
      expect((await a.v1.get(`/v1/billing/credit-notes?invoice=${paidA[0].id}`)).body.creditNotes).toHaveLength(2)
      // The other organization's credit notes start at 1 with its own prefix.
      const paidB = answers.find((r) => r.org === "b")!.body.invoice
      await b.pay(paidB.id)
      const refundB = await b.v1.post(`/v1/billing/invoices/${paidB.id}/refund`, {})
      expect(refundB.body.creditNotes.map((n: any) => n.number)).toEqual([number("INV-CN", 1)])
    }, 60_000)

    test("documents: every API number in the PDF and the hosted PDF, Unicode names, the hosted page without a key", async () => {
      const names = ["Ọlájídé Àdìgún", "Jürgen Müller", "山田 太郎"]
      const a = await usageOrg(
        "DOC",
        names.map((name, i) => ({ id: `u${i}`, name }))
      )
      const seller = {
        legalName: "山田 Müller Ọlájídé Ltd",
        address: { line1: "12 Adeola Odeku Street", city: "Lagos", postalCode: "101241", country: "NG" },
        email: "billing@olajide.example",
        taxId: "NG-TIN-55501234",
        footer: "Ẹ ṣé — Danke — ありがとう. Payment within 14 days."
      }
      expect((await a.v1.post("/v1/billing/profile", seller)).status).toBe(200)
      // The buyers' details: tax ids for one, reverse charge for another (a note instead of tax).
      const u0 = await a.v1.post("/v1/customers", {
        id: "u0",
        email: "u0@example.com",
        taxIds: [{ type: "ng_tin", value: "TIN-7788-99" }]
      })
      expect(u0.status).toBe(200)
      expect(
        (await a.v1.post("/v1/customers", { id: "u2", email: "u2@example.com", taxExempt: "reverse_charge" })).status
      ).toBe(200)
      expect((await a.v1.post("/v1/customers/u1/discount", { coupon: "open" })).status).toBe(200)
      const invoices: Array<any> = []
      for (const [i] of names.entries()) {
        await a.track(`u${i}`, 123_457 + i * 1_000_000)
        invoices.push((await a.generate(`u${i}`)).body.invoice)
      }
      expect(invoices[1].discount).toBeGreaterThan(0)
      expect(invoices.map((i) => i.tax > 0)).toEqual([true, true, false])
      expect(invoices[2].taxNote).toMatch(/reverse charge/i)
      const details: Array<Array<string>> = [
        ["12 Adeola Odeku Street", "NG-TIN-55501234", seller.footer, "TIN-7788-99"],
        [],
        [invoices[2].taxNote]
      ]

      const textOf = async (bytes: Uint8Array) => {
        expect(new TextDecoder().decode(bytes.slice(0, 5))).toBe("%PDF-")
        return pdfText(bytes)
      }
      for (const [i, invoice] of invoices.entries()) {
        const pdf = await a.v1.bytes(`/v1/billing/invoices/${invoice.id}/pdf`)
        expect([pdf.status, pdf.type]).toEqual([200, "application/pdf"])
        const text = await textOf(pdf.bytes)
        expect(missingFrom(text, invoice, [names[i]!, seller.legalName, ...details[i]!])).toEqual([])
        // The hosted page and its PDF: no key, no cookie.
        const path = hostedPath(invoice.hostedUrl)
        const page = await anonymous(server, path)
        expect(page.status).toBe(200)
        expect(page.headers.get("content-type")).toContain("text/html")
        const html = await page.text()
        // The page shows the same numbers (its text, tags and entities aside).
        const pageText = html
          .replace(/<[^>]*>/g, " ")
          .replace(/&amp;/g, "&")
          .replace(/&#39;|&apos;/g, "'")
        expect(missingFrom(pageText, invoice, [names[i]!])).toEqual([])
        expect(html).toMatch(/action="[^"]*\/pay"/)
        expect(html).toMatch(/href="[^"]*\/pdf"/)
        const hostedPdf = await anonymous(server, `${path}/pdf`)
        expect(hostedPdf.status).toBe(200)
        expect(missingFrom(await textOf(new Uint8Array(await hostedPdf.arrayBuffer())), invoice, [names[i]!])).toEqual(
          []
        )
        // A wrong token is an unknown invoice, for the page, its PDF and its Pay.
        const token = path.split("/").pop()!
        const wrong = path.replace(/[^/]+$/, (token[0] === "A" ? "B" : "A") + token.slice(1))
        expect((await anonymous(server, wrong)).status).toBe(404)
        expect((await anonymous(server, `${wrong}/pdf`)).status).toBe(404)
        expect((await anonymous(server, `${wrong}/pay`, { method: "POST" })).status).toBe(404)
      }

      // Once paid: no Pay button; the documents show what was paid and nothing due.
      await a.pay(invoices[0].id)
      const paid = (await a.v1.get("/v1/billing/invoices?customer=u0")).body.invoices[0]
      expect(paid).toMatchObject({ status: "paid", amountDue: 0, amountPaid: invoices[0].total })
      const path = hostedPath(paid.hostedUrl)
      expect(await (await anonymous(server, path)).text()).not.toMatch(/action="[^"]*\/pay"/)
      const paidText = await textOf(new Uint8Array(await (await anonymous(server, `${path}/pdf`)).arrayBuffer()))
      expect(missingFrom(paidText, paid, [names[0]!])).toEqual([])

      // A credit note's PDF: its number, the invoice's number and the amount.
      const refund = await a.v1.post(`/v1/billing/invoices/${paid.id}/refund`, {
        amount: 1234,
        reason: "Partial refund"
      })
      expect(refund.status).toBe(200)
      const note = refund.body.creditNotes[0]
      expect(note).toMatchObject({ number: number("DOC-CN", 1), invoiceNumber: paid.number, amount: 1234 })
      const notePdf = await a.v1.bytes(`/v1/billing/credit-notes/${note.id}/pdf`)
      expect([notePdf.status, notePdf.type]).toEqual([200, "application/pdf"])
      const noteText = normalize(await textOf(notePdf.bytes))
      for (const expected of [note.number, paid.number, names[0]!]) expect(noteText).toContain(expected)
      expect(showsNumber(noteText, majorDigits(1234n, "NGN"))).toBe(true)
      // The refund shows on the invoice's documents.
      const refunded = (await a.v1.get("/v1/billing/invoices?customer=u0")).body.invoices[0]
      expect(refunded.amountRefunded).toBe(1234)
      const refundedText = normalize(await textOf((await a.v1.bytes(`/v1/billing/invoices/${paid.id}/pdf`)).bytes))
      expect(showsNumber(refundedText, majorDigits(1234n, "NGN"))).toBe(true)
    }, 60_000)

    test("100 concurrent redemptions of a code limited to 10 (and of a coupon limited to 10): exactly 10 each", async () => {
      const a = await usageOrg(undefined, ids(200, "r"))
      const race = async (body: (i: number) => unknown, offset: number) => {
        const answers = await Promise.all(
          Array.from({ length: 100 }, (_, i) => a.v1.post(`/v1/customers/r${offset + i}/discount`, body(i)))
        )
        return {
          ok: answers.filter((r) => r.status === 200).length,
          refused: answers.filter((r) => r.status === 422 && r.body.code === "coupon_invalid").length,
          other: answers.filter((r) => r.status !== 200 && !(r.status === 422 && r.body.code === "coupon_invalid"))
        }
      }
      // The code in other letters is the same code (case-insensitive).
      expect(await race((i) => ({ promotionCode: i % 2 === 0 ? "tenonly" : "TenOnly" }), 0)).toEqual({
        ok: 10,
        refused: 90,
        other: []
      })
      expect(await race(() => ({ coupon: "ten-left" }), 100)).toEqual({ ok: 10, refused: 90, other: [] })
      // Exhausted: the reason says so, and the customers refused have no discount (their invoices show none).
      const again = await a.v1.post("/v1/customers/r0/discount", { promotionCode: "TENONLY" })
      expect([again.status, again.body.code]).toEqual([422, "coupon_invalid"])
      expect(typeof again.body.message).toBe("string")
      let discounted = 0
      for (const c of ids(200, "r")) {
        await a.track(c.id, 10)
        const invoice = (await a.generate(c.id)).body.invoice
        if (invoice.discount > 0) discounted++
      }
      expect(discounted).toBe(20)
    }, 60_000)

    test("refused codes change nothing: expired, inactive, past redeemBy, unknown", async () => {
      const a = await usageOrg(undefined, ids(2, "x"))
      const synced = await a.v1.post("/v1/sync", {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [
          {
            slug: "payg",
            name: "Pay as you go",
            currency: "NGN",
            autoEnable: true,
            features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3 }]
          }
        ],
        taxRates: [{ slug: "vat-ng", name: "VAT", percentage: 7.5, country: "NG" }],
        coupons: [
          { slug: "late", name: "Late", percentOff: 10, duration: "forever", redeemBy: "2020-01-01T00:00:00Z" },
          { slug: "fine", name: "Fine", percentOff: 10, duration: "forever" }
        ],
        promotionCodes: [
          { code: "GONE", coupon: "fine", expiresAt: "2020-01-01T00:00:00Z" },
          { code: "OFF", coupon: "fine", active: false },
          { code: "LATE", coupon: "late" }
        ]
      })
      expect(synced.status).toBe(200)
      for (const body of [
        { promotionCode: "GONE" },
        { promotionCode: "off" },
        { promotionCode: "LATE" },
        { coupon: "late" },
        { promotionCode: "NOPE" },
        { coupon: "nope" }
      ]) {
        const refused = await a.v1.post("/v1/customers/x0/discount", body)
        expect({ body, status: refused.status, code: refused.body.code }).toEqual({
          body,
          status: 422,
          code: "coupon_invalid"
        })
        expect(refused.body.message.length).toBeGreaterThan(0)
      }
      await a.track("x0", 100)
      const invoice = (await a.generate("x0")).body.invoice
      expect(invoice).toMatchObject({ subtotal: 300, discount: 0, tax: 23, total: 323 })
    })

    if (database.name === "postgresql")
      test("across two service instances on one PostgreSQL: 100 concurrent redemptions of a limit of 10 redeem 10", async () => {
        const second = await startServer(database.config, { clock: clock.clock })
        try {
          const a = await usageOrg(undefined, ids(100, "p"))
          const other = api(second, a.org.apiKey)
          const answers = await Promise.all(
            Array.from({ length: 100 }, (_, i) =>
              (i % 2 === 0 ? a.v1 : other).post(`/v1/customers/p${i}/discount`, { promotionCode: "TENONLY" })
            )
          )
          expect(answers.filter((r) => r.status === 200).length).toBe(10)
          expect(answers.filter((r) => r.status === 422 && r.body.code === "coupon_invalid").length).toBe(90)
        } finally {
          await second.close()
        }
      }, 60_000)

    test("refunds race: 6 concurrent full refunds under different keys refund once; one key refunds once", async () => {
      const a = await usageOrg("RFD", ids(2, "f"))
      await a.track("f0", 1000)
      await a.track("f1", 1000)
      const first = (await a.generate("f0")).body.invoice
      const second = (await a.generate("f1")).body.invoice
      await a.pay(first.id)
      await a.pay(second.id)
      const refund = (id: string, key: string, amount?: number) =>
        server
          .fetch(`/v1/billing/invoices/${id}/refund`, {
            method: "POST",
            apiKey: a.org.apiKey,
            headers: { "idempotency-key": key },
            body: JSON.stringify(amount === undefined ? {} : { amount })
          })
          .then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
      const whole = await Promise.all(Array.from({ length: 6 }, (_, i) => refund(first.id, `k-${i}`)))

      expect(whole.map((r) => r.status).sort()).toEqual([200, 422, 422, 422, 422, 422])
      const sameKey = await Promise.all(Array.from({ length: 6 }, () => refund(second.id, "same", 100)))
      expect(sameKey.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200])
      const listed = async (customer: string) =>
        (await a.v1.get(`/v1/billing/invoices?customer=${customer}`)).body.invoices[0]
      expect(await listed("f0")).toMatchObject({ amountPaid: first.total, amountRefunded: first.total })
      expect(await listed("f1")).toMatchObject({ amountPaid: second.total, amountRefunded: 100 })
      const notes = [
        ...(await a.v1.get(`/v1/billing/credit-notes?invoice=${first.id}`)).body.creditNotes,
        ...(await a.v1.get(`/v1/billing/credit-notes?invoice=${second.id}`)).body.creditNotes
      ]
      expect(notes.map((n: any) => [n.amount, n.number]).sort()).toEqual(
        [
          [100, expect.stringMatching(/^RFD-CN-00000[12]$/)],
          [first.total, expect.stringMatching(/^RFD-CN-00000[12]$/)]
        ].sort()
      )
      expect(new Set(notes.map((n: any) => n.number)).size).toBe(2)
    }, 60_000)

    test("a once coupon under concurrent renewals and usage invoices: one invoice each takes it; numbers stay consecutive", async () => {
      const org = await server.createOrg()
      const v1 = api(server, org.apiKey)
      const synced = await v1.post("/v1/sync", {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [
          { slug: "base", name: "Base", price: 10_000, currency: "NGN", interval: "monthly", planGroup: "base" },
          {
            slug: "payg",
            name: "Pay as you go",
            currency: "NGN",
            autoEnable: true,
            planGroup: "payg",
            features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 7 }]
          }
        ],
        coupons: [{ slug: "half-once", name: "Half, once", percentOff: 50, duration: "once" }]
      })
      expect(synced.status).toBe(200)
      expect((await v1.post("/v1/billing/profile", { invoicePrefix: "ONCE" })).status).toBe(200)
      const customers = ids(10, "o").map((c) => c.id)
      for (const id of customers) {
        expect((await v1.post("/v1/customers", { id, email: `${id}@example.com` })).status).toBe(200)
        const attached = await v1.post("/v1/attach", { customer: id, product: "base" })
        const paid = await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
        expect(paid.status).toBeLessThan(400)
        expect((await v1.post(`/v1/customers/${id}/discount`, { coupon: "half-once" })).status).toBe(200)
        expect((await v1.post("/v1/track", { customer: id, feature: "calls", value: 1000 })).status).toBe(200)
      }
      // The first payments' invoices (h18) are made before the race; only the race's invoices are judged below.
      const firstPayments = new Set<string>()
      for (const id of customers)
        for (const i of (await v1.get(`/v1/billing/invoices?customer=${id}`)).body.invoices) firstPayments.add(i.id)
      clock.advance(32 * DAY)
      // The renewal run and every customer's usage invoice at once.
      const [_, ...generated] = await Promise.all([
        server.run(Effect.flatMap(Renewals, (r) => r.runDue)),
        ...customers.map((id) => v1.post("/v1/billing/invoice", { customer: id }))
      ])
      expect(generated.map((g) => g.status)).toEqual(customers.map(() => 200))
      const numbers: Array<string> = []
      for (const id of customers) {
        const all: Array<any> = (await v1.get(`/v1/billing/invoices?customer=${id}`)).body.invoices
        numbers.push(...all.map((i) => i.number))
        const invoices = all.filter((i) => !firstPayments.has(i.id))
        // A renewal (10,000) and a usage invoice (7,000): exactly one of them is halved.
        expect(invoices.map((i) => i.subtotal).sort()).toEqual([10_000, 7_000].sort())
        expect({ id, discounted: invoices.filter((i) => i.discount > 0).map((i) => i.discount / i.subtotal) }).toEqual({
          id,
          discounted: [0.5]
        })
      }
      // With each first payment's invoice (h18): three each.
      expect(numbers.sort()).toEqual(Array.from({ length: 30 }, (_, i) => number("ONCE", i + 1)))
    }, 60_000)
  })
}
