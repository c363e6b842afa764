#!/usr/bin/env node
// Fails when the folders under src/ import each other in a cycle (a feature must not reach back into one that
// depends on it). Reads static imports only; prints each cycle found as a path of folders.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const root = resolve(process.argv[2] ?? "src")
const files = []
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) walk(path)
    else if (/\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name)) files.push(path)
  }
}
walk(root)

const folderOf = (file) => relative(root, dirname(file)).split("/")[0] || "."
const edges = new Map()
for (const file of files) {
  const from = folderOf(file)
  const text = readFileSync(file, "utf8")
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+["'](\.[^"']+)["']/g)) {
    const to = folderOf(resolve(dirname(file), match[1]))
    if (to === from || to.startsWith("..")) continue
    if (!edges.has(from)) edges.set(from, new Map())
    const targets = edges.get(from)
    if (!targets.has(to)) targets.set(to, `${relative(root, file)} -> ${match[1]}`)
  }
}

// Tarjan's strongly connected components: any component of more than one folder is a cycle.
let index = 0
const stack = []
const state = new Map()
const cycles = []
const visit = (v) => {
  state.set(v, { index, low: index, onStack: true })
  index++
  stack.push(v)
  for (const w of edges.get(v)?.keys() ?? []) {
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
for (const v of edges.keys()) if (!state.has(v)) visit(v)

if (cycles.length === 0) {
  console.log(
    `no folder cycles among ${new Set([...edges.keys()]).size} folders of ${relative(process.cwd(), root) || "."}`
  )
  process.exit(0)
}
for (const component of cycles) {
  console.log(`cycle: ${component.join(", ")}`)
  for (const from of component) {
    for (const [to, where] of edges.get(from) ?? [])
      if (component.includes(to)) console.log(`  ${from} -> ${to}   (${where})`)
  }
}
process.exit(1)
