/**
 * An http(s) URL as the WHATWG URL parser reads it, the reading the connection uses too: every
 * IPv4 spelling (`127.1`, `2130706433`, `0x7f.1`) is taken, and the egress guard judges the
 * address it stands for (docs/reference.md §12).
 */
export function isHttpUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
}
