import { statements } from "./statements.ts"

/**
 * `usage_events_customer` goes (docs/decisions.md, "Batches and event time"). Its one reader was the unbilled-usage
 * view's sum of a line's span; that view now adds up the line's own events, which the partial index
 * `usage_events_unbilled` already finds. Every recorded event paid an entry in it at a random place: on SQLite, over
 * 10,000 balances in batches of 100, 438 of the 953 pages a commit wrote to the log.
 */
export default statements(`DROP INDEX usage_events_customer`)
