import uPlot from "uplot"

const COLORS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2"]

/** Days (YYYY-MM-DD labels) on x, one line per series; drawn by uPlot into `el`. */
export const dailyChart = (
  el: HTMLElement,
  days: ReadonlyArray<string>,
  series: ReadonlyArray<{ readonly label: string; readonly values: ReadonlyArray<number> }>
): uPlot => {
  // x as seconds at UTC midnight of each label, shown as the label itself (the buckets are already local days).
  const xs = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000)
  const width = Math.max(320, Math.min(el.clientWidth || 900, 1100))
  return new uPlot(
    {
      width,
      height: 240,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      axes: [{}, { size: 60 }],
      series: [
        { label: "Day", value: (_u, v) => (v === null ? "—" : new Date(v * 1000).toISOString().slice(0, 10)) },
        ...series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length]!,
          width: 2,
          fill: `${COLORS[i % COLORS.length]!}22`,
          points: { show: days.length <= 31 }
        }))
      ]
    },
    [xs, ...series.map((s) => [...s.values])],
    el
  )
}
