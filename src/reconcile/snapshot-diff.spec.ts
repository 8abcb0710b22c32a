import { diffSnapshot, MirrorResource, SnapshotResource } from './snapshot-diff.js';

const resource = (id: string, title = `P${id}`): SnapshotResource => ({
  id,
  type: 'product',
  attributes: { id: Number(id), title },
  relationships: { traits: { data: [] } },
});
const mirrored = (id: string, title = `P${id}`, deleted = false): MirrorResource => ({
  id,
  attributes: { title, id: Number(id) },
  relationships: { traits: { data: [] } },
  deleted,
});
const guard = { complete: true, maxRatio: 0.5, minCount: 5 };

describe('diffSnapshot (reconcile differences)', () => {
  it('given equal content in another key order, when diffed, then nothing differs', () => {
    expect(diffSnapshot([resource('1'), resource('2')], [mirrored('1'), mirrored('2')], guard)).toEqual({
      created: [],
      updated: [],
      destroyed: [],
    });
  });

  it('given a resource the mirror lacks or holds as deleted, then it is created', () => {
    const diff = diffSnapshot([resource('1'), resource('2')], [mirrored('2', 'P2', true)], guard);
    expect(diff.created.map((r) => r.id)).toEqual(['1', '2']);
  });

  it('given changed attributes or relationships, then it is updated', () => {
    const relinked = { ...resource('2'), relationships: { traits: { data: [{ id: '9', type: 'trait' }] } } };
    const diff = diffSnapshot([resource('1', 'renamed'), relinked], [mirrored('1'), mirrored('2')], guard);
    expect(diff.updated.map((r) => r.id)).toEqual(['1', '2']);
  });

  it('given a live mirrored resource absent from a complete snapshot, then it is destroyed; deleted ones stay as they are', () => {
    const diff = diffSnapshot([resource('1')], [mirrored('1'), mirrored('2'), mirrored('3', 'x', true)], guard);
    expect(diff.destroyed).toEqual(['2']);
  });

  it('given an incomplete snapshot, then nothing is destroyed, and it says why', () => {
    const diff = diffSnapshot([resource('1')], [mirrored('1'), mirrored('2')], { ...guard, complete: false });
    expect(diff.destroyed).toEqual([]);
    expect(diff.destroysSkipped).toMatch(/incomplete/);
  });

  it('given a reason to trust no absence (a store filter, several stores), then nothing is destroyed, and it says why', () => {
    const diff = diffSnapshot([resource('1')], [mirrored('1'), mirrored('2')], {
      ...guard,
      refused: 'destroys skipped: --store given',
    });
    expect(diff).toEqual({
      created: [],
      updated: [],
      destroyed: [],
      destroysSkipped: 'destroys skipped: --store given; 1 absent resource(s) kept',
    });
    expect(
      diffSnapshot([resource('1')], [mirrored('1')], { ...guard, refused: 'destroys skipped: --store given' }),
    ).toEqual({ created: [], updated: [], destroyed: [] });
  });

  it('given an empty snapshot where the mirror has hundreds, then nothing is destroyed (implausible)', () => {
    const mirror = Array.from({ length: 300 }, (_, i) => mirrored(String(i + 1)));
    const diff = diffSnapshot([], mirror, guard);
    expect(diff).toMatchObject({ destroyed: [], destroysSkipped: expect.stringMatching(/implausible.*300 of 300/) });
  });

  it('given a small menu, then it may still shrink below the ratio (the minimum count)', () => {
    expect(diffSnapshot([], [mirrored('1'), mirrored('2')], guard).destroyed).toEqual(['1', '2']);
    const mirror = Array.from({ length: 30 }, (_, i) => mirrored(String(i + 1)));
    expect(
      diffSnapshot(
        mirror.slice(6).map((m) => resource(m.id)),
        mirror,
        guard,
      ).destroyed,
    ).toHaveLength(6);
  });
});
