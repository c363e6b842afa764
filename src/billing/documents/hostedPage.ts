import { createHash } from "node:crypto"
import type { BillingDocument } from "./model.ts"

/** Everything shown is text from the document: escaped, never markup (decisions.md §13). */
export const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const STYLE =
  "body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}" +
  "header{display:flex;justify-content:space-between;gap:2rem;border-bottom:1px solid #ddd;padding-bottom:1rem}" +
  ".muted{color:#666}.right{text-align:right}table{width:100%;border-collapse:collapse;margin:1rem 0}" +
  "th,td{padding:.35rem .25rem;text-align:left;vertical-align:top}th{font-size:.8rem;color:#666;border-bottom:1px solid #ddd}" +
  "td.num,th.num{text-align:right;white-space:nowrap}tr.adj td{font-size:.85rem;color:#666;padding-top:0}" +
  "table.totals{width:auto;margin-left:auto}tr.strong td{font-weight:600;border-top:1px solid #ddd}" +
  ".actions{display:flex;gap:1rem;align-items:center;margin:1.5rem 0}" +
  "button{font-size:1rem;padding:.6rem 1.4rem;border-radius:8px;border:0;background:#0a7d45;color:#fff;cursor:pointer}" +
  ".notice{padding:.75rem 1rem;border-radius:8px;background:#f4f4f4}footer{border-top:1px solid #ddd;margin-top:2rem;padding-top:1rem}"

/**
 * No script, no outside source: the one inline style is allowed by its hash, nothing else loads; the page cannot be
 * framed, and its address (which holds the token) is not sent on as a referrer.
 */
export const HOSTED_HEADERS = {
  "content-security-policy": `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; base-uri 'none'; frame-ancestors 'none'`,
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "cache-control": "no-store"
}

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escape(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`

export const messagePage = (title: string, message: string) =>
  page(title, `<h1>${escape(title)}</h1><p>${escape(message)}</p>`)

const party = (p: BillingDocument["seller"]) =>
  (p.name === null ? "" : `<strong>${escape(p.name)}</strong><br>`) + p.lines.map(escape).join("<br>")

/** The hosted invoice: the document's text as HTML, its PDF link, and a Pay button while it can be paid. */
export const invoicePage = (
  doc: BillingDocument,
  options: { readonly payable: boolean; readonly pdfPath: string; readonly payPath: string; readonly notice?: string }
) =>
  page(
    `${doc.title} ${doc.number}`,
    `<header><div><h1>${escape(doc.title)} ${escape(doc.number)}</h1><p class="muted">${escape(doc.statusLabel)}</p></div>` +
      `<div class="right">${party(doc.seller)}</div></header>` +
      (options.notice === undefined ? "" : `<p class="notice">${escape(options.notice)}</p>`) +
      `<section><h2 class="muted">${escape(doc.buyerHeading)}</h2><p>${party(doc.buyer)}</p>` +
      `<table><tbody>${doc.facts.map(([k, v]) => `<tr><td class="muted">${escape(k)}</td><td>${escape(v)}</td></tr>`).join("")}</tbody></table></section>` +
      `<table><thead><tr><th>Description</th><th>Period</th><th class="num">Qty</th><th class="num">Unit price</th><th class="num">Amount</th></tr></thead><tbody>` +
      doc.lines
        .map(
          (l) =>
            `<tr><td>${escape(l.description)}</td><td class="muted">${escape(l.period)}</td><td class="num">${escape(l.quantity)}</td>` +
            `<td class="num">${escape(l.unitPrice)}</td><td class="num">${escape(l.amount)}</td></tr>` +
            l.adjustments
              .map(
                (a) =>
                  `<tr class="adj"><td colspan="4">${escape(a.label)}</td><td class="num">${escape(a.amount)}</td></tr>`
              )
              .join("")
        )
        .join("") +
      `</tbody></table><table class="totals"><tbody>` +
      doc.totals
        .map(
          (t) =>
            `<tr${t.strong ? ' class="strong"' : ""}><td>${escape(t.label)}</td><td class="num">${escape(t.amount)}</td></tr>`
        )
        .join("") +
      `</tbody></table>` +
      doc.notes.map((n) => `<p>${escape(n)}</p>`).join("") +
      `<div class="actions">` +
      (options.payable
        ? `<form method="post" action="${escape(options.payPath)}"><button type="submit">Pay ${escape(doc.totals.find((t) => t.label === "Amount due")?.amount ?? "")}</button></form>`
        : "") +
      `<a href="${escape(options.pdfPath)}">Download PDF</a></div>` +
      (doc.footer === null ? "" : `<footer class="muted">${escape(doc.footer)}</footer>`)
  )
