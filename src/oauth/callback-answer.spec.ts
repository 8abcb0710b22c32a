import { prefersHtml } from './callback-answer.js';

describe('prefersHtml: who /auth/callback sends to the console page', () => {
  it.each([
    ['text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8', true],
    ['text/html', true],
    ['text/*', true],
    ['application/json;q=0.5, text/html', true],
  ])('a browser-like %s → the page', (accept, expected) => {
    expect(prefersHtml(accept)).toBe(expected);
  });

  it.each([
    [undefined, false],
    ['', false],
    ['*/*', false],
    ['application/json', false],
    ['application/json, text/html', false],
    ['text/html;q=0.5, application/json', false],
    ['text/html;q=0', false],
    ['text/html;q=abc', false],
    ['application/problem+json', false],
  ])('an API client %s → JSON', (accept, expected) => {
    expect(prefersHtml(accept)).toBe(expected);
  });
});
