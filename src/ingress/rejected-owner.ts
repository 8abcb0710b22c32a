import { canonicalId, parseExact } from '../domain/canonical-id.js';

const MAX_OWNER_LENGTH = 255;

/**
 * The owner a rejected delivery names (`data.relationships.resource_owner.data.id`, canonical as
 * the parser reads it) when its body is JSON that says so; null otherwise. The quarantine keeps it,
 * so that a token scoped to owners lists only its owners' rejected deliveries (docs/reference.md
 * §12, Owner scope); one whose owner cannot be read is shown to tokens of every owner only.
 */
export function ownerOfRejected(body: Buffer): string | null {
  let node: unknown;
  try {
    node = parseExact(body.toString('utf8'));
  } catch {
    return null;
  }
  for (const key of ['data', 'relationships', 'resource_owner', 'data', 'id']) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return null;
    node = (node as Record<string, unknown>)[key];
  }
  const owner = canonicalId(node);
  return owner === undefined || owner === '' || owner.length > MAX_OWNER_LENGTH ? null : owner;
}
