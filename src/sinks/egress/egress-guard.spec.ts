import { loadConfig } from '../../config/app-config.js';
import { EgressGuard, EgressRefusedError } from './egress-guard.js';
import { parseAddress, refusedRange } from './egress-ranges.js';

const KEY = 'A'.repeat(43) + '=';

function guard(networks = ''): EgressGuard {
  return new EgressGuard(loadConfig({ SINK_ALLOWED_NETWORKS: networks, TOKEN_ENCRYPTION_KEY: KEY }));
}

describe('egress ranges (docs/reference.md §12)', () => {
  const table: Array<[string, string | undefined]> = [
    // public unicast
    ['8.8.8.8', undefined],
    ['1.1.1.1', undefined],
    ['93.184.215.14', undefined],
    ['172.15.255.255', undefined],
    ['172.32.0.0', undefined],
    ['100.63.255.255', undefined],
    ['100.128.0.0', undefined],
    ['198.17.255.255', undefined],
    ['198.20.0.0', undefined],
    ['223.255.255.255', undefined],
    ['2606:4700:4700::1111', undefined],
    ['2a00:1450:4001:80b::200e', undefined],
    ['::ffff:8.8.8.8', undefined],
    ['64:ff9b::808:808', undefined],
    // IPv4
    ['0.0.0.0', 'this network'],
    ['0.255.255.255', 'this network'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved or broadcast'],
    ['255.255.255.255', 'reserved or broadcast'],
    // IPv6
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['100::1', 'discard-only'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001::1', 'IETF protocol assignments'],
    ['2002:c000:0204::1', '6to4'],
    ['fc00::1', 'unique local'],
    ['fd12:3456:789a::1', 'unique local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['64:ff9b:1::1', 'local-use NAT64'],
    // IPv4 inside IPv6: judged as the IPv4 address
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:0.0.0.0', 'this network'],
    ['::127.0.0.1', 'loopback'],
    ['::a00:1', 'private'],
    ['::ffff:0:a9fe:a9fe', 'link-local'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::192.168.0.1', 'private'],
    ['64:ff9b::100.64.0.1', 'carrier-grade NAT'],
  ];

  it.each(table)('%s → %s', (address, expected) => {
    expect(refusedRange(parseAddress(address)!)).toBe(expected);
  });

  it('reads addresses only in their ordinary notation; names are not addresses', () => {
    expect(['localhost', 'example.com', '127.1', '2130706433', '0x7f.1', ''].map(parseAddress)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(parseAddress('[::1]')?.toString()).toBe('::1');
  });
});

describe('EgressGuard', () => {
  it('refuses loopback unless SINK_ALLOWED_NETWORKS names it, IPv4 inside IPv6 included', () => {
    const closed = guard();
    const open = guard('127.0.0.0/8,::1/128');
    const addresses = ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1', '64:ff9b::7f00:1'];
    expect(addresses.map((address) => closed.refusal(address, 80))).toEqual([
      'loopback',
      'loopback',
      'loopback',
      'loopback',
      'loopback',
    ]);
    expect(addresses.map((address) => open.refusal(address, 80))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(open.refusal('10.0.0.1', 80)).toBe('private');
    expect(open.refusal('0.0.0.0', 80)).toBe('this network');
  });

  it('allows an endpoint for itself: that address and port only', () => {
    const sandbox = guard();
    sandbox.allowEndpoint('127.0.0.1', 4711);
    expect([
      sandbox.refusal('127.0.0.1', 4711),
      sandbox.refusal('127.0.0.1', 4712),
      sandbox.refusal('::1', 4711),
    ]).toEqual([undefined, 'loopback', 'loopback']);
  });

  it('resolves names and judges every address (localhost is loopback)', async () => {
    await expect(guard().resolveAllowed('localhost', 80)).rejects.toBeInstanceOf(EgressRefusedError);
    await expect(guard('127.0.0.0/8,::1/128').resolveAllowed('localhost', 80)).resolves.toMatch(/^(127\.0\.0\.1|::1)$/);
    await expect(guard().resolveAllowed('[::1]', 80)).rejects.toThrow(
      'the egress guard refused ::1 (loopback): add its network to SINK_ALLOWED_NETWORKS to allow it',
    );
    await expect(guard('::1/128').resolveAllowed('[::1]', 80)).resolves.toBe('::1');
  });

  it('judges the host of a URL as the WHATWG parser reads it', async () => {
    // checkUrl parses and classifies (a literal address is not even looked up): nothing connects anywhere.
    const closed = guard();
    const urls = [
      'http://127.0.0.1:9/',
      'http://localhost:9/',
      'http://[::1]:9/',
      'http://[::ffff:127.0.0.1]:9/',
      'http://0.0.0.0:9/',
      'http://127.1:9/',
      'http://2130706433:9/',
      'http://0x7f.1:9/',
      'https://169.254.169.254/latest/meta-data',
      'postgres://user:pw@10.1.2.3/db',
    ];
    const refused = await Promise.all(urls.map((url) => closed.checkUrl(url)));
    expect(refused.map((error) => error?.range)).toEqual([
      'loopback',
      'loopback',
      'loopback',
      'loopback',
      'this network',
      'loopback',
      'loopback',
      'loopback',
      'link-local',
      'private',
    ]);
    const open = guard('127.0.0.0/8,::1/128');
    expect((await Promise.all(urls.slice(0, 8).map((url) => open.checkUrl(url)))).map((error) => error?.range)).toEqual(
      [undefined, undefined, undefined, undefined, 'this network', undefined, undefined, undefined],
    );
  });
});

describe('SINK_ALLOWED_NETWORKS', () => {
  it('takes IPv4 and IPv6 CIDRs', () => {
    expect(
      loadConfig({ SINK_ALLOWED_NETWORKS: '127.0.0.0/8, ::1/128,10.0.0.0/8', TOKEN_ENCRYPTION_KEY: KEY })
        .SINK_ALLOWED_NETWORKS,
    ).toEqual(['127.0.0.0/8', '::1/128', '10.0.0.0/8']);
  });

  it.each(['127.0.0.1', '127.0.0.0/33', '::1/129', 'localhost/8', '127.1/8', '10.0.0.0/-1', 'fe80::/x'])(
    'refuses %s, naming the variable',
    (value) => {
      expect(() => loadConfig({ SINK_ALLOWED_NETWORKS: value, TOKEN_ENCRYPTION_KEY: KEY })).toThrow(
        /SINK_ALLOWED_NETWORKS: SINK_ALLOWED_NETWORKS must list CIDRs/,
      );
    },
  );
});
