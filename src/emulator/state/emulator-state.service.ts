import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { SpecEventName } from '../../domain/event-names.js';
import { Clock } from '../clock.js';
import { controlError } from '../emulator-http.error.js';
import { EMULATOR_OPTIONS } from '../emulator-options.js';
import type { EmulatorOptions } from '../emulator-options.js';
import { DEMO_USER_ID } from '../oauth/oauth-server.service.js';
import { EVENT_SINK } from '../platform-event.js';
import type { EventSink, PlatformEvent, ResourceObject } from '../platform-event.js';
import { DEMO_MENU, demoPrices } from './demo-data.js';
import { buildOrder, orderIncluded, withStatus } from './order-documents.js';
import { parseOrder, parseOrderUpdate } from './order-input.js';
import { MenuRecord, OrderRecord, StoreRecord, relatedId, relatedIds, toMany, toOne } from './records.js';
import { isDerived, MENU_TYPES, MenuType, parseAttributes, parseRelationships, SCHEMAS } from './resource-schemas.js';
import { parseStore } from './store-input.js';
import { storeResource } from './store-attributes.js';

export const DEMO_STORE_ID = '1';

/** What `GET /_emulator/state` answers: the live resources, as the mirror should end up. */
export interface StateDocument {
  collections: ResourceObject[];
  products: ResourceObject[];
  traits: ResourceObject[];
  trait_options: ResourceObject[];
  orders: ResourceObject[];
  order_products: ResourceObject[];
  order_product_trait_options: ResourceObject[];
  stores: ResourceObject[];
}

/**
 * The platform's data, in memory: stores, their menus and orders. Every change through here
 * produces the spec's webhook event(s) for the delivery service, and keeps the two sides of the
 * trait ↔ trait option relationship and the references to destroyed resources consistent, each
 * such knock-on change with its own `*.updated` event, so a faithful mirror can equal this state.
 */
@Injectable()
export class EmulatorState implements OnModuleInit {
  private readonly stores = new Map<string, StoreRecord>();
  private readonly menu = new Map<MenuType, Map<string, MenuRecord>>(MENU_TYPES.map((type) => [type, new Map()]));
  private readonly orders = new Map<string, OrderRecord>();
  private readonly lastIds = new Map<string, number>();
  private seq: number;
  private ordinal = 0;

  constructor(
    @Inject(EMULATOR_OPTIONS) private readonly options: EmulatorOptions,
    private readonly clock: Clock,
    @Inject(EVENT_SINK) private readonly sink: EventSink,
  ) {
    // attributes.id keeps increasing across restarts of the emulator: it starts from the clock.
    this.seq = clock.now().getTime() * 1000;
  }

  onModuleInit(): void {
    this.stores.set(DEMO_STORE_ID, {
      id: DEMO_STORE_ID,
      ownerId: DEMO_USER_ID,
      currency: 'GBP',
      resource: storeResource(DEMO_STORE_ID, 'The Demo Kitchen', this.clock.now()),
    });
    this.lastIds.set('store', 1);
    if (this.options.demoData) this.seedDemoMenu();
  }

  // ── reads ────────────────────────────────────────────────────────────────────────────────

  state(): StateDocument {
    const live = (type: MenuType) => this.sorted([...this.table(type).values()].map((record) => record.resource));
    const orders = [...this.orders.values()];
    return {
      collections: live('collection'),
      products: live('product'),
      traits: live('trait'),
      trait_options: live('trait_option'),
      orders: this.sorted(orders.map((record) => record.order)),
      order_products: this.sorted(orders.flatMap((record) => record.orderProducts)),
      order_product_trait_options: this.sorted(orders.flatMap((record) => record.orderProductTraitOptions)),
      stores: this.sorted([...this.stores.values()].map((record) => record.resource)),
    };
  }

  store(storeId: string): StoreRecord | undefined {
    return this.stores.get(storeId);
  }

  /** The live menu resources of one type at one store, by id. */
  menuOf(storeId: string, type: MenuType): ResourceObject[] {
    return this.sorted(
      [...this.table(type).values()].filter((record) => record.storeId === storeId).map((record) => record.resource),
    );
  }

  /** A store's orders, each with the resources an order event would include. */
  ordersOf(storeId: string): OrderRecord[] {
    return [...this.orders.values()]
      .filter((record) => record.storeId === storeId)
      .sort((a, b) => Number(a.id) - Number(b.id));
  }

  orderIncluded(record: OrderRecord): ResourceObject[] {
    return orderIncluded(
      record,
      (type, id) => this.table(type as MenuType).get(id),
      this.stores.get(record.storeId)!.resource,
    );
  }

  liveIds(type: MenuType | 'order'): string[] {
    const ids = type === 'order' ? [...this.orders.keys()] : [...this.table(type).keys()];
    return ids.sort((a, b) => Number(a) - Number(b));
  }

  // ── menu changes ─────────────────────────────────────────────────────────────────────────

  createMenu(type: MenuType, body: Record<string, unknown>): string {
    checkType(type, body.type);
    const store = this.storeFor(body.store_id);
    const attributes = parseAttributes(type, body.attributes, true);
    const relationships = this.initialRelationships(type);
    const links = withoutDerived(type, parseRelationships(type, body.relationships), relationships);
    const id = this.nextId(type);
    const record: MenuRecord = {
      type,
      id,
      storeId: store.id,
      ownerId: store.ownerId,
      resource: { id, type, attributes: { id: Number(id), ...attributes }, relationships },
    };
    this.applyLinks(record, links);
    this.table(type).set(id, record);
    this.emit(`${type}.created`, record);
    this.syncTraitOptions(record, null);
    return id;
  }

  updateMenu(type: MenuType, id: string, body: Record<string, unknown>): ResourceObject {
    const record = this.liveMenu(type, id);
    checkType(type, body.type);
    if (body.id !== undefined && String(body.id) !== id) throw controlError(422, `id is ${id} here`, 'id');
    if (body.store_id !== undefined) throw controlError(422, 'a resource cannot move to another store', 'store_id');
    const attributes = parseAttributes(type, body.attributes, false, id);
    const links = withoutDerived(
      type,
      parseRelationships(type, body.relationships),
      record.resource.relationships ?? {},
    );
    const previousTrait = relatedId(record.resource, 'trait');
    // Links are checked on a copy: a refused request leaves the resource as it was.
    const resource = {
      ...record.resource,
      attributes: { ...record.resource.attributes, ...attributes },
      relationships: { ...record.resource.relationships },
    };
    const updated: MenuRecord = { ...record, resource };
    this.applyLinks(updated, links);
    record.resource = updated.resource;
    this.emit(`${type}.updated`, record);
    this.syncTraitOptions(record, previousTrait);
    return record.resource;
  }

  /** A destroyed trait takes its options with it. */
  destroyMenu(type: MenuType, id: string, withParent = false): void {
    const record = this.liveMenu(type, id);
    if (type === 'trait') {
      for (const optionId of relatedIds(record.resource, 'trait_options'))
        this.destroyMenu('trait_option', optionId, true);
    }
    this.table(type).delete(id);
    this.emit(`${type}.destroyed`, record);
    if (!withParent) this.dropReferences(record);
  }

  // ── stores and orders ────────────────────────────────────────────────────────────────────

  /** Stores have no events in the spec: they reach a mirror inside order events. */
  createStore(body: Record<string, unknown>): string {
    const input = parseStore(body, true);
    const id = this.nextId('store');
    const resource = storeResource(id, input.attributes.title as string, this.clock.now(), input.attributes);
    this.stores.set(id, { id, ownerId: input.ownerId ?? DEMO_USER_ID, currency: input.currency ?? 'GBP', resource });
    return id;
  }

  updateStore(id: string, body: Record<string, unknown>): ResourceObject {
    const record = this.stores.get(id);
    if (record === undefined) throw controlError(404, `no store ${id}`);
    const input = parseStore(body, false);
    if (input.ownerId !== undefined || input.currency !== undefined)
      throw controlError(
        422,
        'a store keeps its owner and currency',
        input.ownerId !== undefined ? 'owner_id' : 'currency',
      );
    record.resource = { ...record.resource, attributes: { ...record.resource.attributes, ...input.attributes } };
    return record.resource;
  }

  destroyStore(id: string): void {
    if (!this.stores.has(id)) throw controlError(404, `no store ${id}`);
    const inUse =
      MENU_TYPES.some((type) => [...this.table(type).values()].some((record) => record.storeId === id)) ||
      [...this.orders.values()].some((record) => record.storeId === id);
    if (inUse) throw controlError(409, `store ${id} still has menu resources or orders`);
    this.stores.delete(id);
  }

  placeOrder(body: Record<string, unknown>): string {
    const input = parseOrder(
      body,
      (storeId) => this.stores.get(storeId),
      (type, id) => this.table(type).get(id),
    );
    const store = this.stores.get(input.storeId)!;
    const id = this.nextId('order');
    const record = buildOrder({
      id,
      storeId: store.id,
      ownerId: store.ownerId,
      customerId: input.customerId,
      currency: store.currency,
      attributes: input.attributes,
      lines: input.lines,
      nextId: () => this.nextId('order_item'),
      now: this.clock.now(),
    });
    this.orders.set(id, record);
    this.emitOrder('order.created', record);
    return id;
  }

  updateOrder(id: string, body: Record<string, unknown>): ResourceObject {
    const record = this.orders.get(id);
    if (record === undefined) throw controlError(404, `no order ${id}`);
    const update = parseOrderUpdate(body);
    let order = update.status === undefined ? record.order : withStatus(record.order, update.status, this.clock.now());
    if (update.note !== undefined) order = { ...order, attributes: { ...order.attributes, note: update.note } };
    record.order = order;
    this.emitOrder('order.updated', record);
    return order;
  }

  // ── internals ────────────────────────────────────────────────────────────────────────────

  private table(type: MenuType): Map<string, MenuRecord> {
    return this.menu.get(type)!;
  }

  private liveMenu(type: MenuType, id: string): MenuRecord {
    const record = this.table(type).get(id);
    if (record === undefined) throw controlError(404, `no live ${type} ${id}`);
    return record;
  }

  private storeFor(storeId: unknown): StoreRecord {
    if (storeId === undefined) return this.stores.get(DEMO_STORE_ID) ?? [...this.stores.values()][0];
    const store =
      typeof storeId === 'string' || typeof storeId === 'number' ? this.stores.get(String(storeId)) : undefined;
    if (store === undefined) throw controlError(422, `store_id ${JSON.stringify(storeId)} is not a store`, 'store_id');
    return store;
  }

  private nextId(kind: string): string {
    const next = (this.lastIds.get(kind) ?? 0) + 1;
    this.lastIds.set(kind, next);
    return String(next);
  }

  private initialRelationships(type: MenuType): Record<string, unknown> {
    return Object.fromEntries(
      Object.entries(SCHEMAS[type].relationships).map(([name, spec]) => [
        name,
        spec.kind === 'to-many' ? toMany(spec.target, []) : toOne(spec.target, null),
      ]),
    );
  }

  /** Sets the given relationships, each id a live resource of the same store. */
  private applyLinks(record: MenuRecord, links: Map<string, string[] | string | null>): void {
    for (const [name, value] of links) {
      const target = SCHEMAS[record.type].relationships[name].target as MenuType;
      const ids = value === null ? [] : Array.isArray(value) ? value : [value];
      for (const id of ids) {
        if (this.table(target).get(id)?.storeId !== record.storeId) {
          throw controlError(
            422,
            `relationships.${name}: no live ${target} ${id} at store ${record.storeId}`,
            `relationships.${name}`,
          );
        }
      }
      record.resource.relationships![name] = Array.isArray(value) ? toMany(target, value) : toOne(target, value);
    }
  }

  /** A trait option's `trait` changed: the traits on both sides list it (or no longer do). */
  private syncTraitOptions(record: MenuRecord, previousTrait: string | null): void {
    if (record.type !== 'trait_option') return;
    const trait = relatedId(record.resource, 'trait');
    if (trait === previousTrait) return;
    if (previousTrait !== null) this.editOptionsOf(previousTrait, (ids) => ids.filter((id) => id !== record.id));
    if (trait !== null) this.editOptionsOf(trait, (ids) => [...ids, record.id]);
  }

  private editOptionsOf(traitId: string, edit: (ids: string[]) => string[]): void {
    const trait = this.table('trait').get(traitId);
    if (trait === undefined) return;
    trait.resource = {
      ...trait.resource,
      relationships: {
        ...trait.resource.relationships,
        trait_options: toMany('trait_option', edit(relatedIds(trait.resource, 'trait_options'))),
      },
    };
    this.emit('trait.updated', trait);
  }

  /** A destroyed resource disappears from every live resource referring to it. */
  private dropReferences(destroyed: MenuRecord): void {
    if (destroyed.type === 'trait_option') {
      const trait = relatedId(destroyed.resource, 'trait');
      if (trait !== null) this.editOptionsOf(trait, (ids) => ids.filter((id) => id !== destroyed.id));
      return;
    }
    const [referrer, name] =
      destroyed.type === 'product'
        ? (['collection', 'products'] as const)
        : destroyed.type === 'trait'
          ? (['product', 'traits'] as const)
          : [undefined, undefined];
    if (referrer === undefined) return;
    for (const record of this.table(referrer).values()) {
      const ids = relatedIds(record.resource, name);
      if (!ids.includes(destroyed.id)) continue;
      record.resource = {
        ...record.resource,
        relationships: {
          ...record.resource.relationships,
          [name]: toMany(
            destroyed.type,
            ids.filter((id) => id !== destroyed.id),
          ),
        },
      };
      this.emit(`${referrer}.updated`, record);
    }
  }

  private emit(eventType: string, record: MenuRecord): void {
    const included = eventType.endsWith('.destroyed') ? [] : [record.resource];
    this.publish(eventType as SpecEventName, record.ownerId, { id: record.id, type: record.type }, included);
  }

  private emitOrder(eventType: SpecEventName, record: OrderRecord): void {
    this.publish(eventType, record.ownerId, { id: record.id, type: 'order' }, this.orderIncluded(record));
  }

  private publish(
    eventType: SpecEventName,
    ownerId: string,
    subject: { id: string; type: string },
    included: ResourceObject[],
  ): void {
    this.seq += 1;
    const event: PlatformEvent = {
      id: String(this.seq),
      seq: this.seq,
      ordinal: this.ordinal++,
      eventType,
      createdAt: this.clock.now().toISOString(),
      ownerId,
      subject,
      // A deep copy: later changes to the state must not alter an event already produced.
      included: structuredClone(included),
    };
    this.sink.publish(event);
  }

  private sorted(resources: ResourceObject[]): ResourceObject[] {
    return resources.sort((a, b) => Number(a.id) - Number(b.id));
  }

  /** The demo menu, created through the same paths as the control API (nobody is subscribed yet). */
  private seedDemoMenu(): void {
    const traitIds = new Map<string, string>();
    for (const trait of DEMO_MENU.traits) {
      const traitId = this.createMenu('trait', {
        attributes: {
          title: trait.title,
          description: trait.description,
          required: trait.required,
          allow_multiple: trait.allow_multiple,
        },
      });
      traitIds.set(trait.title, traitId);
      trait.options.forEach(([title, pence], index) =>
        this.createMenu('trait_option', {
          attributes: {
            title,
            cost_adjustment: demoPrices(pence),
            default: trait.required && index === (trait.options.length > 2 ? 1 : 0),
          },
          relationships: { trait: traitId },
        }),
      );
    }
    for (const collection of DEMO_MENU.collections) {
      const productIds = collection.products.map(([title, description, pence, traits]) =>
        this.createMenu('product', {
          attributes: { title, description, base_cost: demoPrices(pence) },
          relationships: { traits: traits.map((name) => traitIds.get(name)!) },
        }),
      );
      this.createMenu('collection', {
        attributes: { title: collection.title, description: collection.description },
        relationships: { products: productIds },
      });
    }
  }
}

/** A body in the spec's resource shape may name its type: the path's. */
function checkType(type: MenuType, given: unknown): void {
  if (given !== undefined && given !== type) throw controlError(422, `type must be ${type} on this path`, 'type');
}

/**
 * The links to apply, without the relationships the platform derives itself: those are accepted
 * when they say what the platform already derives (`current`; empty for a new resource), else 422.
 */
function withoutDerived(
  type: MenuType,
  links: Map<string, string[] | string | null>,
  current: Record<string, unknown>,
): Map<string, string[] | string | null> {
  for (const [name, value] of links) {
    if (!isDerived(type, name)) continue;
    const given = value === null ? [] : Array.isArray(value) ? value : [value];
    const derived = relatedIdsOf(current[name]);
    if (given.length !== derived.length || !given.every((id) => derived.includes(id))) {
      const field = `relationships.${name}`;
      throw controlError(
        422,
        `${field} is kept by the platform${name === 'trait_options' ? " from each trait option's trait" : ''}: it is ${JSON.stringify(derived)} here`,
        field,
      );
    }
    links.delete(name);
  }
  return links;
}

function relatedIdsOf(relationship: unknown): string[] {
  const data = (relationship as { data?: unknown } | undefined)?.data;
  const identifiers = Array.isArray(data) ? data : data ? [data] : [];
  return identifiers.map((identifier) => String((identifier as { id: unknown }).id));
}
