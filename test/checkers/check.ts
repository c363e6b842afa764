/**
 * One customer's invoices judged against §15–§16 from the scenario alone: line amounts from the catalog's pricing,
 * discounts from the customer's coupon, taxes from the synced rates and the buyer's address, totals from both.
 * Answers a list of discrepancies (empty when every number agrees), each naming the invoice and what differed.
 */
import {
  type Buyer,
  lineDiscounts,
  lineTax,
  matchingRates,
  max,
  q,
  ratedAmount,
  show,
  tierShares,
  sum,
  type TaxRate
} from "./rules.ts"
import { attachedCoupon, type Coupon, type CustomerSpec, type Scenario } from "./scenario.ts"

export interface Place {
  readonly country?: string
  readonly state?: string
  readonly taxExempt: CustomerSpec["taxExempt"]
}

const big = (n: unknown): bigint => {
  if (typeof n !== "number" || !Number.isSafeInteger(n)) throw new Error(`not a whole minor-unit amount: ${n}`)
  return BigInt(n)
}

export const checkCustomerInvoices = (
  s: Scenario,
  customer: CustomerSpec,
  invoices: ReadonlyArray<any>,
  /** The customer's discount while these invoices were made (none when undefined). */
  coupon: Coupon | undefined,
  /** The customer's address and tax status when an invoice was finalized (tax is decided then, §16). */
  placeOf: (invoice: any) => Place,
  /** The invoices of a subscription's first payment (h18: the first charge is an invoice, priced at the attach). */
  firstPayments: ReadonlySet<string>,
  /** What the invoices exercised (`percent discount`, `inclusive tax`, `JPY`, …), so a run cannot pass vacuously. */
  seen: Set<string> = new Set()
): Array<string> => {
  const problems: Array<string> = []
  const planOf = new Map<string, string>()
  for (const p of s.plans) {
    if (p.price > 0) planOf.set(p.slug, p.slug)
    for (const f of p.features) planOf.set(f.slug, p.slug)
  }
  const featureOf = new Map(s.plans.flatMap((p) => p.features.map((f) => [f.slug, f] as const)))
  let discountUses = 0
  let eligible = 0

  for (const invoice of [...invoices].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    const where = `${customer.id} ${invoice.number} (${invoice.currency})`
    const place = placeOf(invoice)
    const buyer: Buyer = {
      ...(place.country === undefined ? {} : { country: place.country }),
      ...(place.state === undefined ? {} : { state: place.state }),
      taxExempt: place.taxExempt
    }
    const rates: ReadonlyArray<TaxRate> = matchingRates(s.taxRates, buyer)
    const expect = (what: string, actual: unknown, expected: unknown) => {
      if (String(actual) !== String(expected)) problems.push(`${where}: ${what} is ${actual}, expected ${expected}`)
    }
    const lines: ReadonlyArray<any> = invoice.lines
    // Line amounts from the catalog's pricing (§1: half-up once per line).
    for (const line of lines) {
      const feature = featureOf.get(line.feature)
      const plan = s.plans.find((p) => p.slug === line.feature && p.price > 0)
      if (feature !== undefined) {
        {
          const units = q(line.quantity)
          expect(`line ${line.feature} amount`, line.amount, ratedAmount(feature.pricing, units))
          if (feature.pricing.kind !== "flat") {
            const shares = tierShares(feature.pricing, units).map((t) => `${t.tier}:${show(t.units)}:${t.amount}`)
            const given = (line.tierBreakdown ?? []).map((t: any) => `${t.tier}:${t.units}:${t.amount}`)
            expect(`line ${line.feature} tierBreakdown (tier:units:amount)`, given.join(" "), shares.join(" "))
          }
        }
      } else if (plan !== undefined) {
        expect(`line ${line.feature} (plan fee) amount`, line.amount, plan.price)
      } else problems.push(`${where}: a line of nothing the catalog has: ${JSON.stringify(line)}`)
      if (plan === undefined && feature === undefined) continue
      const currency = s.plans.find((p) => p.slug === planOf.get(line.feature))!.currency
      expect(`line ${line.feature} currency`, invoice.currency, currency)
    }

    // Discounts (§15). A renewal takes the subscription's coupon first (the project's order: the subscription's, then
    // the customer's on what is left); its first charge already spent one use, so a `once` coupon, or `repeating`
    // for 1, leaves the renewal at full price. Then the customer's coupon on the lines it covers, or none.
    const facts = lines.map((l) => ({ amount: big(l.amount), plan: planOf.get(l.feature) }))
    const none = lines.map(() => 0n)
    const renewal = lines.some((l) => s.plans.some((p) => p.price > 0 && p.slug === l.feature))
    const first = firstPayments.has(invoice.id)
    const bound = renewal ? attachedCoupon(s, customer) : undefined
    // The first payment spends the subscription coupon's first use; the (one) renewal its second.
    const subscriptionShares =
      bound !== undefined && (first || bound.duration === "forever" || (bound.durationInCycles ?? 1) >= 2)
        ? lineDiscounts(bound, invoice.currency, facts)
        : none
    if (sum(subscriptionShares) > 0n)
      seen.add(first ? "attach coupon on a first payment" : "attach coupon on a renewal")
    if (first) seen.add("first payment invoice")
    const left = facts.map((f, i) => ({ ...f, amount: f.amount - subscriptionShares[i]! }))
    // Then the customer's own discount on what is left: every later invoice while it lasts (§15), a first payment's
    // too.
    const withCoupon = coupon === undefined ? none : lineDiscounts(coupon, invoice.currency, left)
    const couponTakes = sum(withCoupon) > 0n
    if (couponTakes) eligible++
    const actualDiscounts = lines.map(
      (l, i) => sum((l.discounts ?? []).map((d: any) => big(d.amount))) - subscriptionShares[i]!
    )
    const matches = (expected: ReadonlyArray<bigint>) => expected.every((d, i) => d === actualDiscounts[i])
    let expectedDiscounts: ReadonlyArray<bigint>
    if (!couponTakes || coupon === undefined) expectedDiscounts = none
    else if (coupon.duration === "forever") expectedDiscounts = withCoupon
    else {
      // A `once` or `repeating` discount lasts that many invoices: this one either is one of them or comes after.
      const limit = coupon.duration === "once" ? 1 : coupon.durationInCycles!
      expectedDiscounts = matches(withCoupon) && discountUses < limit ? withCoupon : none
    }
    if (expectedDiscounts === withCoupon && couponTakes) {
      discountUses++
      seen.add(coupon !== undefined && "percentOff" in coupon ? "percent discount" : "amount-off discount")
      if (coupon?.plans !== undefined) seen.add("plan-restricted discount")
      if (coupon !== undefined && "amountOff" in coupon && sum(withCoupon) < BigInt(coupon.amountOff))
        seen.add("amount off capped")
      if (expectedDiscounts.filter((d) => d > 0n).length > 1) seen.add("discount over several lines")
      if (sum(subscriptionShares) > 0n) seen.add("attach and customer coupons stacked")
      if (first) seen.add("customer discount on a first payment")
    } else if (couponTakes) seen.add(`${coupon?.duration} discount used up`)
    seen.add(invoice.currency)
    if (renewal) seen.add("renewal")
    if (lines.some((l) => featureOf.get(l.feature)?.pricing.kind === "graduated")) seen.add("graduated")
    if (lines.some((l) => featureOf.get(l.feature)?.pricing.kind === "volume")) seen.add("volume")
    lines.forEach((line, i) => {
      // Each line's discounts in order: the subscription's, then the customer's, each only when it took something.
      const expectedList = [
        ...(subscriptionShares[i]! > 0n ? [`${bound!.slug}:${subscriptionShares[i]}`] : []),
        ...(expectedDiscounts[i]! > 0n ? [`${coupon!.slug}:${expectedDiscounts[i]}`] : [])
      ]
      const actualList = (line.discounts ?? []).map((d: any) => `${d.coupon}:${d.amount}`)
      expect(`line ${line.feature} discounts`, actualList.join(" "), expectedList.join(" "))
    })
    const allDiscounts = lines.map((_, i) => subscriptionShares[i]! + expectedDiscounts[i]!)

    // Taxes (§16): per line on the amount after its discounts, each matching rate, half-up once.
    let tax = 0n
    let exclusive = 0n
    lines.forEach((line, i) => {
      const net = big(line.amount) - allDiscounts[i]!
      const given = new Map<string, bigint>()
      for (const t of line.taxes ?? []) {
        if (given.has(t.rate)) problems.push(`${where}: line ${line.feature} lists rate ${t.rate} twice`)
        given.set(t.rate, big(t.amount))
        if (!rates.some((r) => r.slug === t.rate))
          problems.push(`${where}: line ${line.feature} taxed by ${t.rate}, which does not match the buyer`)
      }
      for (const rate of rates) {
        const expected = lineTax(rate, net, buyer)
        expect(
          `line ${line.feature} tax ${rate.slug} (${rate.percentage}%${rate.inclusive ? " incl." : ""} of ${net})`,
          given.get(rate.slug) ?? 0n,
          expected
        )
        tax += expected
        if (expected > 0n)
          seen.add(rate.inclusive ? "inclusive tax" : rate.state !== undefined ? "state tax" : "exclusive tax")
        if (!rate.inclusive) exclusive += expected
      }
    })

    // Totals (§16) and what is due.
    const subtotal = sum(facts.map((f) => f.amount))
    const discount = sum(allDiscounts)
    const total = max(0n, subtotal - discount + exclusive)
    if (total === 0n && subtotal > 0n) seen.add("total zero")
    expect("subtotal", invoice.subtotal, subtotal)
    expect("discount", invoice.discount, discount)
    expect("tax", invoice.tax, tax)
    expect("total", invoice.total, total)
    const paid = big(invoice.amountPaid)
    const credit = big(invoice.creditApplied ?? 0)
    expect("amountDue", invoice.amountDue, max(0n, total - credit - paid))
    if (invoice.status === "paid" && big(invoice.amountDue) !== 0n) problems.push(`${where}: paid with something due`)
    if (invoice.status === "open" && total - credit - paid <= 0n) problems.push(`${where}: open with nothing due`)

    // The note for an exempt or reverse-charge buyer, and none otherwise.
    const note: string | undefined = invoice.taxNote
    if (buyer.taxExempt === "none" || rates.length === 0) {
      if (buyer.taxExempt === "none" && note !== undefined) problems.push(`${where}: taxNote ${note} for a taxed buyer`)
    } else if (note === undefined) problems.push(`${where}: no taxNote for a ${buyer.taxExempt} buyer`)
    else if (
      seen.add(`${buyer.taxExempt} note`) &&
      !new RegExp(buyer.taxExempt === "exempt" ? "exempt" : "reverse charge", "i").test(note)
    )
      problems.push(`${where}: taxNote "${note}" does not say why (${buyer.taxExempt})`)
  }

  if (coupon !== undefined && coupon.duration !== "forever") {
    const limit = coupon.duration === "once" ? 1 : coupon.durationInCycles!
    if (discountUses !== Math.min(limit, eligible))
      problems.push(
        `${customer.id}: coupon ${coupon.slug} (${coupon.duration}, ${limit}) discounted ${discountUses} invoices of ${eligible} it could`
      )
  }
  return problems
}
