// What scripts/folder-cycles.mjs and scripts/file-cycles.mjs share: the source files under a folder, and the cycles
// of a directed graph.
import { readdirSync, statSync } from "node:fs"
import { join } from "node:path"

/** Every .ts/.tsx file under `dir`, tests left out. */
export const sourceFiles = (dir, files = []) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) sourceFiles(path, files)
    else if (/\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name)) files.push(path)
  }
  return files
}

/**
 * The cycles among `nodes` (Tarjan's strongly connected components: any component of more than one node is a cycle),
 * each sorted; `successors(v)` lists the nodes v points to.
 */
export const cyclesOf = (nodes, successors) => {
  let index = 0
  const stack = []
  const state = new Map()
  const cycles = []
  const visit = (v) => {
    state.set(v, { index, low: index, onStack: true })
    index++
    stack.push(v)
    for (const w of successors(v)) {
      if (!state.has(w)) {
        visit(w)
        state.get(v).low = Math.min(state.get(v).low, state.get(w).low)
      } else if (state.get(w).onStack) state.get(v).low = Math.min(state.get(v).low, state.get(w).index)
    }
    if (state.get(v).low === state.get(v).index) {
      const component = []
      let w
      do {
        w = stack.pop()
        state.get(w).onStack = false
        component.push(w)
      } while (w !== v)
      if (component.length > 1) cycles.push(component.sort())
    }
  }
  for (const v of nodes) if (!state.has(v)) visit(v)
  return cycles
}
