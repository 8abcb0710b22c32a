import {
  AS_OF,
  accepted,
  MIN_CURSOR,
  type DirectRoute,
  oneOf,
  OWNER_ID,
  type QueryField,
  type QueryReading,
  readQuery,
  required,
} from '../query/direct-reads.js';
import type { ReadRouter } from '../database/read-router.service.js';
import { MenuDocumentService } from './menu-document.service.js';
import { sendMenu } from './menu.controller.js';
import type { MenuQuery } from './menu-query.dto.js';

/** MenuQuery's fields in class-validator's order: its own, then AsOfQuery's `as_of` and `min_cursor`. */
const MENU_FIELDS: readonly QueryField[] = [
  required(OWNER_ID),
  {
    name: 'form',
    read: oneOf(['expanded', 'normalized']),
    absent: 'expanded',
  },
  AS_OF,
  MIN_CURSOR,
];

/** `/menu`'s query as MenuQuery reads it. */
export function readMenuQuery(query: Record<string, unknown>): QueryReading {
  return readQuery(MENU_FIELDS, query);
}

/** `/menu` answered without Nest's pipeline when its query is one MenuQuery accepts (installDirectReads). */
export function menuDirectRoute(menus: MenuDocumentService, router: ReadRouter): [string, DirectRoute] {
  return [
    '/api/v1/menu',
    {
      read: (request) => accepted(readMenuQuery(request.query as Record<string, unknown>)),
      serve: (request, reply, query) =>
        sendMenu(reply, menus, router, query as unknown as MenuQuery, request.headers['if-none-match']),
    },
  ];
}
