/** An invoice's documents judged against its API numbers: every figure as §13 money in the PDF's extracted text. */
import { majorDigits } from "./rules.ts"

/** pdftotext's text with digit grouping taken out, so `1,234.56` and `1234.56` read alike. */
export const normalize = (text: string) => text.replace(/(\d)[,\u00a0\u202f' ](?=\d{3}(?!\d))/g, "$1")

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** `digits` standing alone in `text`: not part of a longer number. */
export const showsNumber = (text: string, digits: string) =>
  new RegExp(`(?<![\\d.])${escape(digits)}(?![\\d]|\\.\\d)`).test(text)

/** Every number the API gives for an invoice, as §13 money (major units by exponent), with what it is. */
export const invoiceFigures = (invoice: any): Array<{ what: string; digits: string }> => {
  const money = (what: string, minor: number) => ({
    what,
    digits: majorDigits(BigInt(Math.abs(minor)), invoice.currency)
  })
  return [
    money("subtotal", invoice.subtotal),
    money("discount", invoice.discount),
    money("tax", invoice.tax),
    money("total", invoice.total),
    money("amountPaid", invoice.amountPaid),
    money("amountDue", invoice.amountDue),
    ...invoice.lines.flatMap((l: any) => [
      money(`line ${l.feature} amount`, l.amount),
      ...(l.discounts ?? []).map((d: any) => money(`line ${l.feature} discount ${d.coupon}`, d.amount)),
      ...(l.taxes ?? []).map((t: any) => money(`line ${l.feature} tax ${t.rate}`, t.amount))
    ])
  ]
}

/** What of `figures` (and the invoice number and names) the text lacks. */
export const missingFrom = (text: string, invoice: any, names: ReadonlyArray<string>): Array<string> => {
  const normalized = normalize(text)
  return [
    ...invoiceFigures(invoice)
      .filter((f) => !showsNumber(normalized, f.digits))
      .map((f) => `${f.what} ${f.digits} ${invoice.currency}`),
    ...[invoice.number, ...names].filter((n) => !text.includes(n)).map((n) => `text "${n}"`)
  ]
}
