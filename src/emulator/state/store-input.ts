import { controlError } from '../emulator-http.error.js';
import { storeResource } from './store-attributes.js';

const TEMPLATE = storeResource('1', 'x', new Date(0)).attributes;
const STORE_FIELDS = new Set(Object.keys(TEMPLATE).filter((name) => name !== 'id' && name !== 'created_at'));
/** The spec's nullable store fields and the JSON type of their non-null values. */
const NULLABLE: Record<string, string> = { geocoded_address: 'string', distance: 'number', walking_distance: 'number' };

export interface StoreInput {
  attributes: Record<string, unknown>;
  ownerId?: string;
  currency?: string;
}

/** Validates `POST`/`PATCH /_emulator/stores`: attributes of the spec's store table, an owner, a currency. */
export function parseStore(body: Record<string, unknown>, creating: boolean): StoreInput {
  const attributes = body.attributes ?? {};
  if (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes))
    throw controlError(422, 'attributes must be an object', 'attributes');
  for (const name of Object.keys(attributes)) {
    if (!STORE_FIELDS.has(name))
      throw controlError(422, `a store has no settable attribute ${name}`, `attributes.${name}`);
    const allowed = name in NULLABLE ? ['null', NULLABLE[name]] : [jsonType(TEMPLATE[name])];
    const given = jsonType((attributes as Record<string, unknown>)[name]);
    if (!allowed.includes(given))
      throw controlError(422, `attributes.${name} must be ${allowed.join(' or ')}, not ${given}`, `attributes.${name}`);
  }
  const title = (attributes as Record<string, unknown>).title;
  if ((creating || title !== undefined) && (typeof title !== 'string' || title.length === 0))
    throw controlError(422, 'attributes.title must be a non-empty string', 'attributes.title');
  const ownerId = body.owner_id === undefined ? undefined : String(body.owner_id);
  if (ownerId !== undefined && !/^[1-9]\d{0,15}$/.test(ownerId))
    throw controlError(422, 'owner_id must be a positive integer id', 'owner_id');
  const currency = body.currency;
  if (currency !== undefined && (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)))
    throw controlError(422, 'currency must be an ISO 4217 code', 'currency');
  return { attributes: attributes as Record<string, unknown>, ownerId, currency: currency as string | undefined };
}

function jsonType(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
}
