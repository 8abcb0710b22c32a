import ipaddr from 'ipaddr.js';

export type Address = ipaddr.IPv4 | ipaddr.IPv6;
export type Network = [Address, number];

/** A CIDR as SINK_ALLOWED_NETWORKS takes it: an address in its ordinary notation, `/`, a prefix length. */
export function parseNetwork(cidr: string): Network | undefined {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(cidr.trim());
  if (match === null) return undefined;
  const [, address, bits] = match;
  const family = ipaddr.IPv4.isValidFourPartDecimal(address) ? 'ipv4' : ipaddr.IPv6.isValid(address) ? 'ipv6' : null;
  if (family === null || Number(bits) > (family === 'ipv4' ? 32 : 128)) return undefined;
  return ipaddr.parseCIDR(`${address}/${bits}`);
}
