import type { ResourceType } from '../domain/webhook-event.js';

export interface ResourceTable {
  type: ResourceType;
  /** The API collection name and the table name. */
  name: string;
  schema: 'proj_menu' | 'proj_orders';
}

export const RESOURCE_TABLES: Record<ResourceType, ResourceTable> = {
  collection: { type: 'collection', name: 'collections', schema: 'proj_menu' },
  product: { type: 'product', name: 'products', schema: 'proj_menu' },
  trait: { type: 'trait', name: 'traits', schema: 'proj_menu' },
  trait_option: { type: 'trait_option', name: 'trait_options', schema: 'proj_menu' },
  order: { type: 'order', name: 'orders', schema: 'proj_orders' },
  order_product: { type: 'order_product', name: 'order_products', schema: 'proj_orders' },
  order_product_trait_option: {
    type: 'order_product_trait_option',
    name: 'order_product_trait_options',
    schema: 'proj_orders',
  },
  store: { type: 'store', name: 'stores', schema: 'proj_orders' },
};

export function tableByName(name: string): ResourceTable | undefined {
  return Object.values(RESOURCE_TABLES).find((table) => table.name === name);
}
