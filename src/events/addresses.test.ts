import { expect, test } from "bun:test"
import { isPublicAddress, localHostNames, privateNameProblem } from "./addresses.ts"
test("public unicast addresses pass; private, loopback, link-local, mapped and reserved ones do not", () => {
  for (const a of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"])
    expect([a, isPublicAddress(a)]).toEqual([a, true])
  for (const a of [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "0.0.0.0",
    "100.64.0.1",
    "::1",
    "::",
    "::ffff:127.0.0.1",
    "::ffff:8.8.8.8",
    "::ffff:7f00:1",
    "fe80::1",
    "fd00::1",
    "fc00::1",
    "ff02::1",
    "64:ff9b::a00:1",
    "2002:a00:1::",
    "2001:db8::1",
    "::127.0.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "localhost",
    "fe80::1%eth0",
    "fe00::",
    "4000::1"
  ])
    expect([a, isPublicAddress(a)]).toEqual([a, false])
})

test("registration refuses names that are not public hosts, however they are spelt", () => {
  const hosts = localHostNames(
    "127.0.0.1\tlocalhost\n::1     localhost ip6-localhost ip6-loopback\nfe00::0 ip6-localnet\n" +
      "# 10.0.0.5 commented.example\n10.0.0.7 billing-db.corp.example db\n93.184.216.34 public.example\n"
  )
  expect([...hosts].sort()).toEqual([
    "billing-db.corp.example",
    "db",
    "ip6-localhost",
    "ip6-localnet",
    "ip6-loopback",
    "localhost"
  ])
  for (const name of [
    "localhost",
    "localhost.",
    "LocalHost..",
    "foo.localhost.",
    "ip6-localhost",
    "vm",
    "billing-db.corp.example",
    "BILLING-DB.corp.example.",
    "printer.local",
    "router.home.arpa",
    "svc.internal."
  ])
    expect([name, privateNameProblem(name, hosts)]).toEqual([name, "must be a public host name"])
  for (const name of ["example.com", "example.com.", "hooks.vendor.io", "public.example", "localhost.example.com"])
    expect([name, privateNameProblem(name, hosts)]).toEqual([name, undefined])
})
