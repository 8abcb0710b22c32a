import type { MirrorResource, SnapshotResource } from './snapshot-diff.js';
import type { FetchedList, StoreSnapshot } from './snapshot.fetcher.js';
import { compareType, destroysRefused } from './type-comparison.js';
import type { ComparisonOptions } from './type-comparison.js';

const RUN = '0b6c7a52-9a43-4c2e-9d0e-3f1d2a7c5e11';
const options: ComparisonOptions = {
  owner: '4001',
  runId: RUN,
  refused: undefined,
  maxDestroyRatio: 0.5,
  minImplausibleDestroys: 5,
};
const product = (id: string, title = `P${id}`): SnapshotResource => ({
  id,
  type: 'product',
  attributes: { title },
  relationships: {},
});
const mirrored = (id: string, title = `P${id}`, deleted = false): MirrorResource => ({
  id,
  attributes: { title },
  relationships: {},
  deleted,
});
const list = (resources: SnapshotResource[], complete = true, error?: string): FetchedList => ({
  resources,
  complete,
  ...(error ? { error } : {}),
});
const empty = list([]);

function store(storeId: string, products: FetchedList, fetchedAt = new Date('2024-05-01T12:00:00Z')): StoreSnapshot {
  return {
    storeId,
    fetchedAt,
    menu: { collection: empty, product: products, trait: empty, trait_option: empty },
    orders: empty,
  };
}

describe('compareType (reconcile: one type of an owner, compared with the mirror)', () => {
  it('given a new, a changed and an absent product, then each is one difference with the entry that heals it', () => {
    const comparison = compareType(
      'product',
      [store('1', list([product('1'), product('2', 'renamed')]))],
      [mirrored('2'), mirrored('3'), mirrored('4'), mirrored('5'), mirrored('6')],
      options,
    );
    expect(comparison.checked).toEqual(new Map([['1', 2]]));
    expect(
      comparison.differences.map(({ kind, storeId, entry }) => [kind, storeId, entry?.eventType, entry?.subjectId]),
    ).toEqual([
      ['created', '1', 'product.created', '1'],
      ['updated', '1', 'product.updated', '2'],
      ['destroyed', '1', 'product.destroyed', '3'],
      ['destroyed', '1', 'product.destroyed', '4'],
      ['destroyed', '1', 'product.destroyed', '5'],
      ['destroyed', '1', 'product.destroyed', '6'],
    ]);
    expect(comparison.differences.every(({ entry }) => entry?.source === 'reconcile' && entry.ownerId === '4001')).toBe(
      true,
    );
    expect(comparison).toMatchObject({ errors: [], notes: [] });
  });

  it('given two stores listing one product, then it counts for the first; a destroy is charged to the last and dated by the earliest fetch', () => {
    const early = new Date('2024-05-01T12:00:00Z');
    const late = new Date('2024-05-01T12:00:05Z');
    const comparison = compareType(
      'product',
      [store('A', list([product('1')]), late), store('B', list([product('1'), product('2')]), early)],
      [mirrored('9')],
      { ...options, refused: destroysRefused(undefined, 2) },
    );
    expect(
      comparison.differences.map(({ kind, storeId, entry }) => [kind, storeId, entry?.subjectId, entry?.occurredAt]),
    ).toEqual([
      ['created', 'A', '1', late.toISOString()],
      ['created', 'B', '2', early.toISOString()],
    ]);
    expect(comparison.notes).toEqual([
      {
        storeId: 'B',
        text: expect.stringMatching(/^product: destroys skipped: the owner has 2 stores.*1 absent resource\(s\) kept$/),
      },
    ]);
  });

  it("given an incomplete list with an error, then the error is its store's and nothing is destroyed", () => {
    const comparison = compareType(
      'product',
      [store('1', list([product('1')], false, 'GET /stores/1/products?page=2 answered 500'))],
      [mirrored('1'), mirrored('2')],
      options,
    );
    expect(comparison.differences).toEqual([]);
    expect(comparison.errors).toEqual([{ storeId: '1', text: 'GET /stores/1/products?page=2 answered 500' }]);
    expect(comparison.notes).toEqual([
      { storeId: '1', text: 'product: the snapshot is incomplete: 1 absent resource(s) kept' },
    ]);
  });

  it('given orders absent from the list, then none is destroyed (orders never are), and a new one is created with what it includes', () => {
    const order: SnapshotResource = {
      id: '77',
      type: 'order',
      attributes: { status: 'paid' },
      relationships: {},
      related: [{ id: '5', type: 'store', attributes: { name: 'Main' }, relationships: {} }],
    };
    const snapshot = { ...store('5', empty), orders: list([order]) };
    const comparison = compareType('order', [snapshot], [mirrored('70')], options);
    expect(comparison.differences.map(({ kind, entry }) => [kind, entry?.eventType, entry?.subjectId])).toEqual([
      ['created', 'order.created', '77'],
    ]);
    expect(JSON.parse(comparison.differences[0].entry!.payload).included.map((r: { type: string }) => r.type)).toEqual([
      'order',
      'store',
    ]);
  });

  it('given an id the log cannot hold, then the difference is counted without an entry and its store reports why', () => {
    const comparison = compareType(
      'product',
      [store('1', list([product('y'.repeat(300)), product('2')]))],
      [],
      options,
    );
    expect(comparison.differences.map(({ kind, entry }) => [kind, entry === null])).toEqual([
      ['created', true],
      ['created', false],
    ]);
    expect(comparison.errors).toEqual([
      { storeId: '1', text: expect.stringMatching(/^product "y{40}…" cannot be logged: .*; skipped$/) },
    ]);
  });
});

describe('destroysRefused (when absence from the snapshots proves nothing)', () => {
  it('given --store, or an owner of several stores, then destroys are refused, and it says why; one store refuses nothing', () => {
    expect(destroysRefused('1', 1)).toMatch(/^destroys skipped: --store given/);
    expect(destroysRefused(undefined, 2)).toMatch(/^destroys skipped: the owner has 2 stores/);
    expect(destroysRefused(undefined, 1)).toBeUndefined();
  });
});
