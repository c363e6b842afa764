import PDFDocument from "pdfkit"
import { type FontFace, fonts, runsOf } from "./fonts.ts"
import type { BillingDocument } from "./model.ts"

/** A4 in points, with 48 pt margins. */
const PAGE = { width: 595.28, height: 841.89, margin: 48 }
const CONTENT = PAGE.width - 2 * PAGE.margin
const INK = "#1a1a1a"
const MUTED = "#666666"
const RULE = "#d0d0d0"

interface TextOptions {
  readonly size?: number
  readonly bold?: boolean
  readonly color?: string
  /** Right-aligns inside [x, x + width] when `align` is `right`; otherwise cut with an ellipsis past `width`. */
  readonly width?: number
  readonly align?: "left" | "right"
}

/**
 * Shaping without `ccmp`: Noto Sans's ccmp draws ṣ, ẹ, ọ (Yoruba) as a base letter and a dot-below mark, and a PDF's
 * text layer maps each glyph to one text, so the `s` glyph read ṣ back as "s" (pdftotext, copy and search lost the
 * letter). With ccmp off the font's precomposed glyphs are drawn (each its own letter); marks
 * are still placed by `mark`/`mkmk`. PDFKit passes this object to fontkit as is; its types only know tag arrays.
 */
const SHAPING = { features: { ccmp: false } as unknown as Array<PDFKit.Mixins.OpenTypeFeatures> }

/**
 * Drawing on one PDFKit document: every string goes through `runsOf`, so each character is drawn in a face that
 * has it, and measured the same way (alignment and wrapping see the real widths).
 */
const makeCanvas = (pdf: PDFKit.PDFDocument) => {
  const set = fonts()
  for (const face of [...set.regular, ...set.bold]) pdf.registerFont(face.name, face.data)
  const facesOf = (bold: boolean): ReadonlyArray<FontFace> => (bold ? set.bold : set.regular)

  const width = (text: string, size: number, bold: boolean) =>
    runsOf(text, facesOf(bold)).reduce(
      (sum, run) => sum + pdf.font(run.font).fontSize(size).widthOfString(run.text, SHAPING),
      0
    )

  const fit = (text: string, max: number, size: number, bold: boolean) => {
    if (width(text, size, bold) <= max) return text
    const chars = [...text]
    while (chars.length > 0 && width(`${chars.join("")}…`, size, bold) > max) chars.pop()
    return `${chars.join("")}…`
  }

  const text = (value: string, x: number, y: number, options: TextOptions = {}) => {
    const size = options.size ?? 9
    const bold = options.bold ?? false
    // NFC: a name sent decomposed (s + U+0323) is drawn with the letter's own glyph, as the text layer needs.
    const normalized = value.normalize("NFC")
    const shown = options.width === undefined ? normalized : fit(normalized, options.width, size, bold)
    let cx = options.align === "right" && options.width !== undefined ? x + options.width - width(shown, size, bold) : x
    pdf.fillColor(options.color ?? INK)
    for (const run of runsOf(shown, facesOf(bold))) {
      pdf.font(run.font).fontSize(size)
      pdf.text(run.text, cx, y, { lineBreak: false, ...SHAPING })
      cx += pdf.widthOfString(run.text, SHAPING)
    }
  }

  /** Lines of at most `max` points, broken at spaces (a word longer than a line is cut). */
  const wrap = (value: string, max: number, size: number, bold = false): Array<string> => {
    const out: Array<string> = []
    for (const paragraph of value.normalize("NFC").split(/\r?\n/)) {
      let line = ""
      for (const word of paragraph.split(/\s+/).filter((w) => w !== "")) {
        const next = line === "" ? word : `${line} ${word}`
        if (width(next, size, bold) <= max || line === "") line = next
        else {
          out.push(line)
          line = word
        }
      }
      out.push(line)
    }
    return out.map((l) => fit(l, max, size, bold))
  }

  const rule = (y: number, color = RULE) =>
    pdf
      .moveTo(PAGE.margin, y)
      .lineTo(PAGE.width - PAGE.margin, y)
      .lineWidth(0.6)
      .strokeColor(color)
      .stroke()

  return { text, wrap, rule }
}

/** Columns of the lines table: description, period, quantity, unit price, amount. */
const COLUMNS = { description: 0, period: 190, quantity: 262, unitPrice: 312, amount: 430 }
const AMOUNT_WIDTH = CONTENT - COLUMNS.amount

/** The document as a PDF (A4), its fonts embedded as subsets. */
export const renderPdf = (doc: BillingDocument): Promise<Uint8Array> =>
  new Promise((resolve, reject) => {
    const pdf = new PDFDocument({
      size: "A4",
      margin: PAGE.margin,
      autoFirstPage: true,
      info: {
        Title: `${doc.title} ${doc.number}`,
        Author: doc.seller.name ?? "",
        CreationDate: new Date(doc.createdAt)
      }
    })
    const chunks: Array<Uint8Array> = []
    pdf.on("data", (chunk: Uint8Array) => chunks.push(chunk))
    pdf.on("end", () => resolve(new Uint8Array(Buffer.concat(chunks))))
    pdf.on("error", reject)
    try {
      draw(pdf, doc)
      pdf.end()
    } catch (error) {
      reject(error)
    }
  })

const draw = (pdf: PDFKit.PDFDocument, doc: BillingDocument) => {
  const c = makeCanvas(pdf)
  const left = PAGE.margin
  const right = PAGE.width - PAGE.margin
  let y = PAGE.margin

  const room = (needed: number) => {
    if (y + needed > PAGE.height - PAGE.margin - 24) {
      pdf.addPage()
      y = PAGE.margin
    }
  }

  // Heading: the title and number on the left, the seller on the right.
  c.text(doc.title, left, y, { size: 22, bold: true })
  c.text(doc.number, left, y + 30, { size: 11, bold: true })
  c.text(doc.statusLabel, left, y + 46, { size: 9, color: MUTED })
  let sy = y
  const sellerWidth = 230
  const sellerX = right - sellerWidth
  if (doc.seller.name !== null) {
    c.text(doc.seller.name, sellerX, sy, { size: 11, bold: true, width: sellerWidth, align: "right" })
    sy += 15
  }
  for (const line of doc.seller.lines) {
    c.text(line, sellerX, sy, { size: 9, width: sellerWidth, align: "right", color: MUTED })
    sy += 12
  }
  y = Math.max(y + 64, sy) + 14
  c.rule(y)
  y += 14

  // Bill to, and the document's dates.
  const top = y
  c.text(doc.buyerHeading, left, y, { size: 8, bold: true, color: MUTED })
  y += 13
  if (doc.buyer.name !== null) {
    c.text(doc.buyer.name, left, y, { size: 10, bold: true, width: 260 })
    y += 14
  }
  for (const line of doc.buyer.lines) {
    c.text(line, left, y, { size: 9, width: 260 })
    y += 12
  }
  let my = top
  for (const [label, value] of doc.facts) {
    c.text(label, 320, my, { size: 9, color: MUTED })
    c.text(value, 420, my, { size: 9, width: right - 420, align: "right" })
    my += 13
  }
  y = Math.max(y, my) + 16

  // Lines.
  const header = () => {
    c.text("Description", left + COLUMNS.description, y, { size: 8, bold: true, color: MUTED })
    c.text("Period", left + COLUMNS.period, y, { size: 8, bold: true, color: MUTED })
    c.text("Qty", left + COLUMNS.quantity, y, { size: 8, bold: true, color: MUTED, width: 40, align: "right" })
    c.text("Unit price", left + COLUMNS.unitPrice, y, {
      size: 8,
      bold: true,
      color: MUTED,
      width: COLUMNS.amount - COLUMNS.unitPrice - 8,
      align: "right"
    })
    c.text("Amount", left + COLUMNS.amount, y, {
      size: 8,
      bold: true,
      color: MUTED,
      width: AMOUNT_WIDTH,
      align: "right"
    })
    y += 12
    c.rule(y)
    y += 6
  }
  header()
  for (const line of doc.lines) {
    const description = c.wrap(line.description, COLUMNS.period - 8, 9)
    room(14 * description.length + 12 * (line.adjustments.length + 1))
    description.forEach((part, i) => c.text(part, left, y + i * 11, { size: 9 }))
    c.text(line.period, left + COLUMNS.period, y, {
      size: 8,
      color: MUTED,
      width: COLUMNS.quantity - COLUMNS.period - 6
    })
    c.text(line.quantity, left + COLUMNS.quantity, y, { size: 9, width: 40, align: "right" })
    c.text(line.unitPrice, left + COLUMNS.unitPrice, y, {
      size: 9,
      width: COLUMNS.amount - COLUMNS.unitPrice - 8,
      align: "right"
    })
    c.text(line.amount, left + COLUMNS.amount, y, { size: 9, width: AMOUNT_WIDTH, align: "right" })
    y += 11 * description.length + 2
    for (const adjustment of line.adjustments) {
      c.text(adjustment.label, left + 12, y, { size: 8, color: MUTED, width: COLUMNS.amount - 20 })
      c.text(adjustment.amount, left + COLUMNS.amount, y, {
        size: 8,
        color: MUTED,
        width: AMOUNT_WIDTH,
        align: "right"
      })
      y += 11
    }
    y += 5
  }
  c.rule(y)
  y += 10

  // Totals, right-aligned under the amounts.
  room(14 * doc.totals.length + 10)
  for (const total of doc.totals) {
    if (total.strong) {
      pdf
        .moveTo(left + 280, y - 3)
        .lineTo(right, y - 3)
        .lineWidth(0.6)
        .strokeColor(RULE)
        .stroke()
    }
    const size = total.strong ? 10.5 : 9
    c.text(total.label, left + 280, y, { size, bold: total.strong })
    c.text(total.amount, left + COLUMNS.amount - 40, y, {
      size,
      bold: total.strong,
      width: AMOUNT_WIDTH + 40,
      align: "right"
    })
    y += total.strong ? 17 : 14
  }
  y += 10

  // Notes (why no tax, the reason for a credit note), then the footer.
  for (const note of doc.notes) {
    const lines = c.wrap(note, CONTENT, 9)
    room(12 * lines.length)
    for (const line of lines) {
      c.text(line, left, y, { size: 9 })
      y += 12
    }
    y += 4
  }
  if (doc.footer !== null) {
    const lines = c.wrap(doc.footer, CONTENT, 8)
    room(12 * lines.length + 8)
    y += 8
    c.rule(y)
    y += 8
    for (const line of lines) {
      c.text(line, left, y, { size: 8, color: MUTED })
      y += 11
    }
  }
}
