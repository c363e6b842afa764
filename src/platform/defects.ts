const isTagged = (u: unknown, tag: string): boolean =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === tag

/**
 * A short description of a defect for the server log: its kind and the driver's code, never its message, stack, SQL
 * text or bound values (the HTTP layer's 500s and the background workers' skipped items log it alike).
 */
export const describeDefect = (defect: unknown) => {
  if (isTagged(defect, "RowShapeError")) {
    // A stored row of the wrong shape: its table and columns, which never hold values (src/platform/db/rowSchemas.ts).
    const row = defect as { table: string; problems: ReadonlyArray<string> }
    return { defect: "RowShapeError", table: row.table, problems: row.problems.join("; ") }
  }
  const tagged = typeof defect === "object" && defect !== null ? (defect as { _tag?: unknown })._tag : undefined
  const tag = typeof tagged === "string" ? tagged : defect instanceof Error ? defect.name : typeof defect
  const cause = (defect as { cause?: { code?: unknown } } | null)?.cause
  return { defect: tag, code: cause && typeof cause === "object" && "code" in cause ? String(cause.code) : undefined }
}
