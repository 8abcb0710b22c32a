import type { ResourceObject } from '../platform-event.js';
import { toMany, toOne } from './records.js';

const WEEK = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];

/** A store resource with every field of the spec's store table. */
export function storeResource(
  id: string,
  title: string,
  createdAt: Date,
  overrides: Record<string, unknown> = {},
): ResourceObject {
  return {
    id,
    type: 'store',
    attributes: {
      id: Number(id),
      title,
      description: `${title}: small plates, big flavours.`,
      brand_color: '#c0392b',
      latitude: 51.5145,
      longitude: -0.0754,
      opening_times: Object.fromEntries(
        WEEK.map((day) => [
          day,
          day === 'sunday'
            ? [['10:00', '16:00']]
            : [
                ['8:00', '14:30'],
                ['17:00', '22:00'],
              ],
        ]),
      ),
      status: 'open',
      demo: true,
      active: true,
      due_at_options_mode: 'basic',
      created_at: createdAt.toISOString(),
      is_takeout: true,
      is_restaurant: true,
      geocoded_address: '1 Demo Street, London E1 6AN',
      prevent_orders_being_placed_outside_of_opening_times: false,
      table_is_required_for_eat_in_orders: true,
      'accepting_orders?': true,
      due_at_options: [15, 30, 45].map((minutes) => ({
        text: `In ${minutes} minutes`,
        value: minutes,
        type: 'relative',
      })),
      logo: Object.fromEntries(
        [1, 2, 3].map((x) => [`x${x}`, `https://images.example.com/stores/${id}/logo@${x}x.png`]),
      ),
      distance: null,
      walking_distance: null,
      ...overrides,
    },
    relationships: {
      photos: toMany('photo', []),
      tables: toMany('table', ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12']),
      loyalty_scheme: toOne('loyalty_scheme', null),
    },
  };
}
