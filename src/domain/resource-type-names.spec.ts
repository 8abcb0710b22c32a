import { RESOURCE_TYPE_NAMES, resourceTypesProblem } from './resource-type-names.js';

describe('resourceTypesProblem (a list of resource types, in the singular)', () => {
  it('takes every resource type, repeated or not, and an empty list', () => {
    expect(resourceTypesProblem([...RESOURCE_TYPE_NAMES, 'product'])).toBeNull();
    expect(resourceTypesProblem([])).toBeNull();
    expect(resourceTypesProblem(['none'], ['none'])).toBeNull();
  });

  it('names a plural with its singular, several at once', () => {
    expect(resourceTypesProblem(['product', 'traits'])).toBe('traits is a collection name; the type is trait');
    expect(resourceTypesProblem(['stores', 'orders'])).toBe(
      'stores, orders are collection names; the types are store, order',
    );
  });

  it('names anything else as no resource type, listing the types', () => {
    const types = 'collection, product, trait, trait_option, order, order_product, order_product_trait_option, store';
    expect(resourceTypesProblem(['Product'])).toBe(`Product is not a resource type (${types})`);
    expect(resourceTypesProblem([1, null])).toBe(`1, null are not resource types (${types})`);
    expect(resourceTypesProblem(['none'])).toBe(`none is not a resource type (${types})`);
    expect(resourceTypesProblem(['products', 'widgets', 'traits', 'menu'])).toBe(
      `products, traits are collection names; the types are product, trait; widgets, menu are not resource types (${types})`,
    );
  });
});
