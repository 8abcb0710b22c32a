import { controlError } from '../emulator-http.error.js';
import type { ResourceObject } from '../platform-event.js';
import { centsIn, money } from './money.js';
import { MenuRecord, OrderRecord, relatedId, toMany, toOne } from './records.js';

/** One line of `POST /_emulator/orders`, after validation. */
export interface OrderLine {
  product: MenuRecord;
  quantity: number;
  options: MenuRecord[];
  note: string | null;
}

export interface NewOrder {
  id: string;
  storeId: string;
  ownerId: string;
  customerId: string;
  currency: string;
  attributes: Record<string, unknown>;
  lines: OrderLine[];
  /** The ids for the order products and their trait options, in order. */
  nextId: () => string;
  now: Date;
}

const HUMAN = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });

/** An entry of an order's `history` (spec: order.history). */
export function historyEntry(status: string, at: Date, mostRecent: boolean): Record<string, unknown> {
  return {
    transitioned_at_human: HUMAN.format(at),
    status,
    transitioned_at: at.toISOString(),
    most_recent: mostRecent,
  };
}

/** Prices the lines in the store's currency and builds the order, order products and their trait options. */
export function buildOrder(input: NewOrder): OrderRecord {
  const orderProducts: ResourceObject[] = [];
  const optionRows: ResourceObject[] = [];
  let subtotal = 0;
  input.lines.forEach((line, index) => {
    const base = centsIn(line.product.resource.attributes.base_cost, input.currency);
    if (base === undefined) {
      throw controlError(
        422,
        `product ${line.product.id} has no price in ${input.currency}`,
        `order_products[${index}].product_id`,
      );
    }
    const rows = line.options.map((option) => {
      const cents = centsIn(option.resource.attributes.cost_adjustment, input.currency) ?? 0;
      const id = input.nextId();
      return {
        cents,
        row: {
          id,
          type: 'order_product_trait_option',
          attributes: { id: Number(id), cost: money(cents, input.currency) },
          relationships: { trait_option: toOne('trait_option', option.id) },
        },
      };
    });
    const unitTotal = base + rows.reduce((sum, { cents }) => sum + cents, 0);
    const total = unitTotal * line.quantity;
    subtotal += total;
    const id = input.nextId();
    orderProducts.push({
      id,
      type: 'order_product',
      attributes: {
        id: Number(id),
        note: line.note,
        quantity: line.quantity,
        total,
        unit_total: unitTotal,
        cost: money(total, input.currency),
      },
      relationships: {
        product: toOne('product', line.product.id),
        order_product_trait_options: toMany(
          'order_product_trait_option',
          rows.map(({ row }) => row.id),
        ),
      },
    });
    optionRows.push(...rows.map(({ row }) => row));
  });
  const deliveryMethod = input.attributes.delivery_method as { type: string; table?: string };
  const order: ResourceObject = {
    id: input.id,
    type: 'order',
    attributes: {
      id: Number(input.id),
      note: input.attributes.note ?? null,
      due_at: input.attributes.due_at ?? new Date(input.now.getTime() + 20 * 60_000).toISOString(),
      'for_pickup?': input.attributes['for_pickup?'] ?? false,
      status: 'pending',
      created_at: input.now.toISOString(),
      'order_dependencies_are_present_and_available_for_reorder?': true,
      delivery_method: deliveryMethod,
      subtotal: money(subtotal, input.currency),
      total: money(subtotal, input.currency),
      history: [historyEntry('pending', input.now, true)],
    },
    relationships: {
      order_products: toMany(
        'order_product',
        orderProducts.map((row) => row.id),
      ),
      store: toOne('store', input.storeId),
      user: toOne('user', input.customerId),
      table: toOne(
        'table',
        deliveryMethod.type === 'eat_in' && deliveryMethod.table !== undefined ? deliveryMethod.table : null,
      ),
      feedback: toOne('feedback', null),
    },
  };
  return {
    id: input.id,
    storeId: input.storeId,
    ownerId: input.ownerId,
    customerId: input.customerId,
    order,
    orderProducts,
    orderProductTraitOptions: optionRows,
  };
}

/** An order with one more status entry, which becomes the most recent. */
export function withStatus(order: ResourceObject, status: string, now: Date): ResourceObject {
  const history = (order.attributes.history as Record<string, unknown>[]).map((entry) => ({
    ...entry,
    most_recent: false,
  }));
  return {
    ...order,
    attributes: { ...order.attributes, status, history: [...history, historyEntry(status, now, true)] },
  };
}

/**
 * `included` of an order event: the union of the spec's events table and its delivery rule 2 —
 * the customer, the order, its order products and their trait options, the trait options, traits
 * and products they refer to (as they are now; destroyed ones left out), and the store.
 */
export function orderIncluded(
  record: OrderRecord,
  menu: (type: string, id: string) => MenuRecord | undefined,
  store: ResourceObject,
): ResourceObject[] {
  const options = unique(record.orderProductTraitOptions.map((row) => relatedId(row, 'trait_option')))
    .map((id) => menu('trait_option', id))
    .filter((option): option is MenuRecord => option !== undefined);
  const traits = unique(options.map((option) => relatedId(option.resource, 'trait')))
    .map((id) => menu('trait', id))
    .filter((trait): trait is MenuRecord => trait !== undefined);
  const products = unique(record.orderProducts.map((row) => relatedId(row, 'product')))
    .map((id) => menu('product', id))
    .filter((product): product is MenuRecord => product !== undefined);
  return [
    { id: record.customerId, type: 'user', attributes: { id: Number(record.customerId) } },
    record.order,
    ...record.orderProducts,
    ...record.orderProductTraitOptions,
    ...options.map((option) => option.resource),
    ...traits.map((trait) => trait.resource),
    ...products.map((product) => product.resource),
    store,
  ];
}

function unique(ids: (string | null)[]): string[] {
  return [...new Set(ids.filter((id): id is string => id !== null))];
}
