import type { ResourceType } from './webhook-event.js';

export interface ResourceTable {
  type: ResourceType;
  /** The API collection name and the table name. */
  name: string;
  schema: 'proj_menu' | 'proj_orders';
  /** Link columns and how they derive from `relationships` (as in the read-model migration). */
  links: Record<string, string>;
}

const ids = (relationship: string) => `menu_sync_ids(relationships, '${relationship}')`;
const one = (relationship: string) => `relationships #>> '{${relationship},data,id}'`;

export const RESOURCE_TABLES: Record<ResourceType, ResourceTable> = {
  collection: { type: 'collection', name: 'collections', schema: 'proj_menu', links: { product_ids: ids('products') } },
  product: { type: 'product', name: 'products', schema: 'proj_menu', links: { trait_ids: ids('traits') } },
  trait: { type: 'trait', name: 'traits', schema: 'proj_menu', links: { trait_option_ids: ids('trait_options') } },
  trait_option: { type: 'trait_option', name: 'trait_options', schema: 'proj_menu', links: { trait_id: one('trait') } },
  order: { type: 'order', name: 'orders', schema: 'proj_orders', links: { order_product_ids: ids('order_products'), store_id: one('store') } },
  order_product: {
    type: 'order_product', name: 'order_products', schema: 'proj_orders',
    links: { order_product_trait_option_ids: ids('order_product_trait_options'), product_id: one('product') },
  },
  order_product_trait_option: {
    type: 'order_product_trait_option', name: 'order_product_trait_options', schema: 'proj_orders',
    links: { trait_option_id: one('trait_option') },
  },
  store: { type: 'store', name: 'stores', schema: 'proj_orders', links: {} },
};

export function tableByName(name: string): ResourceTable | undefined {
  return Object.values(RESOURCE_TABLES).find((table) => table.name === name);
}
