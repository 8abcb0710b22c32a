import { controlError } from '../emulator-http.error.js';
import { parseMoneyMap } from './money.js';

export type MenuType = 'collection' | 'product' | 'trait' | 'trait_option';
export const MENU_TYPES: readonly MenuType[] = ['collection', 'product', 'trait', 'trait_option'];

/** The control API's plural path segment of each menu type. */
export const MENU_PATHS: Record<string, MenuType> = {
  collections: 'collection',
  products: 'product',
  traits: 'trait',
  trait_options: 'trait_option',
};

type AttributeKind = 'title' | 'string' | 'nullable-string' | 'boolean' | 'money-map';

interface AttributeSpec {
  kind: AttributeKind;
  /** Absent: required on create. */
  default?: unknown;
}

interface RelationshipSpec {
  kind: 'to-one' | 'to-many';
  target: string;
  /** Kept by the emulator from the other side (trait.trait_options from trait_option.trait). */
  derived?: boolean;
}

interface ResourceSchema {
  attributes: Record<string, AttributeSpec>;
  relationships: Record<string, RelationshipSpec>;
}

/**
 * The attributes of each menu type, as the spec's tables list them (collection: not shown, so a
 * title and a description), and the relationships the emulator keeps.
 */
export const SCHEMAS: Record<MenuType, ResourceSchema> = {
  collection: {
    attributes: { title: { kind: 'title' }, description: { kind: 'nullable-string', default: null } },
    relationships: { products: { kind: 'to-many', target: 'product' } },
  },
  product: {
    attributes: {
      title: { kind: 'title' },
      description: { kind: 'string', default: '' },
      available: { kind: 'boolean', default: true },
      base_cost: { kind: 'money-map' },
    },
    relationships: {
      traits: { kind: 'to-many', target: 'trait' },
      externally_managed_product_override: {
        kind: 'to-one',
        target: 'externally_managed_product_override',
        derived: true,
      },
    },
  },
  trait: {
    attributes: {
      title: { kind: 'title' },
      description: { kind: 'string', default: '' },
      required: { kind: 'boolean', default: false },
      allow_multiple: { kind: 'boolean', default: false },
    },
    relationships: { trait_options: { kind: 'to-many', target: 'trait_option', derived: true } },
  },
  trait_option: {
    attributes: {
      title: { kind: 'title' },
      description: { kind: 'nullable-string', default: null },
      available: { kind: 'boolean', default: true },
      default: { kind: 'boolean', default: false },
      cost_adjustment: { kind: 'money-map', default: {} },
    },
    relationships: { trait: { kind: 'to-one', target: 'trait' } },
  },
};

/**
 * Validates control-API attributes: on create every required one, on update only those given.
 * `attributes.id` (as a body copied from a webhook's `included` carries it) is the platform's: on
 * create it is ignored, on update it must be the resource's own (`currentId`).
 */
export function parseAttributes(
  type: MenuType,
  input: unknown,
  creating: boolean,
  currentId?: string,
): Record<string, unknown> {
  if (input === undefined && !creating) return {};
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw controlError(422, 'attributes must be an object', 'attributes');
  const specs = SCHEMAS[type].attributes;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(input)) {
    const spec = specs[name];
    if (name === 'id') {
      if (creating || String(value) === currentId) continue;
      throw controlError(422, `attributes.id is assigned by the platform: ${currentId} here`, 'attributes.id');
    }
    if (spec === undefined)
      throw controlError(
        422,
        `${type} has no attribute ${name}; it has ${Object.keys(specs).join(', ')}`,
        `attributes.${name}`,
      );
    out[name] = parseValue(spec.kind, value, `attributes.${name}`);
  }
  if (creating) {
    for (const [name, spec] of Object.entries(specs)) {
      if (name in out) continue;
      if (!('default' in spec)) throw controlError(422, `attributes.${name} is required`, `attributes.${name}`);
      out[name] = spec.kind === 'money-map' ? parseValue('money-map', spec.default, name) : spec.default;
    }
  }
  return out;
}

function parseValue(kind: AttributeKind, value: unknown, field: string): unknown {
  switch (kind) {
    case 'title':
      if (typeof value !== 'string' || value.length === 0)
        throw controlError(422, `${field} must be a non-empty string`, field);
      return value;
    case 'string':
      if (typeof value !== 'string') throw controlError(422, `${field} must be a string`, field);
      return value;
    case 'nullable-string':
      if (value !== null && typeof value !== 'string')
        throw controlError(422, `${field} must be a string or null`, field);
      return value;
    case 'boolean':
      if (typeof value !== 'boolean') throw controlError(422, `${field} must be a boolean`, field);
      return value;
    case 'money-map': {
      const parsed = parseMoneyMap(value);
      if (typeof parsed === 'string') throw controlError(422, `${field} ${parsed}`, field);
      return parsed;
    }
  }
}

/**
 * Validates control-API relationships to ids: JSON:API (`{"traits":{"data":[{"id","type"}]}}`) or
 * shorthand (`{"traits":["1"]}`, `{"trait":"1"}`). Returns the ids per relationship given,
 * derived ones (kept by the platform) included: the caller checks those against what it derives.
 */
export function parseRelationships(type: MenuType, input: unknown): Map<string, string[] | string | null> {
  const out = new Map<string, string[] | string | null>();
  if (input === undefined) return out;
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw controlError(422, 'relationships must be an object', 'relationships');
  const specs = SCHEMAS[type].relationships;
  for (const [name, value] of Object.entries(input)) {
    const spec = specs[name];
    const field = `relationships.${name}`;
    if (spec === undefined)
      throw controlError(422, `${type} has no relationship ${name}; it has ${Object.keys(specs).join(', ')}`, field);
    const data =
      typeof value === 'object' && value !== null && !Array.isArray(value) && 'data' in value
        ? (value as { data: unknown }).data
        : value;
    out.set(
      name,
      spec.kind === 'to-many' ? parseIdList(data, spec.target, field) : parseId(data, spec.target, field, true),
    );
  }
  return out;
}

/** Whether a relationship is one the platform derives itself (a trait's `trait_options` …). */
export function isDerived(type: MenuType, name: string): boolean {
  return SCHEMAS[type].relationships[name]?.derived === true;
}

function parseIdList(data: unknown, target: string, field: string): string[] {
  if (!Array.isArray(data)) throw controlError(422, `${field} must list ${target} identifiers`, field);
  const ids = data.map((item) => parseId(item, target, field, false) as string);
  if (new Set(ids).size !== ids.length) throw controlError(422, `${field} lists an id twice`, field);
  return ids;
}

function parseId(data: unknown, target: string, field: string, nullable: boolean): string | null {
  if (data === null && nullable) return null;
  if (typeof data === 'string' || typeof data === 'number') return normaliseId(data, field);
  if (typeof data === 'object' && data !== null && 'id' in data) {
    const { id, type } = data as { id: unknown; type?: unknown };
    if (type !== undefined && type !== target)
      throw controlError(422, `${field} refers to type ${String(type)}, expected ${target}`, field);
    if (typeof id === 'string' || typeof id === 'number') return normaliseId(id, field);
  }
  throw controlError(422, `${field} must be a ${target} identifier${nullable ? ' or null' : ''}`, field);
}

function normaliseId(id: string | number, field: string): string {
  const text = String(id);
  if (!/^[1-9]\d{0,15}$/.test(text))
    throw controlError(422, `${field} has an id ${JSON.stringify(text)} that is not a positive integer`, field);
  return text;
}
