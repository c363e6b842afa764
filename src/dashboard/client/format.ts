// Money as the page shows it (decisions.md §13): the shared formatting of the service's pages (src/web/client/).
export { money } from "../../web/client/format.ts"
