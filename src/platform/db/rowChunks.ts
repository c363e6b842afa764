/**
 * Rows of a multi-row statement split so that no statement binds more than `MAX_BOUND` values: PostgreSQL's protocol
 * allows 65,535 and SQLite's default limit is 32,766.
 */
export const MAX_BOUND = 30_000

export const rowChunks = <A>(rows: ReadonlyArray<A>, columns: number): ReadonlyArray<ReadonlyArray<A>> => {
  const size = Math.max(1, Math.floor(MAX_BOUND / columns))
  const chunks: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < rows.length; i += size) chunks.push(rows.slice(i, i + size))
  return chunks
}
