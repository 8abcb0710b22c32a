import { formatTable, shortIds } from './output.js';

describe('list output', () => {
  it('shows each id by its first 8 characters, or as many more as tell it from its neighbours', () => {
    const ids = [
      '4b18fa47-0000-4000-8000-000000000001',
      '4b18fa47-1000-4000-8000-000000000002',
      '4b18fa48-0000-4000-8000-000000000003',
      'c0ffee00-0000-4000-8000-000000000004',
    ];
    expect([...shortIds(ids)]).toEqual([
      [ids[0], '4b18fa47-0'],
      [ids[1], '4b18fa47-1'],
      [ids[2], '4b18fa48'],
      [ids[3], 'c0ffee00'],
    ]);
  });

  it('pads every column but the last to its widest cell', () => {
    expect(
      formatTable(
        ['ID', 'STATE', 'LAST ERROR'],
        [
          ['a1', 'retrying', '3D000'],
          ['b22222', 'active', ''],
        ],
      ),
    ).toBe('ID      STATE     LAST ERROR\na1      retrying  3D000\nb22222  active\n');
  });
});
