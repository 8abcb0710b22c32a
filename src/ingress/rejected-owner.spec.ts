import { ownerOfRejected } from './rejected-owner.js';

const naming = (id: string) =>
  Buffer.from(`{"data":{"type":"nope","relationships":{"resource_owner":{"data":{"id":${id},"type":"user"}}}}}`);

describe('ownerOfRejected', () => {
  it('reads the owner a rejected body names, canonical as the parser reads ids', () => {
    expect(ownerOfRejected(naming('"owner-7"'))).toBe('owner-7');
    expect(ownerOfRejected(naming('42'))).toBe('42');
    expect(ownerOfRejected(naming('12345678901234567890123'))).toBe('12345678901234567890123');
    expect(ownerOfRejected(naming('4.2e1'))).toBe('42');
  });

  it('is null when the body names none it can read', () => {
    expect(ownerOfRejected(Buffer.from('not json'))).toBeNull();
    expect(ownerOfRejected(Buffer.from('[]'))).toBeNull();
    expect(ownerOfRejected(Buffer.from('{"data":{"relationships":{"resource_owner":null}}}'))).toBeNull();
    expect(ownerOfRejected(naming('1.5'))).toBeNull();
    expect(ownerOfRejected(naming('""'))).toBeNull();
    expect(ownerOfRejected(naming('{"x":1}'))).toBeNull();
    expect(ownerOfRejected(naming(`"${'x'.repeat(256)}"`))).toBeNull();
  });
});
