import { OAuthClient } from './oauth-client.js';
import { DEFAULT_UPSTREAM_TIMINGS } from './upstream-timings.js';

const settings = {
  authUrl: 'https://auth.example.com',
  clientId: 'client id&1',
  clientSecret: 'secret',
  scopes: ['read_menu', 'read_orders', 'read_stores'],
};

describe('OAuthClient (no network)', () => {
  const client = new OAuthClient(DEFAULT_UPSTREAM_TIMINGS);

  it('builds the authorization URL with scopes joined by a literal +, state and PKCE S256', () => {
    const url = client.authorizationUrl(settings, {
      redirectUri: 'http://127.0.0.1:3000/auth/callback?x=1',
      state: 's/t+a=te',
      codeChallenge: 'abc-_',
    });

    expect(url).toBe(
      'https://auth.example.com/oauth/authorize?client_id=client%20id%261' +
        '&redirect_uri=http%3A%2F%2F127.0.0.1%3A3000%2Fauth%2Fcallback%3Fx%3D1&response_type=code' +
        '&scope=read_menu+read_orders+read_stores&state=s%2Ft%2Ba%3Dte&code_challenge=abc-_&code_challenge_method=S256',
    );
    const parsed = new URL(url);
    expect(parsed.searchParams.get('scope')).toBe('read_menu read_orders read_stores');
    expect(parsed.searchParams.get('state')).toBe('s/t+a=te');
    expect(parsed.searchParams.get('redirect_uri')).toBe('http://127.0.0.1:3000/auth/callback?x=1');
  });

  it('leaves out state and PKCE when not given (the out-of-band redirect)', () => {
    const url = client.authorizationUrl(settings, { redirectUri: 'urn:ietf:wg:oauth:2.0:oob' });

    expect(url).toBe(
      'https://auth.example.com/oauth/authorize?client_id=client%20id%261' +
        '&redirect_uri=urn%3Aietf%3Awg%3Aoauth%3A2.0%3Aoob&response_type=code&scope=read_menu+read_orders+read_stores',
    );
  });

  it('makes RFC 7636 verifiers and S256 challenges', () => {
    // RFC 7636 Appendix B.
    expect(client.challengeOf('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe(
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    );
    const verifiers = new Set([client.generateVerifier(), client.generateVerifier()]);
    expect(verifiers.size).toBe(2);
    for (const verifier of verifiers) expect(verifier).toMatch(/^[A-Za-z0-9\-._~]{43,128}$/);
  });
});
