import { controlError } from '../emulator-http.error.js';
import type { OrderLine } from './order-documents.js';
import { MenuRecord, StoreRecord, relatedId, relatedIds } from './records.js';
import type { MenuType } from './resource-schemas.js';

export const DEFAULT_CUSTOMER_ID = '9001';

const ORDER_ATTRIBUTES = new Set(['note', 'due_at', 'for_pickup?', 'delivery_method']);

export interface OrderInput {
  storeId: string;
  customerId: string;
  attributes: Record<string, unknown>;
  lines: OrderLine[];
}

/** Validates `POST /_emulator/orders`: live products of the store, options of those products' traits. */
export function parseOrder(
  body: Record<string, unknown>,
  store: (id: string) => StoreRecord | undefined,
  menu: (type: MenuType, id: string) => MenuRecord | undefined,
): OrderInput {
  const storeId =
    typeof body.store_id === 'string' || typeof body.store_id === 'number' ? String(body.store_id) : undefined;
  if (storeId === undefined || store(storeId) === undefined)
    throw controlError(422, 'store_id must name a store', 'store_id');
  const customerId = body.user_id === undefined ? DEFAULT_CUSTOMER_ID : String(body.user_id);
  if (!/^[1-9]\d{0,15}$/.test(customerId)) throw controlError(422, 'user_id must be a positive integer id', 'user_id');
  const attributes = parseOrderAttributes(body.attributes);
  if (!Array.isArray(body.order_products) || body.order_products.length === 0) {
    throw controlError(422, 'order_products must list at least one product', 'order_products');
  }
  const lines = body.order_products.map((line: unknown, index: number) =>
    parseLine(line, `order_products[${index}]`, storeId, menu),
  );
  return { storeId, customerId, attributes, lines };
}

function parseOrderAttributes(input: unknown): Record<string, unknown> {
  if (input === undefined) return { delivery_method: { type: 'eat_in', table: '12' } };
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw controlError(422, 'attributes must be an object', 'attributes');
  const attributes = input as Record<string, unknown>;
  for (const name of Object.keys(attributes)) {
    if (!ORDER_ATTRIBUTES.has(name))
      throw controlError(
        422,
        `an order is placed with ${[...ORDER_ATTRIBUTES].join(', ')}; not ${name}`,
        `attributes.${name}`,
      );
  }
  if (attributes.note !== undefined && attributes.note !== null && typeof attributes.note !== 'string')
    throw controlError(422, 'attributes.note must be a string or null', 'attributes.note');
  if (
    attributes.due_at !== undefined &&
    (typeof attributes.due_at !== 'string' || Number.isNaN(Date.parse(attributes.due_at)))
  ) {
    throw controlError(422, 'attributes.due_at must be an ISO 8601 timestamp', 'attributes.due_at');
  }
  const dueAt = attributes.due_at === undefined ? undefined : new Date(attributes.due_at as string).toISOString();
  if (attributes['for_pickup?'] !== undefined && typeof attributes['for_pickup?'] !== 'boolean')
    throw controlError(422, 'attributes.for_pickup? must be a boolean', 'attributes.for_pickup?');
  const method = attributes.delivery_method ?? { type: 'eat_in', table: '12' };
  const { type, table } = method as { type?: unknown; table?: unknown };
  if (typeof type !== 'string' || (table !== undefined && typeof table !== 'string')) {
    throw controlError(
      422,
      'attributes.delivery_method must be {"type": string, "table"?: string}',
      'attributes.delivery_method',
    );
  }
  return {
    ...attributes,
    ...(dueAt === undefined ? {} : { due_at: dueAt }),
    delivery_method: table === undefined ? { type } : { type, table },
  };
}

function parseLine(
  input: unknown,
  field: string,
  storeId: string,
  menu: (type: MenuType, id: string) => MenuRecord | undefined,
): OrderLine {
  if (typeof input !== 'object' || input === null) throw controlError(422, `${field} must be an object`, field);
  const line = input as Record<string, unknown>;
  const product = menu('product', String(line.product_id));
  if (product === undefined || product.storeId !== storeId)
    throw controlError(422, `${field}.product_id must name a live product of the store`, `${field}.product_id`);
  const quantity = line.quantity ?? 1;
  if (typeof quantity !== 'number' || !Number.isInteger(quantity) || quantity < 1 || quantity > 999) {
    throw controlError(422, `${field}.quantity must be an integer from 1 to 999`, `${field}.quantity`);
  }
  const optionIds = line.trait_option_ids ?? [];
  if (!Array.isArray(optionIds))
    throw controlError(422, `${field}.trait_option_ids must be an array`, `${field}.trait_option_ids`);
  const traits = new Set(relatedIds(product.resource, 'traits'));
  const options = optionIds.map((id: unknown) => {
    const option = menu('trait_option', String(id));
    if (option === undefined || !traits.has(relatedId(option.resource, 'trait') ?? '')) {
      throw controlError(
        422,
        `${field}.trait_option_ids: ${String(id)} is not a live option of the product's traits`,
        `${field}.trait_option_ids`,
      );
    }
    return option;
  });
  if (line.note !== undefined && line.note !== null && typeof line.note !== 'string')
    throw controlError(422, `${field}.note must be a string or null`, `${field}.note`);
  return { product, quantity, options, note: (line.note as string | null | undefined) ?? null };
}

/** Validates `PATCH /_emulator/orders/{id}`: a new status (a history entry) and/or a note. */
export function parseOrderUpdate(body: Record<string, unknown>): { status?: string; note?: string | null } {
  const attributes = body.attributes;
  if (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes))
    throw controlError(422, 'attributes must be an object', 'attributes');
  const { status, note, ...rest } = attributes as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined)
    throw controlError(422, `an order's status and note can change; not ${unknown}`, `attributes.${unknown}`);
  if (status !== undefined && (typeof status !== 'string' || !/^[a-z_]{1,40}$/.test(status))) {
    throw controlError(422, 'attributes.status must be a lowercase status name', 'attributes.status');
  }
  if (note !== undefined && note !== null && typeof note !== 'string')
    throw controlError(422, 'attributes.note must be a string or null', 'attributes.note');
  if (status === undefined && note === undefined)
    throw controlError(422, 'give attributes.status or attributes.note', 'attributes');
  return { status: status as string | undefined, note: note as string | null | undefined };
}
