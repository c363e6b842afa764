import { expect } from "bun:test"

/** The text of a PDF, as Debian's poppler-utils extracts it (its layout mode keeps a line's cells on one line). */
export const pdfText = async (pdf: Uint8Array): Promise<string> => {
  const proc = Bun.spawn(["pdftotext", "-layout", "-enc", "UTF-8", "-", "-"], { stdin: pdf, stdout: "pipe" })
  const text = await new Response(proc.stdout).text()
  expect(await proc.exited).toBe(0)
  return text
}
