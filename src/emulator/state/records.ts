import type { ResourceObject } from '../platform-event.js';
import type { MenuType } from './resource-schemas.js';

/** A menu resource as the emulator keeps it: the resource object plus what the platform knows about it. */
export interface MenuRecord {
  type: MenuType;
  id: string;
  storeId: string;
  ownerId: string;
  resource: ResourceObject;
}

export interface StoreRecord {
  id: string;
  ownerId: string;
  /** The currency orders at this store are priced in. */
  currency: string;
  resource: ResourceObject;
}

/** An order with the order products and order product trait options it owns. */
export interface OrderRecord {
  id: string;
  storeId: string;
  ownerId: string;
  customerId: string;
  order: ResourceObject;
  orderProducts: ResourceObject[];
  orderProductTraitOptions: ResourceObject[];
}

export const toOne = (type: string, id: string | null) => ({ data: id === null ? null : { id, type } });
export const toMany = (type: string, ids: readonly string[]) => ({ data: ids.map((id) => ({ id, type })) });

/** The ids of a to-many relationship of a resource object. */
export function relatedIds(resource: ResourceObject, name: string): string[] {
  const data = (resource.relationships?.[name] as { data?: unknown } | undefined)?.data;
  return Array.isArray(data) ? data.map((item: { id: string }) => item.id) : [];
}

/** The id of a to-one relationship of a resource object, or null. */
export function relatedId(resource: ResourceObject, name: string): string | null {
  const data = (resource.relationships?.[name] as { data?: { id?: string } | null } | undefined)?.data;
  return data?.id ?? null;
}
