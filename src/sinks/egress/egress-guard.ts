import { lookup } from 'node:dns/promises';
import { Injectable } from '@nestjs/common';
import { AppConfig } from '../../config/app-config.js';
import type { Network } from '../../config/networks.js';
import { inNetworks, parseAddress, refusedRange } from './egress-ranges.js';

/** The `code` of EgressRefusedError, which survives drivers that copy errors. */
export const EGRESS_REFUSED = 'EGRESS_REFUSED';

/** A sink's target resolved to an address the egress guard refuses (docs/reference.md §12). */
export class EgressRefusedError extends Error {
  readonly code = EGRESS_REFUSED;

  constructor(
    readonly address: string,
    readonly range: string,
  ) {
    super(`the egress guard refused ${address} (${range}): add its network to SINK_ALLOWED_NETWORKS to allow it`);
    this.name = 'EgressRefusedError';
  }
}

/**
 * Where sinks may connect (docs/reference.md §12): public unicast addresses, those of
 * SINK_ALLOWED_NETWORKS, and endpoints the daemon allows for itself (the sandbox's own receiver).
 * Names are resolved and every address they resolve to is judged, so a name cannot smuggle a
 * refused address in; a connection is then made to the address judged, never to the name again.
 */
@Injectable()
export class EgressGuard {
  private readonly networks: Network[];
  private readonly endpoints = new Set<string>();

  constructor(config: AppConfig) {
    this.networks = config.sinkAllowedNetworks;
  }

  /** Allows one address and port whatever its range: the sandbox's catalogue receiver, not loopback at large. */
  allowEndpoint(address: string, port: number): void {
    this.endpoints.add(endpointKey(address, port));
  }

  /**
   * The address to connect to for `host` (a name, an address, or a bracketed IPv6 address):
   * the first the name resolves to, once every one of them is allowed. Throws EgressRefusedError
   * when one is refused; a name that does not resolve throws the resolver's error.
   */
  async resolveAllowed(host: string, port: number): Promise<string> {
    const literal = parseAddress(host);
    if (literal !== undefined) {
      const address = host.replace(/^\[|\]$/g, '');
      this.check(address, port);
      return address;
    }
    const addresses = await lookup(host, { all: true, verbatim: true });
    for (const { address } of addresses) this.check(address, port);
    return addresses[0].address;
  }

  /** Why `address` may not be reached on `port` (the refused range's name), or undefined when it may. */
  refusal(address: string, port: number): string | undefined {
    const parsed = parseAddress(address);
    if (parsed === undefined) return 'not an IP address';
    if (this.endpoints.has(endpointKey(address, port))) return undefined;
    if (inNetworks(parsed, this.networks)) return undefined;
    return refusedRange(parsed);
  }

  /**
   * The check at creation and on PATCH: undefined when the URL's host is allowed, or a name that
   * does not resolve now (each connection checks again); the error when it is refused.
   */
  async checkUrl(url: string): Promise<EgressRefusedError | undefined> {
    const parsed = new URL(url);
    const port = Number(parsed.port || defaultPort(parsed.protocol));
    try {
      await this.resolveAllowed(parsed.hostname, port);
      return undefined;
    } catch (error) {
      if (error instanceof EgressRefusedError) return error;
      return undefined;
    }
  }

  private check(address: string, port: number): void {
    const range = this.refusal(address, port);
    if (range !== undefined) throw new EgressRefusedError(address, range);
  }
}

const DEFAULT_PORTS: Record<string, number> = {
  'http:': 80,
  'https:': 443,
  'postgres:': 5432,
  'postgresql:': 5432,
  'mysql:': 3306,
};

/** The port a URL of this scheme connects to when it names none. */
export function defaultPort(protocol: string): number {
  return DEFAULT_PORTS[protocol] ?? 0;
}

function endpointKey(address: string, port: number): string {
  return `${parseAddress(address)?.toNormalizedString() ?? address}|${port}`;
}
