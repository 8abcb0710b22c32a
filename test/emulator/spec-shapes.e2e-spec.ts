import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import { eventually } from '../support/eventually.js';
import { bootEmulator, call, control, obtainTokens } from './emulator-client.js';
import type { Reply } from './emulator-client.js';

/*
 * Every shape the emulator sends, checked against the tables of a verbatim copy of the spec: the
 * field lists come from the markdown, not from this file, and the parser refuses anything it does
 * not understand, so a field renamed on either side shows up as one missing and one extra name.
 * To convince ourselves, in a scratch copy of the repository we renamed `for_pickup?` to
 * `for_pickup` in src/emulator/state/order-documents.ts, then `accepting_orders?` in
 * store-attributes.ts, then `format` in money.ts, and made the store's loyalty_scheme to-many:
 * each time this file failed, naming the field. The "strictness" tests keep that checked.
 */

const SPEC_PATH = fileURLToPath(new URL('../fixtures/spec/ordering-service-interface.md', import.meta.url));

// ── The spec's tables ────────────────────────────────────────────────────────────────────────

const TABLE_TYPES = [
  'integer',
  'string',
  'string or null',
  'boolean',
  'number',
  'timestamp',
  'Money',
  'currency-keyed money map',
  'object',
  'array of objects',
  'nullable',
  'to-one',
  'to-many',
] as const;
/** Types of nested fields that the notes describe rather than the type column. */
type NestedType = 'url' | 'currency code' | 'time ranges';
type FieldType = (typeof TABLE_TYPES)[number] | NestedType;

interface FieldSpec {
  name: string;
  type: FieldType;
  notes: string;
  /** The fields of an object, or of each element of an array of objects, read from the notes. */
  nested?: FieldSpec[];
  /** A nested field "present with X": required when the object's `type` is X, else optional. */
  presentWith?: string;
}

interface RelationshipSpec {
  name: string;
  kind: 'to-one' | 'to-many';
}

interface Shape {
  fields: FieldSpec[];
  relationships: RelationshipSpec[];
}

interface Spec {
  money: FieldSpec[];
  webhookEvent: FieldSpec[];
  resources: Map<string, Shape>;
  /** Event name → the resource types the events table says its `included` holds (none: empty). */
  events: Map<string, string[]>;
}

const RESOURCE_SECTIONS = [
  'order',
  'order_product',
  'order_product_trait_option',
  'trait_option',
  'trait',
  'product',
  'store',
];
const WEEK = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
const FIELD_NAME = /^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*\??$/;

function parseSpec(markdown: string): Spec {
  const sections = splitSections(markdown);
  const section = (heading: string): string[] => {
    const lines = sections.get(heading);
    if (lines === undefined) throw new Error(`the spec has no section "${heading}"`);
    return lines;
  };
  return {
    money: parseFields(afterLine(section('### Shared shapes'), 'Money object:'), 'Money object'),
    webhookEvent: parseFields(section('### Webhook event (the delivered body)'), 'webhook event'),
    resources: new Map(
      RESOURCE_SECTIONS.map((type) => {
        const lines = section(`### ${type}`);
        return [type, { fields: parseFields(lines, type), relationships: parseRelationships(lines, type) }];
      }),
    ),
    events: parseEvents(section('## Events')),
  };
}

function splitSections(markdown: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of markdown.split(/\r?\n/)) {
    if (!line.startsWith('#')) {
      current.push(line);
      continue;
    }
    if (sections.has(line.trim())) throw new Error(`the spec has two sections "${line.trim()}"`);
    current = [];
    sections.set(line.trim(), current);
  }
  return sections;
}

function afterLine(lines: string[], marker: string): string[] {
  const index = lines.indexOf(marker);
  if (index < 0) throw new Error(`no line "${marker}"`);
  return lines.slice(index + 1);
}

/** The first table in `lines`: its header cells and rows, each row exactly as wide as the header. */
function parseTable(lines: string[], what: string): { header: string[]; rows: string[][] } {
  const start = lines.findIndex((line) => line.startsWith('|'));
  if (start < 0) throw new Error(`${what}: no table`);
  const cells = (line: string) => {
    if (!/^\|.*\|$/.test(line.trim())) throw new Error(`${what}: malformed table row ${line}`);
    return line
      .trim()
      .slice(1, -1)
      .split('|')
      .map((cell) => cell.trim());
  };
  const header = cells(lines[start]);
  if (!/^\|(\s*-{3,}\s*\|)+$/.test(lines[start + 1]?.trim() ?? ''))
    throw new Error(`${what}: no separator under the header`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const row = cells(line);
    if (row.length !== header.length)
      throw new Error(`${what}: row ${line} has ${row.length} cells, the header ${header.length}`);
    rows.push(row);
  }
  if (rows.length === 0) throw new Error(`${what}: empty table`);
  return { header, rows };
}

function parseFields(lines: string[], what: string): FieldSpec[] {
  const { header, rows } = parseTable(lines, what);
  if (header[0] !== 'Field' || header[1] !== 'Type')
    throw new Error(`${what}: expected a Field | Type table, got ${header.join(' | ')}`);
  const fields = rows.map(([name, type, notes = '']) => {
    if (!FIELD_NAME.test(name)) throw new Error(`${what}: field name ${JSON.stringify(name)} is not a plain name`);
    if (!(TABLE_TYPES as readonly string[]).includes(type))
      throw new Error(`${what}.${name}: unknown type ${JSON.stringify(type)}`);
    const field: FieldSpec = { name, type: type as FieldType, notes };
    if (type === 'object' || type === 'array of objects') field.nested = nestedFields(field, what);
    return field;
  });
  const names = fields.map((field) => field.name);
  if (new Set(names).size !== names.length) throw new Error(`${what}: a field is listed twice`);
  return fields;
}

/** The inner fields of an object or array-of-objects field, from the wording of its notes. */
function nestedFields({ name, type, notes }: FieldSpec, what: string): FieldSpec[] {
  const week = /keys `(\w+)` to `(\w+)`/.exec(notes);
  if (week)
    return WEEK.slice(WEEK.indexOf(week[1]), WEEK.indexOf(week[2]) + 1).map((day) => nested(day, 'time ranges'));
  const urls = /keys ((?:\w+, )+\w+), each a URL string/.exec(notes);
  if (urls) return urls[1].split(', ').map((key) => nested(key, 'url'));
  const contains = /^contains (\w+) \((\w+), currency code\)$/.exec(notes);
  if (contains) return [nested(contains[1], 'currency code')];
  const listed =
    type === 'array of objects' ? /^each: (.*)$/.exec(notes)?.[1] : notes.includes('`') ? notes : undefined;
  const parts = [...(listed ?? '').matchAll(/`?(\w+)`? \(([^)]*)\)/g)];
  if (parts.length === 0) throw new Error(`${what}.${name}: the notes give no shape the parser knows: ${notes}`);
  return parts.map(([, key, inner]) => {
    const innerType = inner.split(/[;,]/)[0].trim();
    if (!(TABLE_TYPES as readonly string[]).includes(innerType))
      throw new Error(`${what}.${name}.${key}: unknown type ${innerType}`);
    return { ...nested(key, innerType as FieldType), notes: inner, presentWith: /present with (\w+)/.exec(inner)?.[1] };
  });
}

const nested = (name: string, type: FieldType): FieldSpec => ({ name, type, notes: '' });

function parseRelationships(lines: string[], what: string): RelationshipSpec[] {
  const matching = lines.filter((line) => line.startsWith('Relationships:'));
  if (matching.length !== 1) throw new Error(`${what}: expected one "Relationships:" line, found ${matching.length}`);
  const list = matching[0].slice('Relationships:'.length).trim().replace(/\.$/, '');
  return list.split(/,\s*(?![^(]*\))/).map((item) => {
    const match = /^([a-z_]+) \((to-one|to-many)(?:, [^)]+)?\)$/.exec(item.trim());
    if (!match) throw new Error(`${what}: relationship ${JSON.stringify(item)} is not "name (to-one|to-many[, note])"`);
    return { name: match[1], kind: match[2] as RelationshipSpec['kind'] };
  });
}

function parseEvents(lines: string[]): Map<string, string[]> {
  const { header, rows } = parseTable(lines, 'events');
  if (header[0] !== 'Event name' || !header[2]?.startsWith('Resources included'))
    throw new Error(`events: unexpected header ${header.join(' | ')}`);
  return new Map(
    rows.map(([name, , resources]) => {
      if (!/^[a-z_]+\.(created|updated|destroyed)$/.test(name)) throw new Error(`events: ${name} is not an event name`);
      const types =
        resources === 'none'
          ? []
          : resources.split(',').map((title) => title.trim().toLowerCase().replace(/ /g, '_').replace(/s$/, ''));
      return [name, [...new Set(types)]];
    }),
  );
}

// ── Checking values against the tables ───────────────────────────────────────────────────────

type Json = any;

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const TIME_OF_DAY = /^([01]?\d|2[0-3]):[0-5]\d$/;

const isObject = (value: unknown): value is Record<string, Json> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const show = (value: unknown) => JSON.stringify(value)?.slice(0, 80) ?? String(value);
const singular = (name: string) => name.replace(/s$/, '');

/** Collects every difference between JSON values and the spec's shapes, each naming where it is. */
class ShapeChecker {
  readonly problems: string[] = [];

  constructor(private readonly spec: Spec) {}

  /** A resource object; the attributes and relationships of the types whose fields the spec lists. */
  resource(resource: Json, at: string): void {
    if (!isObject(resource)) return this.report(at, `a resource object, got ${show(resource)}`);
    this.keys(resource, ['id', 'type', 'attributes'], at, ['relationships']);
    if (typeof resource.id !== 'string' || resource.id === '') this.report(`${at}.id`, 'a non-empty string');
    if (typeof resource.type !== 'string') this.report(`${at}.type`, 'a string');
    if (!isObject(resource.attributes)) return this.report(`${at}.attributes`, 'an object');
    if (resource.relationships !== undefined && !isObject(resource.relationships))
      this.report(`${at}.relationships`, 'an object');
    const shape = this.spec.resources.get(resource.type);
    if (shape === undefined) return;
    this.fields(resource.attributes, shape.fields, `${at}.attributes`);
    if (resource.attributes.id !== Number(resource.id))
      this.report(`${at}.attributes.id`, `the resource id ${resource.id}`);
    const relationships = isObject(resource.relationships) ? resource.relationships : {};
    this.keys(
      relationships,
      shape.relationships.map((rel) => rel.name),
      `${at}.relationships`,
    );
    for (const rel of shape.relationships) {
      if (rel.name in relationships)
        this.relationship(relationships[rel.name], rel.kind, singular(rel.name), `${at}.relationships.${rel.name}`);
    }
  }

  /** The delivered body: the webhook event table's dotted paths, then every resource in `included`. */
  webhookEvent(body: Json, uri: string, at: string): void {
    if (!isObject(body)) return this.report(at, 'a JSON object');
    this.keys(body, ['data', 'included'], at);
    for (const [path, names] of containersOf(this.spec.webhookEvent)) {
      const value = path === '' ? body.data : get(body.data, path);
      if (isObject(value)) this.keys(value, names, `${at}.data${path === '' ? '' : `.${path}`}`);
      else this.report(`${at}.data${path === '' ? '' : `.${path}`}`, 'an object');
    }
    for (const field of this.spec.webhookEvent)
      this.webhookField(field, get(body.data, field.name), body, uri, `${at}.data.${field.name}`);
    if (!Array.isArray(body.included)) return this.report(`${at}.included`, 'an array');
    body.included.forEach((resource: Json, index: number) => this.resource(resource, `${at}.included[${index}]`));
  }

  private webhookField(field: FieldSpec, value: Json, body: Json, uri: string, at: string): void {
    const constant = /constant `([^`]+)`/.exec(field.notes)?.[1];
    if (constant !== undefined && value !== constant) this.report(at, `the constant ${constant}, got ${show(value)}`);
    if (field.name === 'attributes.event_type' && !this.spec.events.has(value))
      this.report(at, `an event name of the Events part, got ${show(value)}`);
    if (field.name === 'attributes.uri' && value !== uri)
      this.report(at, `the callback URI ${uri}, got ${show(value)}`);
    if (field.type !== 'to-one') return this.value(field, value, at);
    const subjectType = String(body.data?.attributes?.event_type).split('.')[0];
    const type = field.name === 'relationships.subject' ? subjectType : /\(type `(\w+)`\)/.exec(field.notes)?.[1];
    this.relationship(value, 'to-one', type, at);
    if (isObject(value) && value.data === null) this.report(at, 'a resource identifier, not null');
  }

  value(field: FieldSpec, value: Json, at: string): void {
    const is = (ok: boolean, expected: string) => {
      if (!ok) this.report(at, `${expected}, got ${show(value)}`);
    };
    switch (field.type) {
      case 'integer':
        return is(Number.isInteger(value), 'an integer');
      case 'string':
        return this.string(field, value, at);
      case 'string or null':
        return is(value === null || typeof value === 'string', 'a string or null');
      case 'boolean':
        return is(typeof value === 'boolean', 'a boolean');
      case 'number':
        return is(typeof value === 'number' && Number.isFinite(value), 'a number');
      case 'nullable':
        return is(value === null || (typeof value === 'number' && Number.isFinite(value)), 'null or a number');
      case 'timestamp':
        return is(
          typeof value === 'string' && TIMESTAMP.test(value) && new Date(value).toISOString() === value,
          'an ISO 8601 UTC timestamp with milliseconds',
        );
      case 'url':
        return is(typeof value === 'string' && /^https?:\/\/[^/\s]+\/\S*$/.test(value), 'an http(s) URL');
      case 'currency code':
        return is(typeof value === 'string' && /^[A-Z]{3}$/.test(value), 'an ISO 4217 currency code');
      case 'time ranges':
        return this.timeRanges(value, at);
      case 'Money':
        return this.money(value, at);
      case 'currency-keyed money map':
        return this.moneyMap(value, at);
      case 'object':
        return this.object(field, value, at);
      case 'array of objects':
        if (!Array.isArray(value)) return is(false, 'an array of objects');
        return value.forEach((element, index) => this.object(field, element, `${at}[${index}]`));
      case 'to-one':
      case 'to-many':
        return this.relationship(value, field.type, undefined, at);
    }
  }

  private string(field: FieldSpec, value: Json, at: string): void {
    if (typeof value !== 'string') return this.report(at, `a string, got ${show(value)}`);
    if (field.notes.startsWith('hex colour') && !/^#[0-9a-fA-F]{6}$/.test(value))
      this.report(at, `a hex colour with a leading #, got ${show(value)}`);
  }

  private object(field: FieldSpec, value: Json, at: string): void {
    if (!isObject(value)) return this.report(at, `an object, got ${show(value)}`);
    const nestedFields = field.nested ?? [];
    const required = nestedFields.filter(
      (inner) => inner.presentWith === undefined || value.type === inner.presentWith,
    );
    this.keys(
      value,
      required.map((inner) => inner.name),
      at,
      nestedFields.map((inner) => inner.name),
    );
    for (const inner of nestedFields) {
      if (inner.name in value) this.value(inner, value[inner.name], `${at}.${inner.name}`);
    }
  }

  private fields(object: Record<string, Json>, fields: FieldSpec[], at: string): void {
    this.keys(
      object,
      fields.map((field) => field.name),
      at,
    );
    for (const field of fields) {
      if (field.name in object) this.value(field, object[field.name], `${at}.${field.name}`);
    }
  }

  private money(value: Json, at: string): void {
    if (!isObject(value)) return this.report(at, `a Money object, got ${show(value)}`);
    this.fields(value, this.spec.money, at);
    const digits = typeof value.format === 'string' ? value.format.replace(/\D/g, '') : '';
    if (Number.isInteger(value.cents) && (digits === '' || Number(digits) !== Math.abs(value.cents))) {
      this.report(`${at}.format`, `the amount ${value.cents}, got ${show(value.format)}`);
    }
    if (typeof value.format === 'string' && !/[^\d\s.,-]/.test(value.format))
      this.report(`${at}.format`, `a currency symbol, got ${show(value.format)}`);
  }

  private moneyMap(value: Json, at: string): void {
    if (!isObject(value)) return this.report(at, `a currency-keyed money map, got ${show(value)}`);
    for (const [currency, entry] of Object.entries(value)) {
      if (!/^[A-Z]{3}$/.test(currency)) this.report(at, `currency codes as keys, got ${show(currency)}`);
      this.money(entry, `${at}.${currency}`);
      if (entry?.currency?.iso_code !== currency) this.report(`${at}.${currency}.currency.iso_code`, currency);
    }
  }

  private timeRanges(value: Json, at: string): void {
    const isTime = (time: unknown) => typeof time === 'string' && TIME_OF_DAY.test(time);
    const pairs =
      Array.isArray(value) && value.every((pair) => Array.isArray(pair) && pair.length === 2 && pair.every(isTime));
    if (!pairs) this.report(at, `an array of [open, close] pairs of H:MM or HH:MM times, got ${show(value)}`);
  }

  private relationship(value: Json, kind: 'to-one' | 'to-many', type: string | undefined, at: string): void {
    if (!isObject(value)) return this.report(at, `a ${kind} relationship object, got ${show(value)}`);
    this.keys(value, ['data'], at);
    if (kind === 'to-one') {
      if (value.data !== null) this.identifier(value.data, type, `${at}.data`);
    } else if (Array.isArray(value.data)) {
      value.data.forEach((identifier: Json, index: number) =>
        this.identifier(identifier, type, `${at}.data[${index}]`),
      );
    } else {
      this.report(`${at}.data`, `an array of resource identifiers (to-many), got ${show(value.data)}`);
    }
  }

  private identifier(value: Json, type: string | undefined, at: string): void {
    if (!isObject(value)) return this.report(at, `a resource identifier, got ${show(value)}`);
    this.keys(value, ['id', 'type'], at);
    if (typeof value.id !== 'string' || value.id === '')
      this.report(`${at}.id`, `a non-empty string, got ${show(value.id)}`);
    if (type !== undefined && value.type !== type) this.report(`${at}.type`, `${type}, got ${show(value.type)}`);
  }

  /** Exactly the `required` names, plus any of the `optional` ones. */
  private keys(object: Record<string, Json>, required: string[], at: string, optional: string[] = []): void {
    for (const name of required) if (!(name in object)) this.problems.push(`${at}: missing "${name}"`);
    for (const name of Object.keys(object)) {
      if (!required.includes(name) && !optional.includes(name))
        this.problems.push(`${at}: "${name}" is not in the spec`);
    }
  }

  private report(at: string, expected: string): void {
    this.problems.push(`${at}: expected ${expected}`);
  }
}

/** The objects that dotted field names run through, each with the names it holds ('' is the top). */
function containersOf(fields: FieldSpec[]): Map<string, string[]> {
  const containers = new Map<string, string[]>([['', []]]);
  for (const { name } of fields) {
    const segments = name.split('.');
    segments.forEach((segment, depth) => {
      const parent = segments.slice(0, depth).join('.');
      const siblings = containers.get(parent) ?? [];
      if (!siblings.includes(segment)) siblings.push(segment);
      containers.set(parent, siblings);
    });
  }
  return containers;
}

function get(object: Json, path: string): Json {
  return path.split('.').reduce((value, key) => (isObject(value) ? value[key] : undefined), object);
}

function problemsOf(spec: Spec, check: (checker: ShapeChecker) => void): string[] {
  const checker = new ShapeChecker(spec);
  check(checker);
  return checker.problems;
}

/** Delivery rule 2: an order event's `included` holds everything the order refers to. */
function orderEventProblems(body: Json, at: string): string[] {
  const problems: string[] = [];
  const included: Json[] = body.included;
  const byKey = new Map(included.map((resource) => [`${resource.type}:${resource.id}`, resource]));
  if (byKey.size !== included.length) problems.push(`${at}.included: a resource is included twice`);
  const need = (identifier: Json, why: string): Json => {
    const resource = byKey.get(`${identifier?.type}:${identifier?.id}`);
    if (resource === undefined) problems.push(`${at}.included: lacks ${show(identifier)} (${why})`);
    return resource ?? { relationships: {} };
  };
  const subject = body.data.relationships.subject.data;
  if (subject.type !== 'order') problems.push(`${at}: the subject of an order event is ${show(subject)}`);
  const order = need(subject, 'the subject');
  need(order.relationships.store?.data, "the order's store");
  need(order.relationships.user?.data, "the order's user");
  for (const identifier of order.relationships.order_products?.data ?? []) {
    const orderProduct = need(identifier, 'an order product');
    need(orderProduct.relationships.product?.data, 'an ordered product');
    for (const optionRow of orderProduct.relationships.order_product_trait_options?.data ?? []) {
      const row = need(optionRow, 'an order product trait option');
      const option = need(row.relationships.trait_option?.data, 'a chosen trait option');
      need(option.relationships.trait?.data, 'the trait of a chosen option');
    }
  }
  return problems;
}

/** The events table's "Resources included" column; a menu event's body is about its own resource. */
function eventsTableProblems(spec: Spec, body: Json, at: string): string[] {
  const problems: string[] = [];
  const eventType: string = body.data.attributes.event_type;
  const types = new Set(body.included.map((resource: Json) => resource.type));
  for (const type of spec.events.get(eventType) ?? []) {
    if (!types.has(type)) problems.push(`${at}.included: no ${type}, which the events table names`);
  }
  if (eventType.endsWith('.destroyed') && body.included.length > 0)
    problems.push(`${at}.included: not empty for a destroyed event`);
  if (eventType.startsWith('order.')) return problems;
  const subject = body.data.relationships.subject.data;
  if (subject.type !== eventType.split('.')[0])
    problems.push(`${at}: the subject ${show(subject)} of a ${eventType} event`);
  const others = body.included.filter((resource: Json) => resource.type !== subject.type || resource.id !== subject.id);
  if (!eventType.endsWith('.destroyed') && (others.length > 0 || body.included.length !== 1)) {
    problems.push(
      `${at}.included: expected exactly the subject ${show(subject)}, got ${show(body.included.map((resource: Json) => `${resource.type}:${resource.id}`))}`,
    );
  }
  return problems;
}

// ── The emulator side: a receiver, a subscription, one change of every kind ──────────────────

interface Receiver {
  url: string;
  bodies: string[];
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const bodies: string[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/shapes`,
    bodies,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function subscribe(
  emulator: RunningEmulator,
  token: string,
  callbackUri: string,
  events: string[],
): Promise<void> {
  const form = new URLSearchParams([
    ['callback_uri', callbackUri],
    ...events.map((name): [string, string] => ['enabled_events[]', name]),
  ]);
  const reply = await call(emulator, '/webhook_endpoints', {
    method: 'POST',
    headers: {
      accept: 'application/vnd.service.v2',
      authorization: `Bearer ${token}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: form,
  });
  expect(reply.status).toBe(201);
}

async function ok(reply: Promise<Reply>, status: number): Promise<Json> {
  const answer = await reply;
  if (answer.status !== status) throw new Error(`expected ${status}, got ${answer.status}: ${answer.text}`);
  return answer.json;
}

/** Creates, updates and destroys one resource of each menu type, and places and updates an order with options. */
async function driveEveryChange(emulator: RunningEmulator): Promise<void> {
  const statuses: Record<string, number> = { POST: 201, PATCH: 200, DELETE: 204 };
  const send = (method: string, path: string, body?: unknown) =>
    ok(control(emulator, method, `/_emulator/${path}`, body), statuses[method]);
  const state = await ok(control(emulator, 'GET', '/_emulator/state'), 200);
  const flatWhite = state.products.find((product: Json) => product.attributes.title === 'Flat white');
  const options = state.trait_options.filter((option: Json) => ['Oat', 'Large'].includes(option.attributes.title));

  const collection = (
    await send('POST', 'collections', {
      attributes: { title: 'Specials' },
      relationships: { products: [flatWhite.id] },
    })
  ).id;
  await send('PATCH', `collections/${collection}`, { attributes: { description: 'This week only' } });
  const trait = (
    await send('POST', 'traits', { attributes: { title: 'Sauce', required: false, allow_multiple: true } })
  ).id;
  const option = (
    await send('POST', 'trait_options', {
      attributes: { title: 'Ketchup', cost_adjustment: { GBP: 20, EUR: 25 } },
      relationships: { trait },
    })
  ).id;
  await send('PATCH', `trait_options/${option}`, { attributes: { available: false } });
  const product = (
    await send('POST', 'products', {
      attributes: { title: 'Hot dog', base_cost: { GBP: 650, EUR: 750 } },
      relationships: { traits: [trait] },
    })
  ).id;
  await send('PATCH', `products/${product}`, { attributes: { description: 'With onions' } });
  const order = (
    await send('POST', 'orders', {
      store_id: '1',
      attributes: { note: 'No rush', delivery_method: { type: 'eat_in', table: '4' } },
      order_products: [
        { product_id: flatWhite.id, quantity: 2, trait_option_ids: options.map((entry: Json) => entry.id) },
        { product_id: product, quantity: 1, trait_option_ids: [option], note: 'Extra hot' },
      ],
    })
  ).id;
  await send('PATCH', `orders/${order}`, { attributes: { status: 'accepted' } });
  await send('DELETE', `trait_options/${option}`);
  await send('DELETE', `traits/${trait}`);
  await send('DELETE', `products/${product}`);
  await send('DELETE', `collections/${collection}`);
}

// ── The tests ────────────────────────────────────────────────────────────────────────────────

const markdown = readFileSync(SPEC_PATH, 'utf8');
const spec = parseSpec(markdown);
const ALL_EVENTS = [...spec.events.keys()];

describe('the spec tables (fixture parser)', () => {
  it('reads every shape of the spec, question-marked names included', () => {
    expect(spec.money.map((field) => `${field.name}:${field.type}`)).toEqual([
      'cents:integer',
      'format:string',
      'currency:object',
    ]);
    expect(spec.webhookEvent.map((field) => field.name)).toEqual([
      'id',
      'type',
      'attributes.id',
      'attributes.created_at',
      'attributes.event_type',
      'attributes.uri',
      'relationships.subject',
      'relationships.resource_owner',
    ]);
    const order = spec.resources.get('order')!;
    expect(order.fields.map((field) => field.name)).toEqual(
      expect.arrayContaining(['for_pickup?', 'order_dependencies_are_present_and_available_for_reorder?']),
    );
    expect(order.relationships).toEqual([
      { name: 'order_products', kind: 'to-many' },
      { name: 'store', kind: 'to-one' },
      { name: 'user', kind: 'to-one' },
      { name: 'table', kind: 'to-one' },
      { name: 'feedback', kind: 'to-one' },
    ]);
    expect(
      order.fields.find((field) => field.name === 'history')!.nested!.map((field) => `${field.name}:${field.type}`),
    ).toEqual(['transitioned_at_human:string', 'status:string', 'transitioned_at:timestamp', 'most_recent:boolean']);
    const store = spec.resources.get('store')!;
    expect(store.fields.find((field) => field.name === 'opening_times')!.nested!.map((field) => field.name)).toEqual(
      WEEK,
    );
    expect(store.fields.find((field) => field.name === 'logo')!.nested!.map((field) => field.name)).toEqual([
      'x1',
      'x2',
      'x3',
    ]);
    expect(Object.fromEntries([...spec.resources].map(([type, shape]) => [type, shape.fields.length]))).toEqual({
      order: 11,
      order_product: 6,
      order_product_trait_option: 2,
      trait_option: 6,
      trait: 5,
      product: 5,
      store: 22,
    });
    expect(ALL_EVENTS).toHaveLength(14);
    expect(spec.events.get('order.created')).toEqual(['user', 'order_product']);
    expect(spec.events.get('trait_option.updated')).toEqual(['trait_option']);
    expect(spec.events.get('product.destroyed')).toEqual([]);
  });

  it('refuses a table it does not understand rather than skipping it', () => {
    const mangle = (from: string, to: string) => () => parseSpec(markdown.replace(from, to));
    expect(mangle('| note | string or null | |', '| note | text | |')).toThrow('order.note: unknown type "text"');
    expect(mangle('| quantity | integer |', '| quantity | integer | extra |')).toThrow('has 3 cells');
    expect(mangle('Relationships: trait (to-one).', 'Relationships: trait (to-one')).toThrow('is not "name');
    expect(mangle('### trait_option', '### trait option')).toThrow('no section "### trait_option"');
    expect(mangle('each a URL string of an image', 'image URLs')).toThrow('store.logo: the notes give no shape');
  });
});

describe('the emulator against the spec tables', () => {
  let emulator: RunningEmulator;
  let receiver: Receiver;
  let token: string;
  let bodies: Json[];
  let produced: Json[];

  beforeAll(async () => {
    receiver = await startReceiver();
    emulator = await bootEmulator({ demoData: true });
    token = (await obtainTokens(emulator)).access_token;
    const seeded = (await ok(control(emulator, 'GET', '/_emulator/events'), 200)).data.length;
    await subscribe(emulator, token, receiver.url, ALL_EVENTS);
    await driveEveryChange(emulator);
    await eventually(async () =>
      expect((await ok(control(emulator, 'GET', '/_emulator/deliveries'), 200)).pending).toBe(0),
    );
    produced = (await ok(control(emulator, 'GET', '/_emulator/events'), 200)).data.slice(seeded);
    bodies = receiver.bodies.map((body) => JSON.parse(body));
  });

  afterAll(async () => {
    await emulator?.close();
    await receiver?.close();
  });

  const bodiesOf = (prefix: string) => bodies.filter((body) => body.data.attributes.event_type.startsWith(prefix));
  const label = (body: Json) => `${body.data.attributes.event_type}#${body.data.id}`;

  it('delivers every produced event once, covering all 14 event names', () => {
    expect(bodies.map((body) => body.data.id).sort()).toEqual(produced.map((event) => event.event_id).sort());
    expect(new Set(bodies.map((body) => body.data.attributes.event_type))).toEqual(new Set(ALL_EVENTS));
  });

  it('sends each body with exactly the webhook event fields of the spec', () => {
    const problems = problemsOf(spec, (checker) =>
      bodies.forEach((body) => checker.webhookEvent(body, receiver.url, label(body))),
    );
    expect(problems).toEqual([]);
    for (const body of bodies) {
      expect(body.data.id).toBe(String(body.data.attributes.id));
      expect(body.data.relationships.resource_owner.data).toEqual({ id: expect.any(String), type: 'user' });
    }
  });

  it('numbers events with increasing attributes.id and non-decreasing created_at, in the order they happened', () => {
    const byId = new Map(bodies.map((body) => [body.data.id, body.data.attributes]));
    const inOrder = produced.map((event) => byId.get(event.event_id)!);
    for (let index = 1; index < inOrder.length; index += 1) {
      expect(inOrder[index].id).toBeGreaterThan(inOrder[index - 1].id);
      expect(Date.parse(inOrder[index].created_at)).toBeGreaterThanOrEqual(Date.parse(inOrder[index - 1].created_at));
    }
  });

  it('includes in each event the resource types the events table names, and nothing for destroyed events', () => {
    expect(bodies.flatMap((body) => eventsTableProblems(spec, body, label(body)))).toEqual([]);
  });

  it('includes in order events the order, its order products and their options, the options, traits, products, store and user (rule 2)', () => {
    const orderBodies = bodiesOf('order.');
    expect(orderBodies.map((body) => body.data.attributes.event_type)).toEqual(['order.created', 'order.updated']);
    expect(orderBodies.flatMap((body) => orderEventProblems(body, label(body)))).toEqual([]);
    for (const body of orderBodies) {
      const types = new Set(body.included.map((resource: Json) => resource.type));
      expect([...types].sort()).toEqual([
        'order',
        'order_product',
        'order_product_trait_option',
        'product',
        'store',
        'trait',
        'trait_option',
        'user',
      ]);
    }
  });

  it('shows a new order pending with one most recent history entry, and an update as the newest entry', () => {
    const orders = bodiesOf('order.').map(
      (body) => body.included.find((resource: Json) => resource.type === 'order').attributes,
    );
    expect(orders[0].status).toBe('pending');
    expect(orders[0].history).toEqual([expect.objectContaining({ status: 'pending', most_recent: true })]);
    expect(orders[1].status).toBe('accepted');
    expect(orders[1].history.map((entry: Json) => [entry.status, entry.most_recent])).toEqual([
      ['pending', false],
      ['accepted', true],
    ]);
    expect(orders[1].delivery_method).toEqual({ type: 'eat_in', table: '4' });
  });

  it('has seen every resource type whose fields the spec lists among the bodies checked', () => {
    const types = new Set(bodies.flatMap((body) => body.included.map((resource: Json) => resource.type)));
    for (const type of RESOURCE_SECTIONS) expect(types).toContain(type);
  });

  it('answers the snapshot and order documents with resources of the same shapes', async () => {
    const headers = { authorization: `Bearer ${token}` };
    const problems: string[] = [];
    for (const path of ['collections', 'products', 'traits', 'trait_options', 'orders']) {
      const document = await ok(call(emulator, `/stores/1/${path}`, { headers }), 200);
      expect(Object.keys(document).sort()).toEqual(
        path === 'orders' ? ['data', 'included', 'links', 'meta'] : ['data', 'links', 'meta'],
      );
      expect(document.data.length).toBeGreaterThan(0);
      expect(new Set(document.data.map((resource: Json) => resource.type))).toEqual(new Set([singular(path)]));
      problems.push(
        ...problemsOf(spec, (checker) =>
          [...document.data, ...(document.included ?? [])].forEach((resource: Json, index: number) =>
            checker.resource(resource, `${path}[${index}]`),
          ),
        ),
      );
    }
    expect(problems).toEqual([]);
  });

  describe('strictness', () => {
    const someOrder = () =>
      structuredClone(bodiesOf('order.created')[0].included.find((resource: Json) => resource.type === 'order'));
    const someStore = () =>
      structuredClone(bodiesOf('order.created')[0].included.find((resource: Json) => resource.type === 'store'));

    it('reports an attribute renamed by the emulator as one missing and one extra name', () => {
      const order = someOrder();
      order.attributes.for_pickup = order.attributes['for_pickup?'];
      delete order.attributes['for_pickup?'];

      expect(problemsOf(spec, (checker) => checker.resource(order, 'order'))).toEqual([
        'order.attributes: missing "for_pickup?"',
        'order.attributes: "for_pickup" is not in the spec',
      ]);
    });

    it('reports a field renamed in the spec against what the emulator sends', () => {
      const renamed = parseSpec(markdown.replace('| accepting_orders? |', '| accepting_orders |'));

      expect(problemsOf(renamed, (checker) => checker.resource(someStore(), 'store'))).toEqual([
        'store.attributes: missing "accepting_orders"',
        'store.attributes: "accepting_orders?" is not in the spec',
      ]);
    });

    it('reports wrong JSON types, nested shapes and relationship shapes', () => {
      const order = someOrder();
      order.attributes.total.cents = '1080';
      order.attributes.history[0].most_recent = 'yes';
      delete order.attributes.delivery_method.table;
      order.relationships.store = { data: [order.relationships.store.data] };
      order.relationships.user.data.type = 'customer';
      const store = someStore();
      store.attributes.opening_times.monday = [['8:00', '25:00']];
      store.attributes.logo.x4 = store.attributes.logo.x3;
      store.attributes.created_at = '2025-01-01T00:00:00Z';

      expect(
        problemsOf(spec, (checker) => {
          checker.resource(order, 'order');
          checker.resource(store, 'store');
        }),
      ).toEqual([
        'order.attributes.delivery_method: missing "table"',
        expect.stringMatching(/^order\.attributes\.total\.cents: expected an integer/),
        expect.stringMatching(/^order\.attributes\.history\[0\]\.most_recent: expected a boolean/),
        expect.stringMatching(/^order\.relationships\.store\.data: expected a resource identifier/),
        expect.stringMatching(/^order\.relationships\.user\.data\.type: expected user/),
        expect.stringMatching(/^store\.attributes\.opening_times\.monday: expected an array of \[open, close\] pairs/),
        expect.stringMatching(/^store\.attributes\.created_at: expected an ISO 8601 UTC timestamp with milliseconds/),
        'store.attributes.logo: "x4" is not in the spec',
      ]);
    });
  });
});
