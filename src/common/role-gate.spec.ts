import { roleOfPath } from './role-gate.js';

describe('roleOfPath: which role serves a request', () => {
  it.each([
    ['/webhooks/some-key', 'ingress'],
    ['/webhooks', 'ingress'],
    ['/api/v1/products?limit=5', 'api'],
    ['/api/v1', 'api'],
    ['/auth/connect', 'api'],
    ['/console/', 'console'],
    ['/console?x=1', 'console'],
    ['/', 'console'],
    ['/health/ready', undefined],
    ['/metrics', undefined],
    ['/api/docs', undefined],
    ['/api/v10', undefined],
    ['/webhooksx', undefined],
  ])('%s → %s', (path, role) => {
    expect(roleOfPath(path)).toBe(role);
  });
});
