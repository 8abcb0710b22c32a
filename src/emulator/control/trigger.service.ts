import { Injectable } from '@nestjs/common';
import { isSpecEventName } from '../../domain/event-names.js';
import { DeliveryService } from '../delivery/delivery.service.js';
import { controlError } from '../emulator-http.error.js';
import { DEMO_STORE_ID, EmulatorState } from '../state/emulator-state.service.js';
import type { MenuType } from '../state/resource-schemas.js';

const STATUS_CYCLE = ['pending', 'accepted', 'preparing', 'ready', 'collected'];

/**
 * `POST /_emulator/trigger` (and `menu-sync emulator trigger <event>`): makes a plausible change
 * that produces the named event, on the given resource or on a sensible default one.
 */
@Injectable()
export class TriggerService {
  constructor(
    private readonly state: EmulatorState,
    private readonly deliveries: DeliveryService,
  ) {}

  trigger(eventType: unknown, id: unknown): { event_ids: string[]; subject: { type: string; id: string } } {
    if (typeof eventType !== 'string' || !isSpecEventName(eventType))
      throw controlError(422, "event_type must be one of the spec's 14 event names", 'event_type');
    if (id !== undefined && typeof id !== 'string' && typeof id !== 'number')
      throw controlError(422, 'id must be a resource id', 'id');
    const before = this.deliveries.events().at(-1)?.ordinal ?? -1;
    const [type, action] = eventType.split('.') as [MenuType | 'order', string];
    const subjectId = type === 'order' ? this.orderChange(action, id) : this.menuChange(type, action, id);
    const produced = this.deliveries.events().filter((event) => event.ordinal > before);
    return { event_ids: produced.map((event) => event.id), subject: { type, id: subjectId } };
  }

  private menuChange(type: MenuType, action: string, id: unknown): string {
    const n = this.state.liveIds(type).length + 1;
    if (action === 'created') return this.state.createMenu(type, this.newResource(type, n));
    const target = id === undefined ? this.pick(type, action === 'updated' ? 'first' : 'last') : String(id);
    if (action === 'destroyed') {
      this.state.destroyMenu(type, target);
      return target;
    }
    this.state.updateMenu(type, target, { attributes: { description: `Changed at ${new Date().toISOString()}` } });
    return target;
  }

  private newResource(type: MenuType, n: number): Record<string, unknown> {
    switch (type) {
      case 'collection':
        return { attributes: { title: `Specials ${n}` } };
      case 'product':
        return {
          attributes: {
            title: `Chef's special ${n}`,
            description: "Ask about today's special",
            base_cost: { GBP: 900 + 50 * (n % 10), EUR: 1050 + 50 * (n % 10) },
          },
        };
      case 'trait':
        return { attributes: { title: `Choice ${n}` } };
      case 'trait_option':
        return {
          attributes: { title: `Option ${n}`, cost_adjustment: { GBP: 50 } },
          relationships: { trait: this.pick('trait', 'first') },
        };
    }
  }

  private orderChange(action: string, id: unknown): string {
    if (action === 'created') {
      const product = this.state.menuOf(DEMO_STORE_ID, 'product')[0];
      if (product === undefined) throw controlError(409, 'the demo store has no product to order');
      return this.state.placeOrder({
        store_id: DEMO_STORE_ID,
        order_products: [{ product_id: product.id, quantity: 1 }],
      });
    }
    const orderId = id === undefined ? this.pick('order', 'last') : String(id);
    const order = this.state.state().orders.find((candidate) => candidate.id === orderId);
    const status = String(order?.attributes.status ?? 'pending');
    const next = STATUS_CYCLE[(STATUS_CYCLE.indexOf(status) + 1) % STATUS_CYCLE.length];
    this.state.updateOrder(orderId, { attributes: { status: next } });
    return orderId;
  }

  private pick(type: MenuType | 'order', end: 'first' | 'last'): string {
    const ids = this.state.liveIds(type);
    const id = end === 'first' ? ids[0] : ids.at(-1);
    if (id === undefined) throw controlError(409, `there is no live ${type} to change`);
    return id;
  }
}
