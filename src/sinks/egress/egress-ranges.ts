import ipaddr from 'ipaddr.js';
import type { Address } from '../../config/networks.js';

type Ranges<T> = Record<string, [T, number] | Array<[T, number]>>;

const v4 = (cidr: string): [ipaddr.IPv4, number] => ipaddr.IPv4.parseCIDR(cidr);
const v6 = (cidr: string): [ipaddr.IPv6, number] => ipaddr.IPv6.parseCIDR(cidr);

/**
 * What a sink may not reach unless SINK_ALLOWED_NETWORKS names it (docs/reference.md §12): every
 * range that is not public unicast. Named, so that a refusal says which rule refused it.
 */
const REFUSED_V4: Ranges<ipaddr.IPv4> = {
  'this network': v4('0.0.0.0/8'),
  private: [v4('10.0.0.0/8'), v4('172.16.0.0/12'), v4('192.168.0.0/16')],
  'carrier-grade NAT': v4('100.64.0.0/10'),
  loopback: v4('127.0.0.0/8'),
  'link-local': v4('169.254.0.0/16'),
  'IETF protocol assignments': v4('192.0.0.0/24'),
  documentation: [v4('192.0.2.0/24'), v4('198.51.100.0/24'), v4('203.0.113.0/24')],
  '6to4 relay anycast': v4('192.88.99.0/24'),
  benchmarking: v4('198.18.0.0/15'),
  multicast: v4('224.0.0.0/4'),
  'reserved or broadcast': v4('240.0.0.0/4'),
};

const REFUSED_V6: Ranges<ipaddr.IPv6> = {
  unspecified: v6('::/128'),
  loopback: v6('::1/128'),
  'discard-only': v6('100::/64'),
  'IETF protocol assignments': v6('2001::/23'),
  documentation: [v6('2001:db8::/32'), v6('3fff::/20')],
  '6to4': v6('2002::/16'),
  'local-use NAT64': v6('64:ff9b:1::/48'),
  'unique local': v6('fc00::/7'),
  'link-local': v6('fe80::/10'),
  'site-local': v6('fec0::/10'),
  multicast: v6('ff00::/8'),
};

/** IPv6 ranges whose last 32 bits are an IPv4 address, judged as that address. */
const EMBEDDING_V4: Ranges<ipaddr.IPv6> = {
  'IPv4-mapped': v6('::ffff:0:0/96'),
  'IPv4-compatible': v6('::/96'),
  'IPv4-translated': v6('::ffff:0:0:0/96'),
  NAT64: v6('64:ff9b::/96'),
};

/** The IPv4 address an IPv6 address carries (mapped, compatible, translated, NAT64), if any. */
export function embeddedIPv4(address: Address): ipaddr.IPv4 | undefined {
  if (address.kind() === 'ipv4') return undefined;
  const ip = address as ipaddr.IPv6;
  if (ipaddr.subnetMatch(ip, EMBEDDING_V4, 'none') === 'none') return undefined;
  const bytes = ip.toByteArray();
  return new ipaddr.IPv4(bytes.slice(12));
}

/**
 * Why `address` is refused (the range's name, e.g. `loopback`), or undefined for public unicast.
 * An IPv6 form of an IPv4 address is refused as that address would be.
 */
export function refusedRange(address: Address): string | undefined {
  if (address.kind() === 'ipv4') {
    const name = ipaddr.subnetMatch(address, REFUSED_V4, 'public');
    return name === 'public' ? undefined : name;
  }
  const name = ipaddr.subnetMatch(address, REFUSED_V6, 'public');
  if (name !== 'public') return name;
  const embedded = embeddedIPv4(address);
  return embedded === undefined ? undefined : refusedRange(embedded);
}

/** Whether `address` (or the IPv4 address it carries) lies in one of `networks`. */
export function inNetworks(address: Address, networks: ReadonlyArray<[Address, number]>): boolean {
  const candidates: Address[] = [address];
  const embedded = embeddedIPv4(address);
  if (embedded !== undefined) candidates.push(embedded);
  return candidates.some((candidate) =>
    networks.some(([network, bits]) => candidate.kind() === network.kind() && candidate.match(network, bits)),
  );
}

/** An address as dns.lookup or a URL host gives it (brackets allowed), or undefined if it is none. */
export function parseAddress(text: string): Address | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (ipaddr.IPv4.isValidFourPartDecimal(bare)) return ipaddr.IPv4.parse(bare);
  if (ipaddr.IPv6.isValid(bare)) return ipaddr.IPv6.parse(bare);
  return undefined;
}
