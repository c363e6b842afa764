import { isIP } from "node:net"

/**
 * Which addresses a live deployment may deliver to (decisions.md §11): public unicast only. Refused: IPv4 private,
 * shared, loopback, link-local, benchmarking, documentation, multicast and reserved ranges; IPv6 loopback,
 * unspecified, unique-local, link-local, multicast, documentation, and every form that carries an IPv4 address
 * (IPv4-mapped and -compatible, NAT64, 6to4, Teredo), so no IPv4 range is reachable through IPv6.
 */

const V4_BLOCKED: ReadonlyArray<readonly [number, number]> = [
  [0x00000000, 8], // "this" network
  [0x0a000000, 8], // private
  [0x64400000, 10], // shared (carrier-grade NAT)
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local (cloud metadata)
  [0xac100000, 12], // private
  [0xc0000000, 24], // IETF protocol assignments
  [0xc0000200, 24], // documentation
  [0xc0586300, 24], // 6to4 relay anycast
  [0xc0a80000, 16], // private
  [0xc6120000, 15], // benchmarking
  [0xc6336400, 24], // documentation
  [0xcb007100, 24], // documentation
  [0xe0000000, 4], // multicast
  [0xf0000000, 4] // reserved, broadcast
]

const parseV4 = (text: string): number | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  let n = 0
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined
    n = n * 256 + Number(part)
  }
  return n
}

const v4Public = (n: number) =>
  V4_BLOCKED.every(([base, bits]) => {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    return (n & mask) >>> 0 !== base
  })

/** The eight 16-bit groups of an IPv6 address (an embedded dotted IPv4 tail included). */
const parseV6 = (text: string): Array<number> | undefined => {
  let body = text.split("%")[0]!.toLowerCase()
  const lastColon = body.lastIndexOf(":")
  if (body.slice(lastColon + 1).includes(".")) {
    // A dotted IPv4 tail (::ffff:10.0.0.1) is the last two groups.
    const v4 = parseV4(body.slice(lastColon + 1))
    if (v4 === undefined) return undefined
    body = body.slice(0, lastColon + 1) + (v4 >>> 16).toString(16) + ":" + (v4 & 0xffff).toString(16)
  }
  const halves = body.split("::")
  if (halves.length > 2) return undefined
  const groups = (s: string) =>
    s === "" ? [] : s.split(":").map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN))
  const head = groups(halves[0]!)
  const rest = halves.length === 2 ? groups(halves[1]!) : []
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0
  if (fill < 0) return undefined
  const all = [...head, ...Array<number>(fill).fill(0), ...rest]
  return all.length === 8 && all.every((g) => Number.isInteger(g)) ? all : undefined
}

const v6Public = (g: ReadonlyArray<number>) => {
  const [a, b] = g as [number, number]
  if (g.slice(0, 7).every((x) => x === 0) && g[7]! <= 1) return false // :: and ::1
  if (g.slice(0, 6).every((x) => x === 0)) return false // IPv4-compatible
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return false // IPv4-mapped
  if ((a & 0xe000) !== 0x2000) return false // outside global unicast (2000::/3): unallocated or special
  if (a === 0x64 && b === 0xff9b) return false // NAT64
  if (a === 0x0100 && g[1] === 0 && g[2] === 0 && g[3] === 0) return false // discard-only
  if (a === 0x2001 && b < 0x0200) return false // IETF protocol assignments (Teredo 2001::/32 included)
  if (a === 0x2001 && b === 0x0db8) return false // documentation
  if (a === 0x2002) return false // 6to4
  if ((a & 0xfe00) === 0xfc00) return false // unique local
  if ((a & 0xffc0) === 0xfe80) return false // link-local
  if ((a & 0xffc0) === 0xfec0) return false // site-local (deprecated)
  if ((a & 0xff00) === 0xff00) return false // multicast
  return true
}

/** Whether an IP address (v4 or v6 text) is a public unicast address; anything else (or not an address) is not. */
export const isPublicAddress = (address: string): boolean => {
  const kind = isIP(address.split("%")[0]!)
  if (kind === 4) {
    const n = parseV4(address)
    return n !== undefined && v4Public(n)
  }
  if (kind === 6) {
    const groups = parseV6(address)
    return groups !== undefined && v6Public(groups)
  }
  return false
}

/**
 * Suffixes that never name a public host: RFC 6761 `localhost`, RFC 6762 `local` (mDNS), RFC 8375 `home.arpa`, and
 * `internal` (reserved by ICANN for private use).
 */
const PRIVATE_SUFFIXES = ["localhost", "local", "home.arpa", "internal"]

/**
 * The names a hosts file (`/etc/hosts`) maps to addresses that are not public: `localhost`, Debian's
 * `ip6-localhost`/`ip6-loopback`, the machine's own names. Lower case, without a trailing dot.
 */
export const localHostNames = (hostsFile: string): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const line of hostsFile.split("\n")) {
    const [address, ...aliases] = line.replace(/#.*/, "").trim().split(/\s+/)
    if (address === undefined || address === "" || isPublicAddress(address)) continue
    for (const alias of aliases) names.add(alias.toLowerCase().replace(/\.+$/, ""))
  }
  return names
}

/**
 * Why a URL's host name (not an address literal) cannot be a live delivery target, or undefined. A name is read as
 * DNS reads it (case aside, a trailing dot is the root: `localhost.` is `localhost`). Refused: a single label (no
 * public name is one; an internal one, `vm` or `ip6-localhost`, is found through search domains or the hosts file),
 * the private-use suffixes, and the names the hosts file maps to private addresses. Registration only: the delivery
 * checks the address it connects to whatever the name (src/events/transport.ts).
 */
export const privateNameProblem = (hostname: string, localNames: ReadonlySet<string>): string | undefined => {
  const name = hostname.toLowerCase().replace(/\.+$/, "")
  if (name === "" || !name.includes(".") || localNames.has(name)) return "must be a public host name"
  if (PRIVATE_SUFFIXES.some((suffix) => name === suffix || name.endsWith(`.${suffix}`))) {
    return "must be a public host name"
  }
  return undefined
}
